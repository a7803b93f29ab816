// Every family the harness runs from safetensors, against logits HF transformers computed for the
// same tiny random-initialized checkpoint (tests/fixtures/hf, written by
// scripts/fixtures/make-hf-fixtures.sh): the independent reference for each family's conventions
// (Qwen3's Q/K norms, Mistral's and Phi-3's windows, Phi-3's fused projections, Gemma 2's soft caps
// and 1 + w norms, Gemma 3's local RoPE base and global-only RoPE scaling, ...).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/file_io.h"
#include "formats/kv_pair.h"
#include "model/kv_cache.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "model/safetensors_file.h"
#include "model/transformer.h"

namespace kvplan {
namespace {

// transformers and kvplan both compute in f32; they differ only in summation order.
constexpr float kLogitTolerance = 1e-4f;

std::filesystem::path fixture_dir(const std::string& family) {
  return std::filesystem::path(KVPLAN_SOURCE_DIR) / "tests" / "fixtures" / "hf" / family;
}

struct Reference {
  std::string text;
  std::vector<int32_t> ids;
  RowMatrix logits;  // [tokens, vocab]
};

Reference load_reference(const std::string& family) {
  const std::filesystem::path dir = fixture_dir(family);
  const nlohmann::json j = nlohmann::json::parse(read_text_file(dir / "reference.json"));
  Reference r;
  r.text = j.at("text").get<std::string>();
  r.ids = j.at("token_ids").get<std::vector<int32_t>>();
  const SafetensorsSet set(dir / "reference-logits.safetensors");
  const SafetensorsTensor& t = set.tensor("logits");
  const std::vector<float> v = set.to_f32(t);
  r.logits = Eigen::Map<const RowMatrix>(v.data(), static_cast<Eigen::Index>(t.shape.at(0)),
                                         static_cast<Eigen::Index>(t.shape.at(1)));
  return r;
}

float max_abs_diff(const RowMatrix& a, const RowMatrix& b) {
  return (a - b).cwiseAbs().maxCoeff();
}

RowMatrix run_whole(const ModelWeights& w, const std::vector<int32_t>& ids) {
  const Transformer model(w);
  KvCache cache(w.config, KvCacheOptions::exact_kv());
  return model.forward(ids, cache);
}

class HfFamily : public ::testing::TestWithParam<std::string> {};

TEST_P(HfFamily, LogitsMatchTransformers) {
  const std::string family = GetParam();
  const ModelWeights w = load_model_weights(fixture_dir(family));
  EXPECT_EQ(w.config.architecture, family);
  const Reference ref = load_reference(family);
  ASSERT_EQ(ref.logits.rows(), static_cast<Eigen::Index>(ref.ids.size()));
  const RowMatrix logits = run_whole(w, ref.ids);
  ASSERT_EQ(logits.cols(), ref.logits.cols());
  EXPECT_LT(max_abs_diff(logits, ref.logits), kLogitTolerance)
      << family << ": logits max |" << ref.logits.cwiseAbs().maxCoeff() << "|";
}

// A prefill then decoding from the cache: windows and RoPE positions carry across chunks.
TEST_P(HfFamily, ChunkedForwardMatchesTransformers) {
  const std::string family = GetParam();
  const ModelWeights w = load_model_weights(fixture_dir(family));
  const Reference ref = load_reference(family);
  const Transformer model(w);
  KvCache cache(w.config, KvCacheOptions::exact_kv());
  const size_t prefill = 13;
  const std::vector<int32_t> head(ref.ids.begin(), ref.ids.begin() + prefill);
  const RowMatrix first = model.forward(head, cache);
  EXPECT_LT(max_abs_diff(first, ref.logits.topRows(static_cast<Eigen::Index>(prefill))),
            kLogitTolerance);
  for (size_t t = prefill; t < ref.ids.size(); ++t) {
    const RowMatrix row = model.forward(std::span<const int32_t>(&ref.ids[t], 1), cache);
    EXPECT_LT(max_abs_diff(row, ref.logits.row(static_cast<Eigen::Index>(t))), kLogitTolerance)
        << family << " token " << t;
  }
}

TEST_P(HfFamily, TokenizerMatchesTransformers) {
  const std::string family = GetParam();
  const Reference ref = load_reference(family);
  const auto tokenizer = load_model_tokenizer(fixture_dir(family));
  std::vector<int32_t> ids = tokenizer->encode(ref.text);
  ASSERT_GE(ids.size(), ref.ids.size());
  ids.resize(ref.ids.size());
  EXPECT_EQ(ids, ref.ids);
}

// The profiler runs its KL prompts as one batch: each sequence's logits must be the bits it gets
// alone, at any position (a cache already holding tokens), with a quantized cache, on every
// family's conventions (sliding windows, local RoPE bases, soft caps).
TEST_P(HfFamily, BatchOfSequencesEqualsEachAlone) {
  const std::string family = GetParam();
  const ModelWeights w = load_model_weights(fixture_dir(family));
  const Reference ref = load_reference(family);
  ASSERT_GE(ref.ids.size(), 30u);
  const Transformer model(w);
  const KvCacheOptions kv = KvCacheOptions::uniform(KvPair::parse("K8V4"), w.config.n_layers, {});
  const auto ids = [&](size_t from, size_t to) {
    return std::vector<int32_t>(ref.ids.begin() + static_cast<std::ptrdiff_t>(from),
                                ref.ids.begin() + static_cast<std::ptrdiff_t>(to));
  };
  // A cache holding the first `n` tokens.
  const auto prefilled = [&](size_t n) {
    auto cache = std::make_unique<KvCache>(w.config, kv);
    if (n > 0) (void)model.forward(ids(0, n), *cache);
    return cache;
  };
  // The residual stream entering layer 1 for tokens [from, to) after `from` cached tokens.
  const auto layer1_input = [&](size_t from, size_t to) {
    auto cache = prefilled(from);
    ForwardCapture cap;
    (void)model.forward(ids(from, to), *cache, &cap);
    return cap.layer_input[1];
  };
  const RowMatrix a = layer1_input(0, 20), b = layer1_input(8, 30);
  auto a_alone = prefilled(0), b_alone = prefilled(8);
  RowMatrix alone(15 + 22, w.config.vocab_size);
  alone << model.forward_from_layer(1, a, *a_alone, nullptr, {.logits_from_row = 5}),
      model.forward_from_layer(1, b, *b_alone, nullptr);
  auto a_batch = prefilled(0), b_batch = prefilled(8);
  const Transformer::BatchSequence batch[] = {{&a, a_batch.get(), 5}, {&b, b_batch.get(), 0}};
  const RowMatrix together = model.forward_batch_from_layer(1, batch);
  ASSERT_EQ(together.rows(), alone.rows());
  EXPECT_EQ(max_abs_diff(together, alone), 0.0f) << family;

  EXPECT_EQ(a_batch->layer(1).n_tokens(), 20u);
  EXPECT_EQ(b_batch->layer(1).n_tokens(), 30u);
}

INSTANTIATE_TEST_SUITE_P(Families, HfFamily,
                         ::testing::Values("llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2",
                                           "gemma3"),
                         [](const auto& info) { return info.param; });

// The tolerance is far below what each convention moves: switching one off breaks the match.
struct Convention {
  std::string family;
  std::string what;
  std::function<void(ModelWeights&)> undo;
};

class HfConvention : public ::testing::TestWithParam<Convention> {};

TEST_P(HfConvention, UndoingItBreaksTheMatch) {
  const Convention& c = GetParam();
  ModelWeights w = load_model_weights(fixture_dir(c.family));
  const Reference ref = load_reference(c.family);
  c.undo(w);
  EXPECT_GT(max_abs_diff(run_whole(w, ref.ids), ref.logits), 100 * kLogitTolerance) << c.what;
}

void drop_windows(ModelWeights& w) {
  std::fill(w.config.sliding_window.begin(), w.config.sliding_window.end(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Conventions, HfConvention,
    ::testing::Values(
        Convention{"mistral", "sliding window", drop_windows},
        Convention{"phi3", "sliding window", drop_windows},
        Convention{"gemma2", "alternating windows", drop_windows},
        Convention{"gemma2", "attention soft cap",
                   [](ModelWeights& w) { w.config.attn_logit_softcap = 0; }},
        Convention{"gemma2", "final logit soft cap",
                   [](ModelWeights& w) { w.config.final_logit_softcap = 0; }},
        Convention{"gemma2", "query_pre_attn_scalar",
                   [](ModelWeights& w) { w.config.attention_scale = 0; }},
        Convention{"gemma2", "1 + w norm weights",
                   [](ModelWeights& w) { w.output_norm.array() -= 1.0f; }},
        Convention{"gemma3", "local RoPE base",
                   [](ModelWeights& w) { w.config.rope_theta_sliding = 0; }},
        Convention{"gemma3", "global-only RoPE scaling",
                   [](ModelWeights& w) { w.config.rope_scaling = RopeScaling::kNone; }},
        Convention{"qwen3", "Q/K norms", [](ModelWeights& w) { w.config.qk_norm = false; }},
        Convention{"qwen2", "q/k/v biases",
                   [](ModelWeights& w) {
                     for (LayerWeights& L : w.layers) L.bqkv.resize(0);
                   }}),
    [](const auto& info) {
      std::string name = info.param.family + "_" + info.param.what;
      for (char& ch : name) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return name;
    });

}  // namespace
}  // namespace kvplan
