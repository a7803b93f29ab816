#include "cli/cli_util.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace kvplan::cli {
namespace {

bool parse_double(std::string_view text, double* out, std::string_view* suffix) {
  const std::string s(text);
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  if (end == s.c_str()) return false;
  *suffix = text.substr(static_cast<size_t>(end - s.c_str()));
  return std::isfinite(*out);
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

int64_t parse_token_count(std::string_view text, std::string_view option) {
  double value = 0;
  std::string_view suffix;
  if (!parse_double(text, &value, &suffix)) {
    fail(ErrorCode::kInvalidArgument, "{} '{}': expected a token count such as 4096 or 32K", option,
         text);
  }
  const std::string unit = lower(suffix);
  double multiplier = 1;
  if (unit == "k") {
    multiplier = 1024;
  } else if (unit == "m") {
    multiplier = 1024 * 1024;
  } else if (!unit.empty()) {
    fail(ErrorCode::kInvalidArgument, "{} '{}': unknown suffix '{}' (use K or M)", option, text,
         suffix);
  }
  const double tokens = value * multiplier;
  if (!(tokens >= 1) || tokens > 1e12 || tokens != std::floor(tokens)) {
    fail(ErrorCode::kInvalidArgument, "{} '{}': expected a whole number of tokens >= 1", option,
         text);
  }
  return static_cast<int64_t>(tokens);
}

uint64_t parse_byte_size(std::string_view text, std::string_view option) {
  double value = 0;
  std::string_view suffix;
  if (!parse_double(text, &value, &suffix) || value < 0) {
    fail(ErrorCode::kInvalidArgument, "{} '{}': expected a size such as 80GiB or 16GB", option,
         text);
  }
  const std::string unit = lower(suffix);
  double multiplier = 0;
  if (unit.empty() || unit == "b") multiplier = 1;
  if (unit == "k" || unit == "kib") multiplier = 1024.0;
  if (unit == "m" || unit == "mib") multiplier = 1024.0 * 1024;
  if (unit == "g" || unit == "gib") multiplier = 1024.0 * 1024 * 1024;
  if (unit == "t" || unit == "tib") multiplier = 1024.0 * 1024 * 1024 * 1024;
  if (unit == "kb") multiplier = 1e3;
  if (unit == "mb") multiplier = 1e6;
  if (unit == "gb") multiplier = 1e9;
  if (unit == "tb") multiplier = 1e12;
  if (multiplier == 0) {
    fail(ErrorCode::kInvalidArgument,
         "{} '{}': unknown unit '{}' (B, KiB, MiB, GiB, TiB, KB, MB, "
         "GB, TB)",
         option, text, suffix);
  }
  return static_cast<uint64_t>(std::llround(value * multiplier));
}

std::filesystem::path config_dir() {
  if (const char* env = std::getenv("KVPLAN_CONFIG_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
  return KVPLAN_SOURCE_CONFIG_DIR;
}

}  // namespace kvplan::cli
