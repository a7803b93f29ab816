// Whole-file reads and atomic writes.
//
// write_file_atomic writes to "<path>.tmp.<pid>" in the same directory, flushes, then renames over
// `path`, so a reader never sees a half-written plan, profile or report.
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

void write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

}  // namespace kvplan
