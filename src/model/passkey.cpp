#include "model/passkey.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cctype>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "core/error.h"
#include "model/greedy.h"

namespace kvplan {
namespace {

constexpr std::array<const char*, 10> kLabels = {"red",    "blue",  "green", "yellow", "purple",
                                                 "orange", "black", "white", "brown",  "pink"};
constexpr int kExtraAnswerTokens = 3;  // decoded past the key's length: a longer number is wrong

// One generator per case, from the seed and the case's coordinates: adding a context or a depth
// leaves the other cases' keys and offsets where they were.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// "pass key", or "red pass key" in a multi-key haystack.
std::string key_name(const std::string& label) {
  return label.empty() ? "pass key" : label + " pass key";
}

std::string needle(const std::string& key, const std::string& label) {
  const std::string name = key_name(label);
  return fmt::format("The {} is {}. Remember it. {} is the {}.", name, key, key, name);
}

std::string instructions(int keys) {
  return keys == 1 ? "There is a pass key hidden in the text below. Remember it; you will be asked "
                     "for it at the end."
                   : fmt::format(
                         "There are {} pass keys hidden in the text below, each with a "
                         "colour. Remember them; you will be asked for one at the end.",
                         keys);
}

std::string question(const std::string& label) {
  return fmt::format("What is the {}?", key_name(label));
}

std::string answer_start(const std::string& label) {
  return fmt::format("The {} is", key_name(label));
}

struct Needle {
  size_t after_sentence = 0;  // inserted after this many filler sentences
  std::string text;
};

// The haystack's text: the instructions, `count` filler sentences from `first` on (cyclically),
// the needles among them, the question.
std::string haystack_text(std::span<const std::string> filler, size_t first, size_t count,
                          const std::vector<Needle>& needles, int keys, const std::string& label) {
  std::string text = instructions(keys);
  size_t next_needle = 0;
  for (size_t i = 0; i <= count; ++i) {
    while (next_needle < needles.size() && needles[next_needle].after_sentence == i) {
      text += ' ';
      text += needles[next_needle++].text;
    }
    if (i < count) {
      text += ' ';
      text += filler[(first + i) % filler.size()];
    }
  }
  text += '\n';
  text += question(label);
  return text;
}

// The prompt's text: the haystack and the answer's first words, inside the model's chat template
// as the user's turn and the start of the assistant's when `chat`.
std::string prompt_text(const Tokenizer& tokenizer, std::string haystack, bool chat,
                        const std::string& label) {
  if (!chat) return haystack + ' ' + answer_start(label);
  return tokenizer.apply_chat_template({{"user", std::move(haystack)}}, true) + answer_start(label);
}

void check(const PasskeyOptions& o) {
  if (o.contexts.empty()) fail(ErrorCode::kInvalidArgument, "passkey: no context lengths");
  if (o.depths.empty()) fail(ErrorCode::kInvalidArgument, "passkey: no depths");
  for (const double d : o.depths) {
    if (!(d >= 0 && d <= 1)) {
      fail(ErrorCode::kInvalidArgument, "passkey depth {}: expected 0 (start) to 1 (end)", d);
    }
  }
  if (o.haystacks < 1) {
    fail(ErrorCode::kInvalidArgument, "passkey: {} haystacks, expected >= 1", o.haystacks);
  }
  if (o.keys < 1 || o.keys > static_cast<int>(kLabels.size())) {
    fail(ErrorCode::kInvalidArgument, "passkey: {} keys, expected 1 to {}", o.keys, kLabels.size());
  }
}

// Token counts of the filler sentences, alone: how many fit a context, to start from.
struct SentenceSizes {
  int64_t longest = 0;
  double mean = 1;
};

PasskeyCase make_case(const Tokenizer& tokenizer, std::span<const std::string> filler,
                      const PasskeyOptions& o, const SentenceSizes& sizes, int64_t context,
                      double depth, int haystack) {
  std::mt19937_64 rng(mix(
      o.seed ^ mix(static_cast<uint64_t>(context) ^
                   mix(std::bit_cast<uint64_t>(depth) ^ mix(static_cast<uint64_t>(haystack))))));
  PasskeyCase c;
  c.context = context;
  c.depth = depth;
  c.haystack = haystack;
  const size_t first = rng() % filler.size();
  std::vector<std::string> keys;
  while (keys.size() < static_cast<size_t>(o.keys)) {
    std::string key = std::to_string(10000 + rng() % 90000);  // five digits
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  const size_t asked = o.keys == 1 ? 0 : rng() % keys.size();
  c.key = keys[asked];
  c.label = o.keys == 1 ? "" : kLabels[asked];
  std::vector<uint64_t> distractor_draws;
  for (size_t k = 0; k < keys.size(); ++k) distractor_draws.push_back(rng());

  // The most sentences whose prompt fits `context`: start from the token estimate and step
  // down until the whole prompt, tokenized as one text, fits.
  const auto needles_for = [&](size_t count) {
    std::vector<Needle> needles;
    for (size_t k = 0; k < keys.size(); ++k) {
      const size_t at = k == asked
                            ? static_cast<size_t>(std::lround(c.depth * static_cast<double>(count)))
                            : distractor_draws[k] % (count + 1);
      needles.push_back({at, needle(keys[k], o.keys == 1 ? "" : kLabels[k])});
    }
    std::stable_sort(needles.begin(), needles.end(), [](const Needle& a, const Needle& b) {
      return a.after_sentence < b.after_sentence;
    });
    return needles;
  };
  const auto tokens_for = [&](size_t count) {
    return tokenizer.encode(
        prompt_text(tokenizer,
                    haystack_text(filler, first, count, needles_for(count), o.keys, c.label),
                    o.chat, c.label),
        {.add_bos = true, .parse_special = o.chat});
  };
  const auto fixed = static_cast<int64_t>(tokens_for(0).size());
  if (fixed + sizes.longest > context) {
    fail(ErrorCode::kInvalidArgument,
         "passkey context {}: too short, the instructions, {} key(s) and the question take "
         "{} tokens and a filler sentence up to {}",
         context, o.keys, fixed, sizes.longest);
  }
  auto count = static_cast<size_t>(static_cast<double>(context - fixed) / sizes.mean) + 1;
  std::vector<int32_t> prompt = tokens_for(count);
  while (static_cast<int64_t>(prompt.size()) > context && count > 0) {
    // Overshoot by many tokens: jump by the estimate; by a few: one sentence at a time.
    const auto over = static_cast<double>(static_cast<int64_t>(prompt.size()) - context);
    const auto step = std::max<size_t>(1, static_cast<size_t>(over / sizes.mean));
    count -= std::min(step, count);
    prompt = tokens_for(count);
  }
  if (static_cast<int64_t>(prompt.size()) > context) {
    fail(ErrorCode::kInternal, "passkey context {}: no haystack fits", context);
  }
  c.prompt = std::move(prompt);
  return c;
}

}  // namespace

std::vector<std::string> filler_sentences(std::string_view text, const std::string& source) {
  std::vector<std::string> sentences;
  std::string current;
  bool space = false;
  for (const char c : text) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !current.empty();
      continue;
    }
    if (space) current += ' ';
    space = false;
    current += c;
    if (c == '.' || c == '!' || c == '?') {
      sentences.push_back(std::move(current));
      current.clear();
    }
  }
  if (!current.empty()) sentences.push_back(std::move(current));
  // A filler sentence holding digits could be read as a key.
  std::erase_if(sentences, [](const std::string& s) {
    return std::any_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  });
  if (sentences.empty()) {
    fail(ErrorCode::kInvalidArgument, "{}: no filler sentences (expected text without digits)",
         source);
  }
  return sentences;
}

PasskeyCases make_passkey_cases(const Tokenizer& tokenizer, std::span<const std::string> filler,
                                const PasskeyOptions& o) {
  check(o);
  if (filler.empty()) fail(ErrorCode::kInvalidArgument, "passkey: no filler sentences");
  SentenceSizes sizes;
  double total = 0;
  for (const std::string& s : filler) {
    const auto n = static_cast<int64_t>(tokenizer.encode(s, {.add_bos = false}).size());
    sizes.longest = std::max(sizes.longest, n);
    total += static_cast<double>(n);
  }
  sizes.mean = std::max(1.0, total / static_cast<double>(filler.size()));
  PasskeyCases out;
  out.longest_sentence_tokens = sizes.longest;
  for (const int64_t context : o.contexts) {
    for (const double depth : o.depths) {
      for (int h = 0; h < o.haystacks; ++h) {
        out.cases.push_back(make_case(tokenizer, filler, o, sizes, context, depth, h));
      }
    }
  }
  return out;
}

bool passkey_answer_matches(std::string_view generated, std::string_view key) {
  size_t i = 0;
  while (i < generated.size() && std::isspace(static_cast<unsigned char>(generated[i]))) ++i;
  size_t end = i;
  while (end < generated.size() && generated[end] >= '0' && generated[end] <= '9') ++end;
  return end > i && generated.substr(i, end - i) == key;
}

PasskeyAnswer answer_passkey(const Transformer& model, const KvCacheOptions& kv,
                             const PasskeyCase& c, const Tokenizer& tokenizer) {
  KvCache cache(model.config(), kv);
  RowMatrix logits = model.forward(c.prompt, cache, nullptr, {.last_logits_only = true});
  const std::vector<int32_t> stops = tokenizer.stop_ids();
  std::vector<int32_t> generated;
  const size_t most = c.key.size() + kExtraAnswerTokens;
  while (generated.size() < most) {
    const int32_t token = greedy_token(logits.row(logits.rows() - 1));
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) break;
    generated.push_back(token);
    if (generated.size() == most) break;
    const std::array<int32_t, 1> one{token};
    logits = model.forward(one, cache, nullptr, {.last_logits_only = true});
  }
  PasskeyAnswer a;
  a.generated = tokenizer.decode(generated);
  a.correct = passkey_answer_matches(a.generated, c.key);
  return a;
}

}  // namespace kvplan
