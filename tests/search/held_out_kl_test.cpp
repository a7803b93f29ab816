// HeldOutKl on stories260K against a KL computed here from two plain forward passes: the cache
// rules it is given (the profile's chunk_attends_quantized among them) are the ones it measures
// under.
#include "search/held_out_kl.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "model/model_weights.h"
#include "test_paths.h"

namespace kvplan::search {
namespace {

std::vector<int32_t> prompt(size_t n, size_t salt) {
  std::vector<int32_t> t(n);
  t[0] = 1;  // BOS
  for (size_t i = 1; i < n; ++i) t[i] = static_cast<int32_t>((i * 37 + salt * 101 + 11) % 500 + 3);
  return t;
}

// Mean over the scored rows of KL(exact || quantized), from logits, in f64.
double mean_kl_of(const Transformer& model, const std::vector<std::vector<int32_t>>& prompts,
                  const KvCacheOptions& quantized) {
  double kl = 0;
  int64_t scored = 0;
  for (const auto& t : prompts) {
    KvCache exact_cache(model.config(), KvCacheOptions::exact_kv());
    KvCache quantized_cache(model.config(), quantized);
    const RowMatrix p = model.forward(t, exact_cache), q = model.forward(t, quantized_cache);
    for (Eigen::Index r = 0; r + 1 < p.rows(); ++r) {
      const Eigen::RowVectorXd lp = p.row(r).cast<double>(), lq = q.row(r).cast<double>();
      const double zp = std::log((lp.array() - lp.maxCoeff()).exp().sum()) + lp.maxCoeff();
      const double zq = std::log((lq.array() - lq.maxCoeff()).exp().sum()) + lq.maxCoeff();
      for (Eigen::Index v = 0; v < lp.size(); ++v) {
        kl += std::exp(lp(v) - zp) * ((lp(v) - zp) - (lq(v) - zq));
      }
      ++scored;
    }
  }
  return kl / static_cast<double>(scored);
}

TEST(HeldOutKl, MeasuresUnderTheChunkRuleItIsGiven) {
  const auto path = test::models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(path, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  const ModelWeights weights = load_model_weights(path);
  const Transformer model(weights);
  const std::vector<std::vector<int32_t>> prompts = {prompt(40, 1), prompt(33, 2)};
  const int n_layers = weights.config.n_layers;
  const std::vector<KvPair> pairs(static_cast<size_t>(n_layers), KvPair::parse("KV2"));

  for (const bool attends : {true, false}) {
    const HeldOutKl kl(model, prompts, {QuantSettings{}, attends});
    KvCacheOptions kv = KvCacheOptions::per_layer(pairs, QuantSettings{});
    kv.chunk_attends_quantized = attends;
    const double expected = mean_kl_of(model, prompts, kv);
    // HeldOutKl keeps the exact log-probabilities in f32: 1e-7 nats of absolute slack. A prompt
    // that is one prefill chunk attending over its exact K/V is the exact model (expected = 0).
    EXPECT_NEAR(kl.measure(pairs).mean_kl, expected, 1e-7 + 1e-5 * expected)
        << "attends " << attends;
  }
  // The two rules give very different errors, so the check above tells them apart.
  const HeldOutKl quantized_chunk(model, prompts, {QuantSettings{}, true});
  const HeldOutKl exact_chunk(model, prompts, {QuantSettings{}, false});
  EXPECT_GT(quantized_chunk.measure(pairs).mean_kl, 0.01);
  EXPECT_LT(exact_chunk.measure(pairs).mean_kl, 1e-6);
}

// Prompts whose exact logits are not kept (a large vocabulary) are re-run exactly per
// measurement: the same bits as kept logits, whatever the memory budget.
TEST(HeldOutKl, ResultsDoNotDependOnTheExactLogitsKept) {
  const auto path = test::models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(path, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  const ModelWeights weights = load_model_weights(path);
  const Transformer model(weights);
  const std::vector<std::vector<int32_t>> prompts = {prompt(40, 1), prompt(33, 2), prompt(50, 3)};
  const std::vector<KvPair> pairs(static_cast<size_t>(weights.config.n_layers),
                                  KvPair::parse("K4V2"));
  const HeldOutKl::CacheRules rules{QuantSettings{}, true};
  const size_t one_prompt = 40 * static_cast<size_t>(weights.config.vocab_size) * sizeof(float);
  const HeldOutKl::Result all = HeldOutKl(model, prompts, rules).measure(pairs);
  for (const size_t budget : {size_t{0}, one_prompt}) {
    const HeldOutKl::Result r = HeldOutKl(model, prompts, rules, budget).measure(pairs);
    EXPECT_EQ(r.mean_kl, all.mean_kl) << budget;
    EXPECT_EQ(r.kl_sums, all.kl_sums) << budget;
    EXPECT_EQ(r.ppl_exact, all.ppl_exact) << budget;
    EXPECT_EQ(r.top1_agreement, all.top1_agreement) << budget;
  }
  EXPECT_GT(all.mean_kl, 0.0);
}

// Configurations measured together, prompt by prompt, give each one's measure() bit for bit,
// whether the exact logits are kept or re-run once per prompt for the whole batch.
TEST(HeldOutKl, MeasuringTogetherGivesEachConfigurationsOwnBits) {
  const auto path = test::models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(path, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  const ModelWeights weights = load_model_weights(path);
  const Transformer model(weights);
  const std::vector<std::vector<int32_t>> prompts = {prompt(40, 1), prompt(33, 2), prompt(50, 3)};
  const size_t n_layers = static_cast<size_t>(weights.config.n_layers);
  std::vector<KvPair> mixed(n_layers, KvPair::parse("KV8"));
  mixed[1] = KvPair::parse("K2V4");
  const std::vector<std::vector<KvPair>> configs = {
      std::vector<KvPair>(n_layers, KvPair::parse("K4V2")), mixed,
      std::vector<KvPair>(n_layers, KvPair::parse("KV2"))};
  const HeldOutKl::CacheRules rules{QuantSettings{}, true};
  for (const size_t budget : {size_t{0}, size_t{1} << 30}) {
    const HeldOutKl kl(model, prompts, rules, budget);
    const std::vector<HeldOutKl::Result> together = kl.measure_all(configs);
    ASSERT_EQ(together.size(), configs.size());
    for (size_t c = 0; c < configs.size(); ++c) {
      const HeldOutKl::Result alone = kl.measure(configs[c]);
      EXPECT_EQ(together[c].mean_kl, alone.mean_kl) << budget << " " << c;
      EXPECT_EQ(together[c].kl_sums, alone.kl_sums) << budget << " " << c;
      EXPECT_EQ(together[c].top1_agreement, alone.top1_agreement) << budget << " " << c;
      EXPECT_EQ(together[c].ppl, alone.ppl) << budget << " " << c;
    }
    // Three different errors: the results are not one configuration's copied.
    EXPECT_NE(together[0].mean_kl, together[1].mean_kl);
    EXPECT_LT(together[0].mean_kl, together[2].mean_kl);
    EXPECT_LT(together[1].mean_kl, together[2].mean_kl);
  }
  EXPECT_TRUE(HeldOutKl(model, prompts, rules).measure_all({}).empty());
}

// A configuration per KV head: every head of a layer alike measures bit for bit as the per-layer
// configuration; one head of one layer coarser moves the error between the two uniform ones, and
// measures as a forward pass over a cache built from that configuration does.
TEST(HeldOutKl, MeasuresConfigurationsPerKvHead) {
  const auto path = test::models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(path, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  const ModelWeights weights = load_model_weights(path);
  const Transformer model(weights);
  const std::vector<std::vector<int32_t>> prompts = {prompt(40, 1), prompt(33, 2)};
  const KvGeometry geometry = kv_geometry(weights.config);
  const size_t n_layers = static_cast<size_t>(geometry.n_layers());
  const size_t n_heads = static_cast<size_t>(geometry.n_kv_heads_total());
  ASSERT_GT(n_heads, n_layers);
  const KvPair fine = KvPair::parse("KV8"), coarse = KvPair::parse("KV2");
  const HeldOutKl kl(model, prompts, {QuantSettings{}, true});
  const HeldOutKl::Result per_layer = kl.measure(std::vector<KvPair>(n_layers, fine));
  const HeldOutKl::Result per_head = kl.measure(std::vector<KvPair>(n_heads, fine));
  EXPECT_EQ(per_head.kl_sums, per_layer.kl_sums);
  EXPECT_EQ(per_head.mean_kl, per_layer.mean_kl);

  std::vector<KvPair> one_coarse(n_heads, fine);
  one_coarse[1] = coarse;  // layer 0, KV head 1
  const double mixed = kl.measure(one_coarse).mean_kl;
  std::vector<KvPair> layer_coarse(n_layers, fine);
  layer_coarse[0] = coarse;
  EXPECT_GT(mixed, per_layer.mean_kl);
  EXPECT_LT(mixed, kl.measure(layer_coarse).mean_kl);
  const KvCacheOptions options =
      HeldOutKl::CacheRules{QuantSettings{}, true}.cache_for(one_coarse, geometry);
  ASSERT_EQ(options.head_pairs.size(), n_layers);
  EXPECT_EQ(options.head_pairs[0][1], coarse);
  EXPECT_NEAR(mixed, mean_kl_of(model, prompts, options), 1e-7 + 1e-5 * mixed);
  EXPECT_THROW((void)kl.measure(std::vector<KvPair>(n_layers + 1, fine)), Error);
}

// With a measurement store: the same bits as without; run again, every cell is read back (the file
// does not grow, and a store whose KL sums were doubled gives doubled sums); other rules, prompts
// or another context measure anew.
TEST(HeldOutKl, AMeasurementStoreGivesBackTheBitsItWasGiven) {
  const auto path = test::models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(path, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  const ModelWeights weights = load_model_weights(path);
  const Transformer model(weights);
  const std::vector<std::vector<int32_t>> prompts = {prompt(40, 1), prompt(33, 2), prompt(50, 3)};
  const size_t n_layers = static_cast<size_t>(weights.config.n_layers);
  std::vector<KvPair> mixed(n_layers, KvPair::parse("KV8"));
  mixed[2] = KvPair::parse("K2V4");
  const std::vector<std::vector<KvPair>> configs = {
      std::vector<KvPair>(n_layers, KvPair::parse("K4V2")), mixed};
  const HeldOutKl::CacheRules rules{QuantSettings{}, true};
  const std::vector<HeldOutKl::Result> plain =
      HeldOutKl(model, prompts, rules).measure_all(configs);

  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("kvplan_held_out_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "cells.jsonl";
  const auto lines = [&] {
    std::ifstream in(file);
    size_t n = 0;
    for (std::string l; std::getline(in, l);) ++n;
    return n;
  };
  const auto expect_bits = [&](const std::vector<HeldOutKl::Result>& got, double kl_factor) {
    ASSERT_EQ(got.size(), plain.size());
    for (size_t c = 0; c < got.size(); ++c) {
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ(got[c].kl_sums[i], kl_factor * plain[c].kl_sums[i]) << c << " " << i;
      }
      EXPECT_EQ(got[c].ppl, plain[c].ppl) << c;
      EXPECT_EQ(got[c].top1_agreement, plain[c].top1_agreement) << c;
    }
  };
  const size_t cells = configs.size() * prompts.size();
  {
    MeasurementStore store(file, "context A");
    // No exact logits kept: the prompt's exact forward is re-run, as on a large vocabulary.
    expect_bits(HeldOutKl(model, prompts, rules, 0, &store).measure_all(configs), 1);
    EXPECT_EQ(store.size(), cells);
  }
  EXPECT_EQ(lines(), 1 + cells);
  {
    MeasurementStore store(file, "context A");
    expect_bits(HeldOutKl(model, prompts, rules, std::nullopt, &store).measure_all(configs), 1);
  }
  EXPECT_EQ(lines(), 1 + cells);

  // Read back, not re-measured: double every KL sum in the file.
  {
    std::ifstream in(file);
    std::string header, text;
    std::getline(in, header);
    text = header + "\n";
    for (std::string l; std::getline(in, l);) {
      nlohmann::json j = nlohmann::json::parse(l);
      j["kl"] = 2 * j["kl"].get<double>();
      text += j.dump() + "\n";
    }
    in.close();
    std::ofstream(file, std::ios::trunc) << text;
  }
  {
    MeasurementStore store(file, "context A");
    expect_bits(HeldOutKl(model, prompts, rules, std::nullopt, &store).measure_all(configs), 2);
  }
  // Another context, other rules, one prompt changed: their cells are not there.
  {
    MeasurementStore store(file, "context B");
    expect_bits(HeldOutKl(model, prompts, rules, std::nullopt, &store).measure_all(configs), 1);
  }
  EXPECT_EQ(lines(), 1 + 2 * cells);
  {
    MeasurementStore store(file, "context A");
    (void)HeldOutKl(model, prompts, {QuantSettings{}, false}, std::nullopt, &store)
        .measure_all(configs);
    std::vector<std::vector<int32_t>> changed = prompts;
    changed[1][5] += 1;
    const std::vector<HeldOutKl::Result> r =
        HeldOutKl(model, changed, rules, std::nullopt, &store).measure_all(configs);
    // Prompts 0 and 2 are unchanged: read back (doubled); prompt 1 measured anew.
    EXPECT_EQ(r[0].kl_sums[0], 2 * plain[0].kl_sums[0]);
    EXPECT_NE(r[0].kl_sums[1], 2 * plain[0].kl_sums[1]);
  }
  EXPECT_EQ(lines(), 1 + 3 * cells + configs.size());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kvplan::search
