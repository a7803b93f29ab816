// Helpers shared by the subcommands: parsing human sizes and token counts, and locating the
// configs/ directory. Byte counts print with core/format_bytes.h.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace kvplan::cli {

// "32768", "32K" (= 32768), "128k", "1M" -> tokens. Throws Error(kInvalidArgument) naming `option`.
int64_t parse_token_count(std::string_view text, std::string_view option);

// "80GiB", "141GB", "512MiB", "1e9", "24G" (G/M/K alone mean GiB/MiB/KiB) -> bytes.
uint64_t parse_byte_size(std::string_view text, std::string_view option);

// configs/ of this checkout: $KVPLAN_CONFIG_DIR, else the source tree the binary was built from.
std::filesystem::path config_dir();

}  // namespace kvplan::cli
