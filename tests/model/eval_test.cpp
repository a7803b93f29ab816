// Perplexity under llama-perplexity's protocol (golden: llama.cpp b7549 on stories260K) and the
// KL / top-1 comparison against exact KV.
#include "model/eval.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/file_io.h"
#include "formats/kv_pair.h"
#include "model/load_tokenizer.h"
#include "test_paths.h"

namespace kvplan {
namespace {

// One thread: the test models are small enough that threads only add barriers, and results stay
// independent of the machine's core count.
const bool kSerial = (set_compute_threads(1), true);

struct Loaded {
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::vector<int32_t> tokens;
};

Loaded load(const std::filesystem::path& model) {
  Loaded l{load_model_weights(model), load_model_tokenizer(model), {}};
  l.tokens = l.tokenizer->encode(read_text_file(test::data_dir() / "tinystories-valid-sample.txt"),
                                 {.add_bos = true});
  return l;
}

std::filesystem::path sample_text() {
  return test::data_dir() / "tinystories-valid-sample.txt";
}

EvalResult eval_pair(const Loaded& l, const char* pair, int chunks, int ctx = 256) {
  EvalOptions o;
  o.n_ctx = ctx;
  o.max_chunks = chunks;
  o.kv = KvCacheOptions::uniform(KvPair::parse(pair), l.weights.config.n_layers, {});
  return evaluate_perplexity(Transformer(l.weights), l.tokens, *l.tokenizer->bos_id(), o);
}

TEST(Eval, Stories260KPerplexityMatchesLlamaCpp) {
  const auto model = test::models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(model, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  KVPLAN_NEED_FILE(sample_text(), "test data: ../shared/data or $KVPLAN_TEST_DATA");
  const Loaded l = load(model);
  EvalOptions o;  // exact KV, n_ctx 256
  const EvalResult r =
      evaluate_perplexity(Transformer(l.weights), l.tokens, *l.tokenizer->bos_id(), o);
  EXPECT_EQ(r.n_chunks, 74);
  EXPECT_EQ(r.n_scored, 74 * 127);
  EXPECT_NEAR(r.ppl, 3.9244, 0.002);         // llama-perplexity -c 256 -b 256, build b7549
  EXPECT_NEAR(r.ppl_stderr, 0.0746, 0.002);  // its "±"
}

// Gemma 3 270M (Q4_K_M, scripts/models/fetch-gemma3.sh): interleaved local/global layers, Q/K and
// post norms, GeGLU. llama.cpp rounds activations to 8 bits in its quantized products and looks
// GELU up in an f16 table; kvplan multiplies in f32, so the two agree within 1 %, not to the digit.
TEST(Eval, Gemma3PerplexityMatchesLlamaCpp) {
  const auto model = test::gemma3_path();
  KVPLAN_NEED_FILE(model, "run scripts/models/fetch-gemma3.sh (or set KVPLAN_CACHE)");
  KVPLAN_NEED_FILE(sample_text(), "test data: ../shared/data or $KVPLAN_TEST_DATA");
  const Loaded l = load(model);
  EvalOptions o;  // exact KV, n_ctx 256
  const EvalResult r =
      evaluate_perplexity(Transformer(l.weights), l.tokens, *l.tokenizer->bos_id(), o);
  EXPECT_EQ(r.n_chunks, 38);
  EXPECT_NEAR(r.ppl, 6.4611, 0.01 * 6.4611);  // llama-perplexity -c 256, f16 KV, build b7549
}

TEST(Eval, Stories260KKlOrdering) {
  const auto model = test::models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(model, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  KVPLAN_NEED_FILE(sample_text(), "test data: ../shared/data or $KVPLAN_TEST_DATA");
  const Loaded l = load(model);
  const EvalResult kv8 = eval_pair(l, "KV8", 12), kv4 = eval_pair(l, "KV4", 12),
                   kv2 = eval_pair(l, "KV2", 12);
  EXPECT_GT(kv8.mean_kl, 0.0);
  EXPECT_LT(kv8.mean_kl, kv4.mean_kl);
  EXPECT_LT(kv4.mean_kl, kv2.mean_kl);
  EXPECT_GT(kv8.top1_agreement, kv2.top1_agreement);
  EXPECT_NEAR(kv8.ppl_exact, kv2.ppl_exact, 1e-12);  // the same exact reference
  const EvalResult k4v8 = eval_pair(l, "K4V8", 12), k8v4 = eval_pair(l, "K8V4", 12);
  EXPECT_NE(k4v8.mean_kl, k8v4.mean_kl);
  // f32 "quantization" is the identity.
  const EvalResult f32 = eval_pair(l, "f32/f32", 4);
  EXPECT_EQ(f32.mean_kl, 0.0);
  EXPECT_EQ(f32.top1_agreement, 1.0);
}

TEST(Eval, SmolLM2KlOrderingWhenPresent) {
  const auto model = test::smollm2_path();
  KVPLAN_NEED_FILE(model, "run scripts/models/fetch-smollm2.sh (or set KVPLAN_CACHE)");
  KVPLAN_NEED_FILE(sample_text(), "test data: ../shared/data or $KVPLAN_TEST_DATA");
  const Loaded l = load(model);
  const EvalResult kv8 = eval_pair(l, "KV8", 1, 128), kv4 = eval_pair(l, "KV4", 1, 128),
                   kv2 = eval_pair(l, "KV2", 1, 128);
  EXPECT_LT(kv8.mean_kl, kv4.mean_kl);
  EXPECT_LT(kv4.mean_kl, kv2.mean_kl);
  EXPECT_GT(kv8.top1_agreement, 0.9);
}

TEST(Eval, PromptsAndBadInput) {
  const auto model = test::models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(model, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  const ModelWeights w = load_model_weights(model);
  const Transformer t(w);
  const std::vector<std::vector<int32_t>> prompts = {{1, 400, 30, 20, 99}, {1, 5, 6}};
  EvalOptions o;
  o.kv = KvCacheOptions::uniform(KvPair::parse("KV4"), w.config.n_layers, {});
  const EvalResult r = evaluate_prompts(t, prompts, o);
  EXPECT_EQ(r.n_scored, 4 + 2);
  EXPECT_GT(r.ppl, 1.0);
  EXPECT_THROW((void)evaluate_prompts(t, {{1}}, o), Error);
  const std::vector<int32_t> few(100, 3);
  EXPECT_THROW((void)evaluate_perplexity(t, few, 1, o), Error);  // fewer than one chunk
}

}  // namespace
}  // namespace kvplan
