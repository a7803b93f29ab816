// Pass-key haystacks: seeded and reproducible, as long as asked and no longer, the key where the
// depth says, the multi-key variant asking one labelled key among distractors; answers scored by
// the exact digits only.
#include "model/passkey.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/file_io.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "test_paths.h"

namespace kvplan {
namespace {

namespace fs = std::filesystem;

struct Loaded {
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<std::string> filler;
};

Loaded load() {
  const fs::path model = test::models_dir() / "stories260K.gguf";
  const fs::path text = test::data_dir() / "tinystories-valid-sample.txt";
  return {load_model_tokenizer(model), filler_sentences(read_text_file(text), text.string())};
}

#define NEED_INPUTS()                                                                  \
  KVPLAN_NEED_FILE(test::models_dir() / "stories260K.gguf", "stories260K test model"); \
  KVPLAN_NEED_FILE(test::data_dir() / "tinystories-valid-sample.txt", "TinyStories sample")

TEST(Passkey, FillerSentencesFoldSpacesAndLeaveOutDigits) {
  const std::vector<std::string> s =
      filler_sentences("One  day\nTom ran.  He had 3 cats! Why?\n\nThe end", "t.txt");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0], "One day Tom ran.");
  EXPECT_EQ(s[1], "Why?");
  EXPECT_EQ(s[2], "The end");
  EXPECT_THROW((void)filler_sentences(" \n ", "empty.txt"), Error);
  EXPECT_THROW((void)filler_sentences("It is 12. Or 13.", "digits.txt"), Error);
}

TEST(Passkey, AnswerMatchesTheExactDigitsOnly) {
  EXPECT_TRUE(passkey_answer_matches(" 12345. The", "12345"));
  EXPECT_TRUE(passkey_answer_matches("12345", "12345"));
  EXPECT_TRUE(passkey_answer_matches("\n12345 is", "12345"));
  EXPECT_FALSE(passkey_answer_matches(" 123456", "12345"));
  EXPECT_FALSE(passkey_answer_matches(" 1234", "12345"));
  EXPECT_FALSE(passkey_answer_matches(" the 12345", "12345"));
  EXPECT_FALSE(passkey_answer_matches("1 2345", "12345"));
  EXPECT_FALSE(passkey_answer_matches("", "12345"));
}

TEST(Passkey, SameOptionsGiveTheSameHaystacksAndTheSeedChangesThem) {
  NEED_INPUTS();
  const Loaded l = load();
  PasskeyOptions o;
  o.contexts = {256, 512};
  o.depths = {0, 0.5, 1};
  o.haystacks = 2;
  const PasskeyCases a = make_passkey_cases(*l.tokenizer, l.filler, o);
  const PasskeyCases b = make_passkey_cases(*l.tokenizer, l.filler, o);
  ASSERT_EQ(a.cases.size(), 2u * 3u * 2u);
  for (size_t i = 0; i < a.cases.size(); ++i) {
    EXPECT_EQ(a.cases[i].prompt, b.cases[i].prompt) << i;
    EXPECT_EQ(a.cases[i].key, b.cases[i].key) << i;
  }
  // Adding a context or a depth leaves the other cases as they were.
  PasskeyOptions more = o;
  more.contexts = {128 + 256, 256, 512};
  more.depths = {0.9, 0, 0.5, 1};
  const PasskeyCases c = make_passkey_cases(*l.tokenizer, l.filler, more);
  ASSERT_EQ(c.cases.size(), 3u * 4u * 2u);
  for (const PasskeyCase& x : a.cases) {
    const auto same = std::find_if(c.cases.begin(), c.cases.end(), [&](const PasskeyCase& y) {
      return y.context == x.context && y.depth == x.depth && y.haystack == x.haystack;
    });
    ASSERT_NE(same, c.cases.end());
    EXPECT_EQ(same->prompt, x.prompt);
  }
  PasskeyOptions reseeded = o;
  reseeded.seed = 2;
  const PasskeyCases d = make_passkey_cases(*l.tokenizer, l.filler, reseeded);
  int same_keys = 0;
  for (size_t i = 0; i < a.cases.size(); ++i) same_keys += a.cases[i].key == d.cases[i].key;
  EXPECT_LT(same_keys, 2);
}

TEST(Passkey, PromptsFillTheContextAndHideTheKeyAtItsDepth) {
  NEED_INPUTS();
  const Loaded l = load();
  PasskeyOptions o;
  o.contexts = {300, 512};
  o.depths = {0, 0.25, 0.5, 0.75, 1};
  o.haystacks = 1;
  const PasskeyCases cases = make_passkey_cases(*l.tokenizer, l.filler, o);
  for (const int64_t context : o.contexts) {
    double last_position = -1;
    for (const PasskeyCase& c : cases.cases) {
      if (c.context != context) continue;
      const auto n = static_cast<int64_t>(c.prompt.size());
      EXPECT_LE(n, context);
      // Whole sentences: at most one sentence (and a few joining tokens) short of the context.
      EXPECT_GT(n, context - cases.longest_sentence_tokens - 8) << context;
      EXPECT_EQ(c.prompt.front(), *l.tokenizer->bos_id());
      ASSERT_EQ(c.key.size(), 5u);
      EXPECT_TRUE(c.label.empty());
      const std::string text = l.tokenizer->decode(c.prompt);
      const std::string needle = "The pass key is " + c.key + ".";
      const std::string whole_needle = needle + " Remember it. " + c.key + " is the pass key.";
      const size_t at = text.find(needle);
      ASSERT_NE(at, std::string::npos) << text;
      EXPECT_EQ(text.find(needle, at + 1), std::string::npos) << "one key only";
      EXPECT_TRUE(text.ends_with("What is the pass key? The pass key is")) << text;
      const size_t filler_start = text.find("at the end.") + 11;
      const size_t question = text.rfind("\nWhat is");
      const double position = static_cast<double>(at - filler_start) /
                              static_cast<double>(question - filler_start - whole_needle.size());
      EXPECT_NEAR(position, c.depth, 0.2) << "context " << context << " depth " << c.depth;
      EXPECT_GT(position, last_position);
      last_position = position;
    }
  }
}

TEST(Passkey, MultiKeyHaystacksAskOneLabelledKeyAmongDistractors) {
  NEED_INPUTS();
  const Loaded l = load();
  PasskeyOptions o;
  o.contexts = {512};
  o.depths = {0.5};
  o.haystacks = 4;
  o.keys = 3;
  const PasskeyCases cases = make_passkey_cases(*l.tokenizer, l.filler, o);
  ASSERT_EQ(cases.cases.size(), 4u);
  for (const PasskeyCase& c : cases.cases) {
    ASSERT_FALSE(c.label.empty());
    const std::string text = l.tokenizer->decode(c.prompt);
    EXPECT_NE(text.find("The " + c.label + " pass key is " + c.key + "."), std::string::npos)
        << text;
    EXPECT_TRUE(
        text.ends_with("What is the " + c.label + " pass key? The " + c.label + " pass key is"));
    size_t needles = 0;
    for (size_t at = text.find(" pass key is "); at != std::string::npos;
         at = text.find(" pass key is ", at + 1)) {
      ++needles;
    }
    EXPECT_EQ(needles, 3u) << "three keys";
  }
}

TEST(Passkey, RefusesOptionsOutOfRangeAndContextsTooShort) {
  NEED_INPUTS();
  const Loaded l = load();
  const auto refused = [&](const PasskeyOptions& o) {
    try {
      (void)make_passkey_cases(*l.tokenizer, l.filler, o);
    } catch (const Error& e) {
      return e.code() == ErrorCode::kInvalidArgument;
    }
    return false;
  };
  PasskeyOptions o;
  o.contexts = {512};
  EXPECT_FALSE(refused(o));
  PasskeyOptions bad = o;
  bad.depths = {1.5};
  EXPECT_TRUE(refused(bad));
  bad = o;
  bad.keys = 0;
  EXPECT_TRUE(refused(bad));
  bad.keys = 11;
  EXPECT_TRUE(refused(bad));
  bad = o;
  bad.haystacks = 0;
  EXPECT_TRUE(refused(bad));
  bad = o;
  bad.contexts = {64};
  EXPECT_TRUE(refused(bad));
}

TEST(Passkey, AnswerIsGreedyAndRepeatable) {
  NEED_INPUTS();
  const Loaded l = load();
  const ModelWeights weights = load_model_weights(test::models_dir() / "stories260K.gguf");
  const Transformer model(weights);
  PasskeyOptions o;
  o.contexts = {256};
  o.depths = {0.5};
  o.haystacks = 1;
  const PasskeyCase c = make_passkey_cases(*l.tokenizer, l.filler, o).cases.front();
  const PasskeyAnswer a = answer_passkey(model, KvCacheOptions::exact_kv(), c, *l.tokenizer);
  const PasskeyAnswer b = answer_passkey(model, KvCacheOptions::exact_kv(), c, *l.tokenizer);
  EXPECT_EQ(a.generated, b.generated);
  EXPECT_FALSE(a.generated.empty());
  EXPECT_EQ(a.correct, passkey_answer_matches(a.generated, c.key));
}

// --chat: the haystack is the user's turn, the answer's first words start the assistant's; a
// model without a recognised template is refused.
TEST(Passkey, ChatPromptsWrapTheHaystackInTheTemplate) {
  KVPLAN_NEED_FILE(test::smollm2_path(), "run scripts/models/fetch-smollm2.sh");
  NEED_INPUTS();
  const Loaded l = load();
  const std::unique_ptr<Tokenizer> smol = load_model_tokenizer(test::smollm2_path());
  PasskeyOptions o;
  o.contexts = {512};
  o.depths = {0.5};
  o.haystacks = 1;
  o.chat = true;
  const PasskeyCase c = make_passkey_cases(*smol, l.filler, o).cases.front();
  EXPECT_LE(c.prompt.size(), 512u);
  const std::string text = smol->decode(c.prompt);
  EXPECT_NE(text.find("The pass key is " + c.key + "."), std::string::npos) << text;
  EXPECT_TRUE(
      text.ends_with("What is the pass key?<|im_end|>\n<|im_start|>assistant\nThe pass "
                     "key is"))
      << text;
  o.chat = false;
  const PasskeyCase plain = make_passkey_cases(*smol, l.filler, o).cases.front();
  EXPECT_EQ(plain.key, c.key);
  EXPECT_NE(plain.prompt, c.prompt);
}

}  // namespace
}  // namespace kvplan
