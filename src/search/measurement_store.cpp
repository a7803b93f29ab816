#include "search/measurement_store.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <string_view>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "core/json_fields.h"
#include "core/json_text.h"

namespace kvplan::search {
namespace {

constexpr int kFormatVersion = 1;
constexpr std::string_view kHeaderKey = "kvplan_measurements";

uint64_t parse_key(const JsonFields& line) {
  const std::string text = line.string("key");
  uint64_t key = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), key, 16);
  if (text.size() != 16 || ec != std::errc{} || end != text.data() + text.size()) {
    line.invalid("key", fmt::format("expected 16 hex digits, got '{}'", text));
  }
  return key;
}

std::string cell_line(uint64_t key, const MeasurementStore::Cell& c) {
  // fmt's "{}" of a double is its shortest round-trip form: read back, it has the same bits.
  return fmt::format("{{\"key\": \"{}\", \"kl\": {}, \"nll\": {}, \"agree\": {}}}\n", hash_hex(key),
                     c.kl, c.nll, c.agree);
}

}  // namespace

MeasurementStore::MeasurementStore(std::filesystem::path path, std::string context)
    : path_(std::move(path)), context_(std::move(context)) {
  const std::string source = path_.string();
  std::error_code ec;
  const bool exists = std::filesystem::exists(path_, ec);
  if (exists) {
    std::string text = read_text_file(path_);
    const size_t whole = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if (whole < text.size()) {
      spdlog::warn("{}: its last line was cut short ({} bytes, a run stopped mid-write): dropped",
                   source, text.size() - whole);
      std::filesystem::resize_file(path_, whole, ec);
      if (ec) fail(ErrorCode::kIo, "{}: cannot truncate: {}", source, ec.message());
      text.resize(whole);
    }
    size_t line_no = 0;
    for (size_t begin = 0; begin < text.size();) {
      const size_t end = text.find('\n', begin);
      const std::string_view line(text.data() + begin, end - begin);
      begin = end + 1;
      ++line_no;
      const std::string where = fmt::format("{}:{}", source, line_no);
      const nlohmann::json j = parse_json_text(line, where);
      const JsonFields f(j, where);
      if (line_no == 1) {
        const int64_t version = f.integer(kHeaderKey, 1, 1 << 20);
        if (version != kFormatVersion) {
          f.invalid(kHeaderKey, fmt::format("format version {} is not the one this kvplan reads "
                                            "({})",
                                            version, kFormatVersion));
        }
        continue;
      }
      const uint64_t key = parse_key(f);
      const Cell cell{f.number("kl"), f.number("nll"),
                      f.integer("agree", 0, std::numeric_limits<int64_t>::max())};
      cells_.emplace(key, cell);
    }
  }
  file_ = std::fopen(source.c_str(), "ab");
  if (file_ == nullptr) {
    const int err = errno;
    fail(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo, "{}: cannot open for appending: {}",
         source, std::strerror(err));
  }
  // "ab" leaves the position unspecified until the first write: ask for the end.
  if (std::fseek(file_, 0, SEEK_END) == 0 && std::ftell(file_) == 0) {
    const std::string header = fmt::format("{{\"{}\": {}}}\n", kHeaderKey, kFormatVersion);
    if (std::fwrite(header.data(), 1, header.size(), file_) != header.size() ||
        std::fflush(file_) != 0) {
      std::fclose(file_);
      fail(ErrorCode::kIo, "{}: cannot write: {}", source, std::strerror(errno));
    }
  }
}

MeasurementStore::~MeasurementStore() {
  if (file_ != nullptr) std::fclose(file_);
}

size_t MeasurementStore::size() const {
  const std::lock_guard lock(mutex_);
  return cells_.size();
}

std::optional<MeasurementStore::Cell> MeasurementStore::find(uint64_t key) const {
  const std::lock_guard lock(mutex_);
  const auto it = cells_.find(key);
  if (it == cells_.end()) return std::nullopt;
  return it->second;
}

void MeasurementStore::add(uint64_t key, const Cell& cell) {
  if (!std::isfinite(cell.kl) || !std::isfinite(cell.nll)) return;
  const std::lock_guard lock(mutex_);
  if (!cells_.emplace(key, cell).second) return;
  const std::string line = cell_line(key, cell);
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0) {
    fail(ErrorCode::kIo, "{}: cannot append a measurement: {}", path_.string(),
         std::strerror(errno));
  }
}

}  // namespace kvplan::search
