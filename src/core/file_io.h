// Whole-file reads and atomic writes.
//
// write_file_atomic writes to "<path>.tmp.<pid>.<n>" in the same directory (n unique within the
// process, the file created exclusively), syncs it, then renames it over `path`, so a reader never
// sees a half-written plan, profile or report, and threads writing the same path concurrently
// each replace it with one whole version (the last rename wins).
//
//   std::string text = kvplan::read_text_file("config.json");
//   kvplan::write_file_atomic("plan.json", json.dump(2));
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace kvplan {

// Throws Error(kNotFound) if the file is missing, kIo if it cannot be read.
std::string read_text_file(const std::filesystem::path& path);

// Throws Error(kIo) naming the file when it cannot be created, written, synced or renamed; the
// temporary file is removed then.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

}  // namespace kvplan
