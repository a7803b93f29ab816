#include "model/tokenizer/bpe_tokenizer.h"

#include <queue>

#include "core/error.h"
#include "model/tokenizer/byte_unicode.h"
#include "model/tokenizer/utf8.h"

namespace kvplan {
namespace {

struct Symbol {
  int32_t id = -1;  // -1 once merged into its left neighbour
  int prev = -1;
  int next = -1;
};

struct Candidate {
  int32_t rank = 0;
  int left = 0;
  int32_t left_id = 0;  // ids when queued; a mismatch marks the candidate stale
  int32_t right_id = 0;
  int32_t merged = 0;
};

struct CandidateOrder {
  // Lowest rank first; on equal ranks (the same merge) the leftmost pair.
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  }
};

}  // namespace

BpeTokenizer::BpeTokenizer(Vocab vocab, const std::vector<BpeMerge>& merges,
                           const BpeOptions& options, std::string_view merges_key)
    : VocabTokenizer(std::move(vocab)), options_(options), pre_(options.pre_patterns) {
  const Vocab& v = this->vocab();
  merges_.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const BpeMerge& m = merges[i];
    const std::optional<int32_t> left = v.find(m.left);
    const std::optional<int32_t> right = v.find(m.right);
    const std::optional<int32_t> merged = v.find(m.left + m.right);
    if (!left || !right || !merged) {
      const std::string& missing = !left ? m.left : !right ? m.right : m.left + m.right;
      fail(ErrorCode::kInvalidArgument,
           "{}: {}[{}] = '{} {}': '{}' is not a token of the vocabulary", v.source, merges_key, i,
           m.left, m.right, missing);
    }
    merges_.try_emplace(pair_key(*left, *right), MergeResult{static_cast<int32_t>(i), *merged});
  }
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    append_utf8(ch, byte_to_code_point(static_cast<uint8_t>(b)));
    byte_token_[static_cast<size_t>(b)] = v.find(ch).value_or(-1);
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text,
                                          const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  add_bos_if_asked(options, ids);
  bool first_run = true;
  std::string prefixed;
  for (const TextFragment& fragment : split_special_tokens(vocab(), text, options.parse_special)) {
    if (fragment.token >= 0) {
      ids.push_back(fragment.token);
      first_run = false;
      continue;
    }
    std::string_view run = fragment.text;
    // HF ByteLevel(add_prefix_space): a space before the text unless it starts with one.
    if (options_.add_prefix_space && first_run && !run.starts_with(' ')) {
      prefixed = " ";
      prefixed += run;
      run = prefixed;
    }
    first_run = false;
    for (std::string_view piece : pre_.split(run)) encode_piece(piece, ids);
  }
  add_eos_if_asked(options, ids);
  return ids;
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int32_t>& out) const {
  if (options_.ignore_merges) {
    if (const std::optional<int32_t> id = vocab().find(bytes_to_unicode_text(piece))) {
      out.push_back(*id);
      return;
    }
  }
  std::vector<Symbol> symbols;
  symbols.reserve(piece.size());
  for (size_t i = 0; i < piece.size(); ++i) {
    const auto byte = static_cast<uint8_t>(piece[i]);
    int32_t id = byte_token_[byte];
    if (id < 0) {
      if (!vocab().unk_id) {
        fail(ErrorCode::kInvalidArgument,
             "{}: cannot encode byte 0x{:02X}: the vocabulary has no token for it and no <unk>",
             vocab().source, byte);
      }
      id = *vocab().unk_id;
    }
    const int index = static_cast<int>(i);
    symbols.push_back(
        {id, index - 1, static_cast<size_t>(index) + 1 < piece.size() ? index + 1 : -1});
  }

  std::priority_queue<Candidate, std::vector<Candidate>, CandidateOrder> queue;
  auto try_queue = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int32_t l = symbols[static_cast<size_t>(left)].id;
    const int32_t r = symbols[static_cast<size_t>(right)].id;
    const auto it = merges_.find(pair_key(l, r));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, l, r, it->second.merged});
  };
  for (size_t i = 1; i < symbols.size(); ++i)
    try_queue(static_cast<int>(i) - 1, static_cast<int>(i));

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[static_cast<size_t>(c.left)];
    if (left.id != c.left_id || left.next < 0) continue;
    Symbol& right = symbols[static_cast<size_t>(left.next)];
    if (right.id != c.right_id) continue;  // stale: a neighbour merged since it was queued
    left.id = c.merged;
    right.id = -1;
    left.next = right.next;
    if (left.next >= 0) symbols[static_cast<size_t>(left.next)].prev = c.left;
    try_queue(left.prev, c.left);
    try_queue(c.left, left.next);
  }
  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) {
    out.push_back(symbols[static_cast<size_t>(i)].id);
  }
}

std::string BpeTokenizer::token_text(int32_t id) const {
  vocab().check_id(id, "decode input");
  const std::string& text = vocab().text(id);
  switch (vocab().type(id)) {
    case TokenType::kControl:
    case TokenType::kUserDefined:
    case TokenType::kUnknown:
      return text;
    default:
      return unicode_text_to_bytes(text);
  }
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (size_t i = first_decoded_index(ids); i < ids.size(); ++i) out += token_text(ids[i]);
  return out;
}

}  // namespace kvplan
