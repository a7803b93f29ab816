#include "server/completion_text.h"

#include <algorithm>

namespace kvplan::server {
namespace {

// Length of the longest suffix of `text` that is a proper prefix of `stop`.
size_t partial_stop_suffix(std::string_view text, std::string_view stop) {
  for (size_t n = std::min(text.size(), stop.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == stop.substr(0, n)) return n;
  }
  return 0;
}

// The largest end <= `end` that does not cut a UTF-8 character of `text` in two.
size_t utf8_boundary(std::string_view text, size_t end) {
  size_t start = end;
  // Back over at most 3 continuation bytes to the lead byte of the last character.
  while (start > 0 && end - start < 4 &&
         (static_cast<unsigned char>(text[start - 1]) & 0xC0) == 0x80) {
    --start;
  }
  if (start == 0) return end;
  const auto lead = static_cast<unsigned char>(text[start - 1]);
  size_t length = 1;
  if ((lead & 0xE0) == 0xC0)
    length = 2;
  else if ((lead & 0xF0) == 0xE0)
    length = 3;
  else if ((lead & 0xF8) == 0xF0)
    length = 4;
  const size_t have = end - (start - 1);
  return have >= length || length == 1 ? end : start - 1;
}

}  // namespace

CompletionText::CompletionText(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string CompletionText::take(size_t end) {
  const size_t from = sent_.size();
  if (end <= from) return {};
  std::string out = text_.substr(from, end - from);
  sent_ += out;
  return out;
}

std::string CompletionText::append(std::string_view piece) {
  if (stopped_) return {};
  // No stop string starts inside what was sent: every suffix that could begin one was held back.
  const size_t search_from = sent_.size();
  text_ += piece;
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t at = text_.find(stop, search_from);
    first = std::min(first, at);
  }
  if (first != std::string::npos) {
    text_.resize(first);
    stopped_ = true;
    return take(first);
  }
  size_t hold = 0;
  for (const std::string& stop : stops_) hold = std::max(hold, partial_stop_suffix(text_, stop));
  return take(utf8_boundary(text_, text_.size() - hold));
}

std::string CompletionText::finish() {
  if (stopped_) return {};
  const size_t complete = utf8_boundary(text_, text_.size());
  std::string out = take(complete);
  if (complete < text_.size()) {
    text_.resize(complete);
    text_ += "\xEF\xBF\xBD";  // U+FFFD for the cut character
    out += take(text_.size());
  }
  return out;
}

}  // namespace kvplan::server
