#include "profile/candidate_lists.h"

#include <algorithm>
#include <set>

#include "core/error.h"

namespace kvplan {
namespace {

// The non-empty, trimmed items of a comma-separated list.
std::vector<std::string> list_items(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    start = end + 1;
    if (!item.empty()) out.push_back(std::move(item));
  }
  return out;
}

}  // namespace

std::vector<KvPair> kvtuner_candidates() {
  std::vector<KvPair> out;
  const char* names[] = {"int8", "int4", "int2"};
  for (const char* k : names) {
    for (const char* v : names) out.push_back({Format::parse(k), Format::parse(v)});
  }
  return out;
}

std::vector<KvPair> parse_candidates(const std::string& text) {
  std::vector<KvPair> out;
  std::set<std::string> seen;
  for (const std::string& item : list_items(text)) {
    const KvPair p = KvPair::parse(item);
    if (p.is_slot()) {
      fail(ErrorCode::kInvalidArgument,
           "--candidates: '{}' is an opaque slot and cannot be profiled", item);
    }
    if (!seen.insert(p.name()).second) {
      fail(ErrorCode::kInvalidArgument, "--candidates: '{}' is listed twice", item);
    }
    out.push_back(p);
  }
  if (out.empty()) fail(ErrorCode::kInvalidArgument, "--candidates: no pairs in '{}'", text);
  return out;
}

std::vector<Format> parse_format_list(const std::string& text) {
  std::vector<Format> out;
  if (text == "all") {
    for (const KvFormatTraits& info : format_table()) {
      if (info.id != FormatId::kF32) out.emplace_back(info.id);
    }
    return out;
  }
  for (const std::string& item : list_items(text)) {
    const Format f = Format::parse(item);
    if (f.is_slot() || f.id() == FormatId::kF32) {
      fail(ErrorCode::kInvalidArgument,
           "--formats: '{}' is not a candidate (expected a quantized or 16-bit format)", item);
    }
    if (std::find(out.begin(), out.end(), f) != out.end()) {
      fail(ErrorCode::kInvalidArgument, "--formats: '{}' is listed twice", item);
    }
    out.push_back(f);
  }
  if (out.empty()) fail(ErrorCode::kInvalidArgument, "--formats: no formats in '{}'", text);
  return out;
}

}  // namespace kvplan
