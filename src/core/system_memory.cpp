#include "core/system_memory.h"

#include <charconv>
#include <cstdlib>
#include <fstream>
#include <string_view>

#include <unistd.h>

#include "core/error.h"

namespace kvplan {
namespace {

const char* limit_env() {
  const char* env = std::getenv("KVPLAN_MEMORY_LIMIT");
  return env != nullptr && *env != '\0' ? env : nullptr;
}

}  // namespace

std::optional<uint64_t> available_memory_bytes() {
  if (const char* env = limit_env()) {
    const std::string_view text(env);
    uint64_t bytes = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), bytes);
    if (ec != std::errc() || end != text.data() + text.size() || bytes == 0) {
      fail(ErrorCode::kInvalidArgument,
           "KVPLAN_MEMORY_LIMIT='{}': expected a positive whole number of bytes", text);
    }
    return bytes;
  }
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

std::optional<uint64_t> physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return std::nullopt;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

std::optional<uint64_t> resident_memory_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (!(statm >> size >> resident) || page <= 0) return std::nullopt;
  return resident * static_cast<uint64_t>(page);
}

std::string available_memory_source() {
  return limit_env() != nullptr ? "KVPLAN_MEMORY_LIMIT" : "MemAvailable";
}

}  // namespace kvplan
