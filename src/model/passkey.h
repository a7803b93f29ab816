// Pass-key retrieval: a task-level check of a KV cache at long context. A haystack of filler
// sentences in the model's own language hides a five-digit key at a chosen depth; the prompt ends
// by asking for it, and the answer counts only if greedy decoding produces exactly those digits.
// The multi-key variant hides several labelled keys and asks for one, so the others distract.
//
//   PasskeyCases cases = make_passkey_cases(*tokenizer, filler_sentences(text), options);
//   PasskeyAnswer a = answer_passkey(model, KvCacheOptions::exact_kv(), cases.cases[0], *tok);
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/kv_cache.h"
#include "model/tokenizer/tokenizer.h"
#include "model/transformer.h"

namespace kvplan {

struct PasskeyOptions {
  std::vector<int64_t> contexts{1024, 2048, 4096, 8192};  // prompt tokens, at most
  std::vector<double> depths{0.0, 0.25, 0.5, 0.75, 1.0};  // where the asked key sits, 0 = first
  int haystacks = 2;  // per (context, depth), each with its own filler offset and keys
  int keys = 1;       // > 1: that many labelled keys, one asked
  bool chat = false;  // the haystack as the user's turn of the model's chat template
  uint64_t seed = 1;
};

struct PasskeyCase {
  int64_t context = 0;  // the requested length; prompt.size() <= context
  double depth = 0;
  int haystack = 0;
  std::vector<int32_t> prompt;  // BOS (if the model has one) first
  std::string key;              // the asked key's digits
  std::string label;            // the asked key's label ("" with one key)
};

struct PasskeyCases {
  std::vector<PasskeyCase> cases;  // context-major, then depth, then haystack
  int64_t longest_sentence_tokens = 0;
};

// The filler sentences of `text`: split after '.', '!' or '?', whitespace folded, empty ones left
// out. Error(kInvalidArgument) naming `source` when there are none.
std::vector<std::string> filler_sentences(std::string_view text, const std::string& source);

// Every (context, depth, haystack) case, seeded: the same options, tokenizer and filler give the
// same prompts. Error(kInvalidArgument) for options out of range or a context too short for the
// instructions, the keys and one filler sentence; Error(kUnimplemented) for `chat` when kvplan
// does not recognise the model's chat template.
PasskeyCases make_passkey_cases(const Tokenizer& tokenizer, std::span<const std::string> filler,
                                const PasskeyOptions& options);

// After leading whitespace, `generated` starts with a run of digits equal to `key` (a longer
// number, "123456" for "12345", is wrong; what follows the run does not matter).
bool passkey_answer_matches(std::string_view generated, std::string_view key);

struct PasskeyAnswer {
  bool correct = false;
  std::string generated;  // the greedy continuation's text
};

// Prefills the prompt into a fresh cache of `kv` and decodes greedily a few tokens past the key's
// length (stopping at an end-of-sequence token).
PasskeyAnswer answer_passkey(const Transformer& model, const KvCacheOptions& kv,
                             const PasskeyCase& c, const Tokenizer& tokenizer);

}  // namespace kvplan
