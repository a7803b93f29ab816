// The forward pass on stories260K: against the naive f64 reference, incremental decode vs batched
// prefill, the KV hook (formats, modes, chunk option), captures and forward_from_layer, greedy
// text.
#include "model/transformer.h"

#include <cstring>

#include <gtest/gtest.h>

#include "core/error.h"
#include "formats/kv_pair.h"
#include "model/load_tokenizer.h"
#include "reference_forward.h"
#include "test_paths.h"

namespace kvplan {
namespace {

class Stories : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto path = test::models_dir() / "stories260K.gguf";
    if (std::filesystem::exists(path)) weights_ = new ModelWeights(load_model_weights(path));
  }
  static void TearDownTestSuite() {
    delete weights_;
    weights_ = nullptr;
  }
  void SetUp() override {
    KVPLAN_NEED_FILE(test::models_dir() / "stories260K.gguf",
                     "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
    ASSERT_NE(weights_, nullptr);
  }
  static std::vector<int32_t> tokens(size_t n) {
    std::vector<int32_t> t(n);
    t[0] = 1;  // BOS
    for (size_t i = 1; i < n; ++i) t[i] = static_cast<int32_t>((i * 37 + 11) % 500 + 3);
    return t;
  }
  static RowMatrix run(const std::vector<int32_t>& t, const KvCacheOptions& kv) {
    const Transformer model(*weights_);
    KvCache cache(weights_->config, kv);
    return model.forward(t, cache);
  }
  static KvCacheOptions pair(const char* name, QuantSettings s = {}) {
    return KvCacheOptions::uniform(KvPair::parse(name), weights_->config.n_layers, s);
  }
  static ModelWeights* weights_;
};
ModelWeights* Stories::weights_ = nullptr;

double max_abs_diff(const RowMatrix& a, const RowMatrix& b) {
  return (a - b).cwiseAbs().maxCoeff();
}

TEST_F(Stories, MatchesNaiveF64Reference) {
  const std::vector<int32_t> t = tokens(12);
  EXPECT_LT(test::max_relative_error(run(t, KvCacheOptions::exact_kv()),
                                     test::reference_logits(*weights_, t)),
            1e-5);
}

TEST_F(Stories, IncrementalDecodeEqualsBatchedPrefill) {
  const std::vector<int32_t> t = tokens(40);
  const RowMatrix batched = run(t, KvCacheOptions::exact_kv());
  const Transformer model(*weights_);
  KvCache cache(weights_->config, KvCacheOptions::exact_kv());
  // A prefill chunk of 16, then one token at a time.
  RowMatrix stepped(batched.rows(), batched.cols());
  stepped.topRows(16) = model.forward(std::span(t).first(16), cache);
  for (size_t i = 16; i < t.size(); ++i) {
    stepped.row(static_cast<Eigen::Index>(i)) = model.forward(std::span(t).subspan(i, 1), cache);
  }
  EXPECT_LT(max_abs_diff(batched, stepped), 1e-4);
  EXPECT_EQ(cache.layer(4).n_tokens(), t.size());
}

// Determinism: a forward pass gives the same bits whatever ran before it on the thread (buffers
// reused between calls must not change the order of any sum).
TEST_F(Stories, SameInputsGiveTheSameBitsWhateverRanBefore) {
  const RowMatrix first = run(tokens(40), pair("K4V2"));
  (void)run(tokens(300), pair("int8/int4"));
  (void)run(tokens(7), pair("KV16"));
  const RowMatrix again = run(tokens(40), pair("K4V2"));
  ASSERT_EQ(first.size(), again.size());
  EXPECT_EQ(
      std::memcmp(first.data(), again.data(), static_cast<size_t>(first.size()) * sizeof(float)),
      0);
}

TEST_F(Stories, KvFormatsChangeLogitsInOrder) {
  const std::vector<int32_t> t = tokens(64);
  const RowMatrix exact = run(t, KvCacheOptions::exact_kv());
  const double d8 = max_abs_diff(exact, run(t, pair("KV8")));
  const double d4 = max_abs_diff(exact, run(t, pair("KV4")));
  const double d2 = max_abs_diff(exact, run(t, pair("KV2")));
  EXPECT_GT(d8, 0.0);
  EXPECT_LT(d8, d4);
  EXPECT_LT(d4, d2);
  EXPECT_EQ(max_abs_diff(exact, run(t, pair("f32/f32"))), 0.0);
  EXPECT_GT(max_abs_diff(run(t, pair("K4V8")), run(t, pair("K8V4"))), 0.0);
}

TEST_F(Stories, GgmlBlocksOnHeadDim8AreRefusedNamingTheLayer) {
  try {
    KvCache cache(weights_->config, pair("q4_0/q8_0"));
    FAIL() << "q4_0 accepted on head_dim 8";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("layer 0"), std::string::npos) << m;
    EXPECT_NE(m.find("q4_0"), std::string::npos) << m;
  }
}

TEST_F(Stories, KiviKeepsTheResidualWindowExact) {
  QuantSettings kivi;
  kivi.mode = QuantMode::kKivi;
  kivi.group_size = 32;
  kivi.residual_length = 32;
  // Fewer tokens than the residual window: nothing is quantized yet.
  const std::vector<int32_t> short_seq = tokens(31);
  EXPECT_EQ(
      max_abs_diff(run(short_seq, KvCacheOptions::exact_kv()), run(short_seq, pair("KV2", kivi))),
      0.0);
  // One full window: quantized (keys per channel), and different from per-token quantization.
  const std::vector<int32_t> t = tokens(70);
  const RowMatrix exact = run(t, KvCacheOptions::exact_kv());
  const RowMatrix k = run(t, pair("KV4", kivi));
  EXPECT_GT(max_abs_diff(exact, k), 0.0);
  EXPECT_GT(max_abs_diff(k, run(t, pair("KV4"))), 0.0);
  const Transformer model(*weights_);
  KvCache cache(weights_->config, pair("KV4", kivi));
  (void)model.forward(t, cache);
  EXPECT_EQ(cache.layer(0).n_quantized(), 64u);  // 70 tokens: two windows of 32, 6 exact
}

// A per-token plan runs KIVI on the layers whose key format is a KIVI one: int4_kivi keys there
// behave exactly as int4 keys under the plan-wide kivi mode, and the other layers stay per token.
TEST_F(Stories, KiviKeyFormatRunsKiviOnItsLayerOnly) {
  QuantSettings kivi;
  kivi.mode = QuantMode::kKivi;
  const std::vector<int32_t> t = tokens(70);
  EXPECT_EQ(max_abs_diff(run(t, pair("int4_kivi/int4")), run(t, pair("KV4", kivi))), 0.0);

  const int n = weights_->config.n_layers;
  std::vector<KvPair> mixed(static_cast<size_t>(n), KvPair::parse("KV4"));
  mixed[1] = KvPair::parse("int4_kivi/int4");
  const Transformer model(*weights_);
  KvCache cache(weights_->config, KvCacheOptions::per_layer(mixed, {}));
  (void)model.forward(t, cache);
  EXPECT_EQ(cache.layer(0).n_quantized(), 70u);  // per token: every token
  EXPECT_EQ(cache.layer(1).n_quantized(), 64u);  // KIVI: two windows of 32, 6 exact
  const RowMatrix m = run(t, KvCacheOptions::per_layer(mixed, {}));
  EXPECT_GT(max_abs_diff(m, run(t, pair("KV4"))), 0.0);
  EXPECT_GT(max_abs_diff(m, run(t, pair("KV4", kivi))), 0.0);
}

TEST_F(Stories, KiviFormatForValuesIsRefusedNamingTheLayer) {
  try {
    KvCache cache(weights_->config, pair("int4/int4_kivi"));
    FAIL() << "int4_kivi accepted for values";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("layer 0"), std::string::npos) << m;
    EXPECT_NE(m.find("value format int4_kivi"), std::string::npos) << m;
  }
}

TEST_F(Stories, ChunkAttentionOption) {
  const std::vector<int32_t> t = tokens(48);
  KvCacheOptions quantized = pair("KV2");
  KvCacheOptions exact_chunk = quantized;
  exact_chunk.chunk_attends_quantized = false;
  const RowMatrix a = run(t, quantized), b = run(t, exact_chunk);
  EXPECT_GT(max_abs_diff(a, b), 0.0);
  // Decode one token at a time: the option cannot matter for earlier tokens, only for the token's
  // own K/V, so it still differs; with exact KV both are identical.
  EXPECT_EQ(max_abs_diff(run(t, KvCacheOptions::exact_kv()),
                         [&] {
                           KvCacheOptions o = KvCacheOptions::exact_kv();
                           o.chunk_attends_quantized = false;
                           return run(t, o);
                         }()),
            0.0);
}

TEST_F(Stories, CapturesAndForwardFromLayer) {
  const std::vector<int32_t> t = tokens(20);
  const Transformer model(*weights_);
  KvCache cache(weights_->config, KvCacheOptions::exact_kv());
  ForwardCapture cap;
  const RowMatrix logits = model.forward(t, cache, &cap);
  const ModelConfig& c = weights_->config;
  ASSERT_EQ(cap.layer_input.size(), static_cast<size_t>(c.n_layers));
  EXPECT_EQ(cap.q[2].cols(), c.n_heads * c.head_dim);
  EXPECT_EQ(cap.k[2].cols(), c.n_kv_heads[2] * c.head_dim);
  EXPECT_EQ(cap.v[2].rows(), 20);
  EXPECT_EQ(max_abs_diff(cap.logits, logits), 0.0);
  // Captured K is what the exact cache holds for head 0 (post-RoPE).
  std::vector<float> held(static_cast<size_t>(c.head_dim)), scratch;
  cache.layer(3).read(KvSide::kKey, 0, 5, 1, held.data(), scratch);
  for (Eigen::Index i = 0; i < c.head_dim; ++i) EXPECT_EQ(cap.k[3](5, i), held[i]);
  // Layer 0's input is the embedding of the tokens.
  RowMatrix embedding(1, c.hidden_size);
  weights_->token_embd.dequantize_rows(t[4], 1, embedding.data());
  EXPECT_EQ(max_abs_diff(cap.layer_input[0].row(4), embedding), 0.0);
  for (int l : {1, 3}) {
    KvCache fresh(c, KvCacheOptions::exact_kv());
    const RowMatrix from =
        model.forward_from_layer(l, cap.layer_input[static_cast<size_t>(l)], fresh);
    EXPECT_LT(max_abs_diff(from, logits), 1e-5) << "from layer " << l;
  }
}

// The profiler's reference pass runs its prompts as one batch with a capture per prompt: each
// capture must hold what the prompt's own forward captures, bit for bit.
TEST_F(Stories, BatchCapturesEqualEachPromptsOwn) {
  const Transformer model(*weights_);
  const ModelConfig& c = weights_->config;
  const std::vector<int32_t> a = tokens(13), b = tokens(7);
  ForwardCapture alone_a, alone_b;
  KvCache cache_a(c, KvCacheOptions::exact_kv()), cache_b(c, KvCacheOptions::exact_kv());
  (void)model.forward(a, cache_a, &alone_a, {.logits_from_row = 6});
  (void)model.forward(b, cache_b, &alone_b);

  const RowMatrix in_a = model.embed(a), in_b = model.embed(b);
  KvCache batch_a(c, KvCacheOptions::exact_kv()), batch_b(c, KvCacheOptions::exact_kv());
  ForwardCapture cap_a, cap_b;
  cap_b.residual_input = false;
  const Transformer::BatchSequence batch[] = {{&in_a, &batch_a, 6, &cap_a},
                                              {&in_b, &batch_b, 0, &cap_b}};
  const RowMatrix logits = model.forward_batch_from_layer(0, batch);
  ASSERT_EQ(logits.rows(), 7 + 7);
  ASSERT_EQ(cap_a.logits.rows(), 7);
  ASSERT_EQ(cap_b.logits.rows(), 7);
  EXPECT_EQ(max_abs_diff(cap_a.logits, alone_a.logits), 0.0);
  EXPECT_EQ(max_abs_diff(cap_b.logits, alone_b.logits), 0.0);
  EXPECT_EQ(max_abs_diff(logits.bottomRows(7), alone_b.logits), 0.0);
  EXPECT_TRUE(cap_b.layer_input.empty());
  for (size_t l = 0; l < static_cast<size_t>(c.n_layers); ++l) {
    ASSERT_EQ(cap_a.layer_input[l].rows(), 13);
    ASSERT_EQ(cap_a.q[l].rows(), 13);
    ASSERT_EQ(cap_b.k[l].rows(), 7);
    ASSERT_EQ(cap_b.v[l].rows(), 7);
    EXPECT_EQ(max_abs_diff(cap_a.layer_input[l], alone_a.layer_input[l]), 0.0) << l;
    EXPECT_EQ(max_abs_diff(cap_a.q[l], alone_a.q[l]), 0.0) << l;
    EXPECT_EQ(max_abs_diff(cap_b.k[l], alone_b.k[l]), 0.0) << l;
    EXPECT_EQ(max_abs_diff(cap_b.v[l], alone_b.v[l]), 0.0) << l;
    EXPECT_EQ(batch_b.layer(static_cast<int>(l)).n_tokens(), 7u);
  }
}

TEST_F(Stories, RefusesBadTokens) {
  const Transformer model(*weights_);
  KvCache cache(weights_->config, KvCacheOptions::exact_kv());
  const std::vector<int32_t> bad = {1, 512};
  EXPECT_THROW((void)model.forward(bad, cache), Error);
  EXPECT_THROW((void)model.forward(std::span<const int32_t>(), cache), Error);
}

TEST_F(Stories, GreedyTextFromOnceUponATime) {
  const std::unique_ptr<Tokenizer> tok =
      load_model_tokenizer(test::models_dir() / "stories260K.gguf");
  std::vector<int32_t> ids = tok->encode("Once upon a time", {.add_bos = true});
  const Transformer model(*weights_);
  KvCache cache(weights_->config, KvCacheOptions::exact_kv());
  RowMatrix logits = model.forward(ids, cache, nullptr, {.last_logits_only = true});
  const size_t prompt = ids.size();
  for (int i = 0; i < 40; ++i) {
    Eigen::Index best = 0;
    logits.row(0).maxCoeff(&best);
    ids.push_back(static_cast<int32_t>(best));
    logits = model.forward(std::span(ids).last(1), cache, nullptr, {.last_logits_only = true});
  }
  (void)prompt;
  const std::string text = tok->decode(ids);
  EXPECT_EQ(text.rfind("Once upon a time, there was a little girl named Lily. She loved to play "
                       "outside in the park.",
                       0),
            0u)
      << text;
}

TEST(SmolLM2, GreedyAnswerWhenPresent) {
  const auto path = test::smollm2_path();
  KVPLAN_NEED_FILE(path, "run scripts/models/fetch-smollm2.sh (or set KVPLAN_CACHE)");
  const ModelWeights w = load_model_weights(path);
  EXPECT_EQ(w.config.n_layers, 30);
  EXPECT_EQ(w.config.head_dim, 64);
  EXPECT_TRUE(w.tied_embeddings());
  const std::unique_ptr<Tokenizer> tok = load_model_tokenizer(path);
  std::vector<int32_t> ids = tok->encode("The capital of France is", {.add_bos = true});
  const Transformer model(w);
  KvCache cache(w.config, KvCacheOptions::exact_kv());
  RowMatrix logits = model.forward(ids, cache, nullptr, {.last_logits_only = true});
  std::vector<int32_t> out;
  for (int i = 0; i < 3; ++i) {
    Eigen::Index best = 0;
    logits.row(0).maxCoeff(&best);
    out.push_back(static_cast<int32_t>(best));
    logits = model.forward(std::span(out).last(1), cache, nullptr, {.last_logits_only = true});
  }
  EXPECT_NE(tok->decode(out).find("Paris"), std::string::npos) << tok->decode(out);
}

}  // namespace
}  // namespace kvplan
