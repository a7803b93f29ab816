#include "model/tokenizer/spm_tokenizer.h"

#include <cstdio>
#include <queue>
#include <utility>

#include <fmt/format.h>

#include "core/error.h"
#include "model/tokenizer/utf8.h"

namespace kvplan {
namespace {

constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

std::string escape_spaces(std::string_view text, bool prefix_space) {
  std::string out;
  out.reserve(text.size() + 3 * (prefix_space ? 1 : 0));
  if (prefix_space) out += kSpaceMarker;
  for (char c : text) {
    if (c == ' ') {
      out += kSpaceMarker;
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string unescape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text.substr(i).starts_with(kSpaceMarker)) {
      out.push_back(' ');
      i += kSpaceMarker.size();
    } else {
      out.push_back(text[i++]);
    }
  }
  return out;
}

// A run of characters in the escaped text; merged symbols are linked-list neighbours.
struct Symbol {
  size_t start = 0;
  size_t length = 0;  // 0 once merged into its left neighbour
  int prev = -1;
  int next = -1;
};

struct Candidate {
  float score = 0;
  int left = 0;
  size_t length = 0;  // length of the merged text when queued; a mismatch marks it stale
};

struct CandidateOrder {
  // Highest score first; on equal scores the leftmost pair.
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

bool mergeable(TokenType t) {
  return t == TokenType::kNormal || t == TokenType::kUserDefined;
}

}  // namespace

SpmTokenizer::SpmTokenizer(Vocab vocab, const SpmOptions& options)
    : VocabTokenizer(std::move(vocab)), options_(options) {
  byte_token_.fill(-1);
  for (int b = 0; b < 256; ++b) {
    const std::optional<int32_t> id = this->vocab().find(fmt::format("<0x{:02X}>", b));
    if (id && this->vocab().type(*id) == TokenType::kByte) byte_token_[b] = *id;
  }
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text,
                                          const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  add_bos_if_asked(options, ids);
  bool after_special = true;  // the input start counts as "after a special token"
  for (const TextFragment& fragment : split_special_tokens(vocab(), text, options.parse_special)) {
    if (fragment.token >= 0) {
      ids.push_back(fragment.token);
      after_special = true;
      continue;
    }
    encode_run(escape_spaces(fragment.text, options_.add_space_prefix && after_special), ids);
    after_special = false;
  }
  add_eos_if_asked(options, ids);
  return ids;
}

void SpmTokenizer::encode_run(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = utf8_char_length(text, pos);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({pos, len, index - 1, -1});
    if (index > 0) symbols[static_cast<size_t>(index - 1)].next = index;
    pos += len;
  }

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  auto try_queue = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[static_cast<size_t>(left)];
    const Symbol& r = symbols[static_cast<size_t>(right)];
    const std::optional<int32_t> id = vocab().find(text.substr(l.start, l.length + r.length));
    if (!id || !mergeable(vocab().type(*id))) return;
    queue.push({vocab().scores[static_cast<size_t>(*id)], left, l.length + r.length});
  };
  for (size_t i = 1; i < symbols.size(); ++i)
    try_queue(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(c.left)];
    if (left.length == 0 || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    if (right.length == 0 || left.length + right.length != c.length) continue;  // stale
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (left.next >= 0) symbols[static_cast<size_t>(left.next)].prev = c.left;
    try_queue(left.prev, c.left);
    try_queue(c.left, left.next);
  }

  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    const Symbol& s = symbols[static_cast<size_t>(i)];
    emit_symbol(text.substr(s.start, s.length), out);
  }
}

void SpmTokenizer::emit_symbol(std::string_view symbol, std::vector<int32_t>& out) const {
  if (const std::optional<int32_t> id = vocab().find(symbol)) {
    out.push_back(*id);
    return;
  }
  for (char c : symbol) {
    const int32_t byte_id = byte_token_[static_cast<uint8_t>(c)];
    if (byte_id >= 0) {
      out.push_back(byte_id);
    } else if (vocab().unk_id) {
      out.push_back(*vocab().unk_id);
      return;  // one <unk> for the whole unrepresentable character
    } else {
      fail(ErrorCode::kInvalidArgument,
           "{}: cannot encode byte 0x{:02X}: the vocabulary has neither <0x{:02X}> nor <unk>",
           vocab().source, static_cast<uint8_t>(c), static_cast<uint8_t>(c));
    }
  }
}

std::string SpmTokenizer::token_text(int32_t id) const {
  vocab().check_id(id, "decode input");
  const std::string& text = vocab().text(id);
  if (vocab().type(id) == TokenType::kByte && text.size() == 6 && text.starts_with("<0x")) {
    unsigned value = 0;
    if (std::sscanf(text.c_str() + 3, "%2X", &value) == 1) {
      return std::string(1, static_cast<char>(value));
    }
  }
  return unescape_spaces(text);
}

std::string SpmTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  bool strip_space = options_.add_space_prefix;
  for (size_t i = first_decoded_index(ids); i < ids.size(); ++i) {
    std::string piece = token_text(ids[i]);
    // Control tokens are written as their text (callers drop stop ids themselves); the space
    // encode() prefixed is dropped from the first text piece even when control tokens lead.
    if (vocab().type(ids[i]) == TokenType::kControl) {
      out += piece;
      continue;
    }
    if (strip_space && !piece.empty() && piece.front() == ' ') piece.erase(0, 1);
    strip_space = false;
    out += piece;
  }
  return out;
}

}  // namespace kvplan
