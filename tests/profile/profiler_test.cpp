// The profiler on real models: metrics grow as bits fall in every layer, keys are more sensitive
// than values, reruns / thread counts / shards / resume give the same bytes, a lossless pair gives
// exact zeros, and bad input is refused.
#include "profile/profiler.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_io.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "profile/candidate_lists.h"
#include "profile/dkl_estimate.h"
#include "profile/kv_roundtrip.h"
#include "profile/metrics.h"
#include "profile/shard_merge.h"
#include "test_paths.h"

namespace kvplan {
namespace {

const std::filesystem::path kDefaultSet =
    std::filesystem::path(KVPLAN_SOURCE_DIR) / "configs" / "calibration" / "default.jsonl";

struct LoadedModel {
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<Transformer> model;
};

std::unique_ptr<LoadedModel> load(const std::filesystem::path& path) {
  auto m = std::make_unique<LoadedModel>();
  m->weights = load_model_weights(path);
  m->tokenizer = load_model_tokenizer(path);
  m->model = std::make_unique<Transformer>(m->weights);
  return m;
}

// The profile's bytes with the timings field dropped (it is the last key).
std::string without_timings(const Profile& p) {
  nlohmann::json j = nlohmann::json::parse(profile_text(p));
  j.erase("timings");
  return j.dump(1);
}

std::string text_before_timings(const std::string& text) {
  const size_t at = text.find("\n \"timings\":");
  EXPECT_NE(at, std::string::npos);
  return text.substr(0, at);
}

double metric(const ProfileCell& c, int m) {
  const double v[] = {c.metrics.e_k, c.metrics.e_v, c.metrics.e_a, c.metrics.e_o, c.metrics.dkl};
  return v[m];
}
const char* const kMetricNames[] = {"e_k", "e_v", "e_a", "e_o", "dkl"};

size_t index_of(const Profile& p, const std::string& name) {
  for (size_t i = 0; i < p.candidates.size(); ++i) {
    if (p.candidates[i].name() == name) return i;
  }
  ADD_FAILURE() << "no candidate " << name;
  return 0;
}

// Checks KV8 < KV4 < KV2 for every metric in the profiled layers; returns the key/value ratio
// sum_l dKL(K{lo}V8) / sum_l dKL(K8V{lo}).
double check_monotonic_and_ratio(const Profile& p, const std::string& lo) {
  const size_t i8 = index_of(p, "KV8"), i4 = index_of(p, "KV4"), i2 = index_of(p, "KV2");
  const size_t kl = index_of(p, "K" + lo + "V8"), vl = index_of(p, "K8V" + lo);
  double num = 0, den = 0;
  for (int l = 0; l < p.n_layers(); ++l) {
    const ProfileCell* a = p.cell(l, i8);
    if (a == nullptr) continue;
    const ProfileCell* b = p.cell(l, i4);
    const ProfileCell* c = p.cell(l, i2);
    for (int m = 0; m < 5; ++m) {
      EXPECT_LT(metric(*a, m), metric(*b, m)) << "layer " << l << " " << kMetricNames[m];
      EXPECT_LT(metric(*b, m), metric(*c, m)) << "layer " << l << " " << kMetricNames[m];
      EXPECT_GT(metric(*a, m), 0.0) << "layer " << l << " " << kMetricNames[m];
    }
    num += p.cell(l, kl)->metrics.dkl;
    den += p.cell(l, vl)->metrics.dkl;
  }
  return num / den;
}

class StoriesProfile : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto path = test::models_dir() / "stories260K.gguf";
    if (!std::filesystem::exists(path)) return;
    model_ = load(path).release();
    calibration_ =
        new CalibrationSet(load_calibration(kDefaultSet, *model_->tokenizer, model_->weights.config,
                                            {.max_tokens = 48, .num_prompts = 8}));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete calibration_;
  }
  void SetUp() override {
    KVPLAN_NEED_FILE(test::models_dir() / "stories260K.gguf",
                     "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
    ASSERT_NE(model_, nullptr);
  }
  static ProfileOptions options() {
    ProfileOptions o;
    o.kl_prompts = 4;
    o.tool_version = "test";
    return o;
  }
  static Profile run(const ProfileOptions& o) {
    return run_profile(*model_->model, *calibration_, o);
  }

  static LoadedModel* model_;
  static CalibrationSet* calibration_;
};
LoadedModel* StoriesProfile::model_ = nullptr;
CalibrationSet* StoriesProfile::calibration_ = nullptr;

TEST_F(StoriesProfile, MetricsGrowAsBitsFallInEveryLayerAndKeysAreMoreSensitive) {
  ProfileOptions o = options();
  o.candidates = kvtuner_candidates();
  const Profile p = run(o);
  ASSERT_TRUE(p.complete());
  ASSERT_EQ(p.n_layers(), 5);
  const double r4 = check_monotonic_and_ratio(p, "4");
  const double r2 = check_monotonic_and_ratio(p, "2");
  std::printf("stories260K key/value dKL ratio: K4V8/K8V4 %.2f, K2V8/K8V2 %.2f\n", r4, r2);
  EXPECT_GT(r4, 1.0);
  EXPECT_GT(r2, 1.0);
  // Bytes per token by hand: int-b rows of head_dim values, one f16 scale + zero per group of
  // min(32, head_dim), for every KV head.
  const ModelConfig& c = model_->weights.config;
  ASSERT_LE(c.head_dim, 32);
  for (const auto& [name, bits] : {std::pair{"KV8", 8}, {"KV4", 4}, {"KV2", 2}}) {
    const ProfileCell* cell = p.cell(0, index_of(p, name));
    const double row = c.head_dim * bits / 8.0 + 4.0;
    EXPECT_DOUBLE_EQ(cell->key_bytes_per_token, row * c.n_kv_heads[0]) << name;
    EXPECT_DOUBLE_EQ(cell->value_bytes_per_token, row * c.n_kv_heads[0]) << name;
    EXPECT_EQ(cell->nominal_bits, bits);
  }
  EXPECT_EQ(p.calibration.prompts, 8);
  EXPECT_EQ(p.calibration.kl_prompts, 4);
}

// Each cell's o_mse split over the KV heads whose query heads it sums: one share per KV head, the
// shares adding up to o_mse, and heads that differ (what per-KV-head plans are chosen from).
TEST_F(StoriesProfile, CellsSplitTheirOutputErrorOverTheKvHeads) {
  ProfileOptions o = options();
  o.candidates = kvtuner_candidates();
  o.per_head_dkl = true;
  const Profile p = run(o);
  // Without per_head_dkl the same cells and o_mse_heads, and no per-head re-runs.
  o.per_head_dkl = false;
  const Profile plain = run(o);
  EXPECT_TRUE(plain.cell(1, 0)->metrics.dkl_heads.empty());
  EXPECT_EQ(plain.cell(1, 0)->metrics.o_mse_heads, p.cell(1, 0)->metrics.o_mse_heads);
  EXPECT_EQ(plain.cell(1, 0)->metrics.dkl, p.cell(1, 0)->metrics.dkl);
  EXPECT_EQ(p.per_head_dkl(), std::optional<bool>(true));
  EXPECT_EQ(plain.per_head_dkl(), std::optional<bool>(false));
  // The two are not one experiment: a profile resumed or merged across them would leave some
  // layers' heads apportioned by o_mse alone.
  EXPECT_NE(profile_identity_mismatch(p, plain).find("dkl_heads (--per-head-dkl)"),
            std::string::npos);
  ProfileOptions resume = o;
  resume.per_head_dkl = true;
  resume.resume = &plain;
  try {
    (void)run(resume);
    ADD_FAILURE() << "resumed a profile made without --per-head-dkl with it";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("made without --per-head-dkl"), std::string::npos)
        << e.what();
  }
  const int n_kv = model_->weights.config.n_kv_heads[0];
  ASSERT_GT(n_kv, 1);
  int differ = 0;
  for (int l = 0; l < p.n_layers(); ++l) {
    for (size_t c = 0; c < p.candidates.size(); ++c) {
      const CellMetrics& m = p.cell(l, c)->metrics;
      ASSERT_EQ(m.o_mse_heads.size(), static_cast<size_t>(n_kv)) << l << " " << c;
      double sum = 0;
      for (const double share : m.o_mse_heads) sum += share;
      EXPECT_NEAR(sum, m.o_mse, 1e-12 * m.o_mse) << l << " " << p.candidates[c].name();
      const auto [lo, hi] = std::minmax_element(m.o_mse_heads.begin(), m.o_mse_heads.end());
      differ += *hi > 1.5 * *lo;
      // Every KVTuner cell re-runs here: dKL with each head alone quantized, each positive.
      ASSERT_EQ(m.dkl_heads.size(), static_cast<size_t>(n_kv)) << l << " " << c;
      for (const double d : m.dkl_heads) EXPECT_GT(d, 0.0) << l << " " << p.candidates[c].name();
    }
  }
  EXPECT_GT(differ, 0);
}

// The default: every catalogue format that packs head_dim 8, for keys and values separately; dKL
// re-run only for the int4 anchors and their joint pair, estimated from o_mse for the rest.
TEST_F(StoriesProfile, DefaultCatalogProfilesKeysAndValuesSeparately) {
  const Profile p = run(options());
  ASSERT_TRUE(p.complete());
  std::vector<std::string> names, measured;
  for (size_t c = 0; c < p.candidates.size(); ++c) {
    names.push_back(p.candidates[c].name());
    if (p.measures_dkl(c)) measured.push_back(p.candidates[c].name());
  }
  // No 32-value blocks on rows of 8 (the ggml, MX and NVFP4 formats and their rotated variants);
  // int*_g64/g128 pack exactly like int* there; the KIVI formats are for keys only.
  const std::vector<std::string> both = {"fp8_e4m3",
                                         "fp8_e5m2",
                                         "fp8_per_token_head",
                                         "tq_fp8",
                                         "tq_mse3",
                                         "tq_mse4",
                                         "tq_int3",
                                         "tq_int4",
                                         "int4_per_token_head",
                                         "int8_per_token_head"};
  std::vector<std::string> keys = {"f16",  "bf16",      "int8",      "int4",
                                   "int2", "int8_kivi", "int4_kivi", "int2_kivi"};
  std::vector<std::string> values = {"f16", "bf16", "int8", "int4", "int2"};
  keys.insert(keys.end(), both.begin(), both.end());
  values.insert(values.end(), both.begin(), both.end());
  std::vector<std::string> expected;
  for (const std::string& f : keys) expected.push_back(f + "/f32");
  for (const std::string& f : values) expected.push_back("f32/" + f);
  expected.push_back("KV4");
  EXPECT_EQ(names, expected);
  EXPECT_EQ(measured, (std::vector<std::string>{"int4/f32", "f32/int4", "KV4"}));
  for (int l = 0; l < p.n_layers(); ++l) {
    const auto dkl = [&](const char* name) { return p.cell(l, index_of(p, name))->metrics.dkl; };
    EXPECT_GT(dkl("int2/f32"), dkl("int4/f32")) << "layer " << l;
    EXPECT_GT(dkl("int4/f32"), dkl("int8/f32")) << "layer " << l;
    EXPECT_GT(dkl("f32/int2"), dkl("f32/int4")) << "layer " << l;
    // Estimated cells share their side's alpha = dKL / o_mse with the anchor.
    const ProfileCell* anchor = p.cell(l, index_of(p, "int4/f32"));
    const ProfileCell* other = p.cell(l, index_of(p, "int2/f32"));
    EXPECT_FALSE(other->metrics.dkl_measured);
    EXPECT_NEAR(other->metrics.dkl / other->metrics.o_mse,
                anchor->metrics.dkl / anchor->metrics.o_mse,
                1e-9 * anchor->metrics.dkl / anchor->metrics.o_mse);
  }
  const ModelCheck additivity = additivity_check(p);
  EXPECT_EQ(additivity.cells, p.n_layers());
  std::printf("stories260K additivity KV4 vs K4 + V4: mean %.1f %%, worst %.1f %% (layer %d)\n",
              100 * additivity.mean_abs_rel_error, 100 * additivity.max_abs_rel_error,
              additivity.worst_layer);
  EXPECT_LT(additivity.mean_abs_rel_error, 0.5);

  // The estimate against a re-run for every side: same order, and printed accuracy.
  ProfileOptions all = options();
  all.all_dkl = true;
  const Profile q = run(all);
  double worst = 0;
  for (int l = 0; l < q.n_layers(); ++l) {
    for (const char* name : {"int8/f32", "int2/f32", "f32/int8", "f32/int2"}) {
      const double est = p.cell(l, index_of(p, name))->metrics.dkl;
      const double real = q.cell(l, index_of(q, name))->metrics.dkl;
      worst = std::max(worst, std::fabs(std::log(est / real)));
    }
    EXPECT_GT(q.cell(l, index_of(q, "int2/f32"))->metrics.dkl,
              q.cell(l, index_of(q, "int4/f32"))->metrics.dkl);
  }
  std::printf(
      "stories260K dKL estimated from o_mse vs re-run (int8, int2 sides): worst factor %.2f\n",
      std::exp(worst));
}

TEST_F(StoriesProfile, RerunAndThreadCountGiveIdenticalBytes) {
  ProfileOptions o = options();
  o.threads = 2;
  const Profile a = run(o);
  o.threads = 1;
  const Profile b = run(o);
  EXPECT_EQ(without_timings(a), without_timings(b));
  EXPECT_EQ(text_before_timings(profile_text(a)), text_before_timings(profile_text(b)));
}

TEST_F(StoriesProfile, LosslessPairGivesExactZeros) {
  // f32 packs losslessly, so re-running from a captured layer must reproduce the reference logits
  // bit for bit and every metric is exactly 0.
  ProfileOptions o = options();
  o.candidates = parse_candidates("f32/f32,KV8");
  const Profile p = run(o);
  for (int l = 0; l < 5; ++l) {
    const ProfileCell* c = p.cell(l, 0);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->metrics.e_k, 0.0);
    EXPECT_EQ(c->metrics.e_v, 0.0);
    EXPECT_EQ(c->metrics.e_a, 0.0);
    EXPECT_EQ(c->metrics.e_o, 0.0);
    EXPECT_EQ(c->metrics.dkl, 0.0) << "layer " << l;
    EXPECT_GT(p.cell(l, 1)->metrics.dkl, 0.0);
  }
}

TEST_F(StoriesProfile, ThreeShardsMergeToTheUnshardedBytes) {
  const Profile whole = run(options());
  const auto dir = std::filesystem::temp_directory_path() / "kvplan_profile_shards";
  std::filesystem::create_directories(dir);
  std::vector<Profile> shards;
  std::vector<std::string> names;
  for (int i = 0; i < 3; ++i) {
    ProfileOptions o = options();
    o.shard_index = i;
    o.shard_count = 3;
    const Profile s = run(o);
    EXPECT_FALSE(s.complete());
    const auto path = dir / ("shard" + std::to_string(i) + ".json");
    write_profile(path, s);
    shards.push_back(read_profile(path));  // through the file, as a scheduler would
    names.push_back(path.string());
  }
  // Shards hold disjoint cells that cover the profile.
  size_t present = 0;
  for (const Profile& s : shards) present += s.n_present();
  EXPECT_EQ(present, whole.n_cells());
  const Profile merged = merge_profiles(shards, names);
  EXPECT_EQ(without_timings(merged), without_timings(whole));
  EXPECT_EQ(text_before_timings(profile_text(merged)), text_before_timings(profile_text(whole)));

  // Refusals: a missing shard, a shard given twice, a shard of another model or settings.
  EXPECT_THROW(merge_profiles({shards[0], shards[1]}, {names[0], names[1]}), Error);
  EXPECT_THROW(merge_profiles({shards[0], shards[0]}, {names[0], names[0]}), Error);
  Profile other = shards[2];
  other.model.fingerprint = "0123456789abcdef";
  try {
    (void)merge_profiles({shards[0], shards[1], other}, names);
    ADD_FAILURE() << "merged a shard of another model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.fingerprint"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("shard2.json"), std::string::npos) << e.what();
  }
  other = shards[2];
  other.quantization.group_size = 16;
  try {
    (void)merge_profiles({shards[0], shards[1], other}, names);
    ADD_FAILURE() << "merged a shard with other settings";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("quantization.group_size"), std::string::npos) << e.what();
  }
  // A shard whose attention metrics ran on a GPU (as read back from its file) does not mix with
  // CPU shards: its probabilities differ in rounding.
  EXPECT_EQ(shards[0].attention_device, "cpu");
  nlohmann::json gpu_shard = nlohmann::json::parse(profile_text(shards[2]));
  gpu_shard["attention_device"] = "gpu";
  other = profile_from_text(gpu_shard.dump(), names[2]);
  try {
    (void)merge_profiles({shards[0], shards[1], other}, names);
    ADD_FAILURE() << "merged a GPU shard with CPU shards";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention_device: cpu vs gpu"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

TEST_F(StoriesProfile, ResumeComputesOnlyMissingCellsAndMatches) {
  const Profile whole = run(options());
  ProfileOptions o = options();
  o.layers = {1, 3};
  const Profile partial = run(o);
  EXPECT_EQ(partial.n_present(), 2 * partial.candidates.size());
  int checkpoints = 0;
  o.layers.clear();
  o.resume = &partial;
  o.checkpoint = [&](const Profile&) { ++checkpoints; };
  const Profile resumed = run(o);
  EXPECT_EQ(checkpoints, 3);  // layers 0, 2, 4 only
  EXPECT_EQ(resumed.timings.cells_computed, static_cast<int64_t>(3 * resumed.candidates.size()));
  EXPECT_EQ(without_timings(resumed), without_timings(whole));

  ProfileOptions bad = options();
  bad.settings.group_size = 4;
  bad.resume = &partial;
  try {
    (void)run(bad);
    ADD_FAILURE() << "resumed a profile with other settings";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("quantization.group_size"), std::string::npos) << e.what();
  }
}

TEST_F(StoriesProfile, KiviModeAndGgmlCandidates) {
  ProfileOptions o = options();
  o.settings.mode = QuantMode::kKivi;
  o.settings.group_size = 16;
  o.settings.residual_length = 16;
  o.candidates = parse_candidates("KV8,KV4,KV2,K2V8,K8V2");
  const Profile p = run(o);
  (void)check_monotonic_and_ratio(p, "2");
  // q4_0 needs rows of 32 values; stories260K's head_dim is 8: refused naming layer and format.
  o = options();
  o.candidates = parse_candidates("q8_0/q4_0");
  try {
    (void)run(o);
    ADD_FAILURE() << "accepted q4_0 on head_dim 8";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 0"), std::string::npos) << e.what();
  }
}

TEST_F(StoriesProfile, BadOptionsAreRefused) {
  ProfileOptions o = options();
  o.shard_index = 3;
  o.shard_count = 3;
  EXPECT_THROW(run(o), Error);
  o = options();
  o.layers = {7};
  EXPECT_THROW(run(o), Error);
}

TEST(ProfilerSmolLM2, MonotonicAndKeysMoreSensitiveOnSampledLayers) {
  const auto path = test::smollm2_path();
  KVPLAN_NEED_FILE(path, "run scripts/models/fetch-smollm2.sh (or set KVPLAN_CACHE)");
  const auto m = load(path);
  const CalibrationSet cal = load_calibration(kDefaultSet, *m->tokenizer, m->weights.config,
                                              {.max_tokens = 48, .num_prompts = 4});
  ProfileOptions o;
  o.candidates = parse_candidates("KV8,KV4,KV2,K4V8,K8V4,K2V8,K8V2");
  o.layers = {0, 14, 29};
  o.kl_prompts = 4;
  const Profile p = run_profile(*m->model, cal, o);
  EXPECT_EQ(p.n_present(), 3 * o.candidates.size());
  const double r4 = check_monotonic_and_ratio(p, "4");
  const double r2 = check_monotonic_and_ratio(p, "2");
  std::printf("SmolLM2 layers 0/14/29 key/value dKL ratio: K4V8/K8V4 %.2f, K2V8/K8V2 %.2f\n", r4,
              r2);
  EXPECT_GT(r4, 1.0);
  EXPECT_GT(r2, 1.0);
  // A rerun on another thread count gives the same bytes (cheap: the last layer only).
  o.layers = {29};
  o.threads = 2;
  const Profile a = run_profile(*m->model, cal, o);
  o.threads = 1;
  const Profile b = run_profile(*m->model, cal, o);
  EXPECT_EQ(without_timings(a), without_timings(b));
  EXPECT_EQ(a.cell(29, 0)->metrics.dkl, p.cell(29, 0)->metrics.dkl);
}

}  // namespace
}  // namespace kvplan

namespace kvplan {
namespace {

TEST(ProfilerForward, RerunFromCapturedLayerReproducesTheLogits) {
  const auto path = test::models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(path, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  const auto m = load(path);
  const std::vector<int32_t> ids = m->tokenizer->encode("Once upon a time there was a cat who", {});
  KvCache cache(m->weights.config, KvCacheOptions::exact_kv());
  ForwardCapture cap;
  const RowMatrix logits = m->model->forward(ids, cache, &cap);
  const Eigen::Index T = logits.rows(), half = T / 2;
  for (int l = 0; l < m->weights.config.n_layers; ++l) {
    KvCache fresh(m->weights.config, KvCacheOptions::exact_kv());
    const RowMatrix again = m->model->forward_from_layer(l, cap.layer_input[l], fresh);
    EXPECT_EQ((again - logits).cwiseAbs().maxCoeff(), 0.0f) << "layer " << l;
    KvCache fresh2(m->weights.config, KvCacheOptions::exact_kv());
    const RowMatrix tail = m->model->forward_from_layer(l, cap.layer_input[l], fresh2, nullptr,
                                                        {.logits_from_row = size_t(half)});
    ASSERT_EQ(tail.rows(), T - half);
    EXPECT_EQ((tail - logits.bottomRows(T - half)).cwiseAbs().maxCoeff(), 0.0f) << "layer " << l;
    // Exactly the fewest rows a product keeps the bits of (kMinRowsForSameBits).
    KvCache fresh3(m->weights.config, KvCacheOptions::exact_kv());
    const auto fewest = static_cast<Eigen::Index>(kMinRowsForSameBits);
    ASSERT_GT(T - fewest, half);
    const RowMatrix last = m->model->forward_from_layer(l, cap.layer_input[l], fresh3, nullptr,
                                                        {.logits_from_row = size_t(T - fewest)});
    EXPECT_EQ((last - logits.bottomRows(fewest)).cwiseAbs().maxCoeff(), 0.0f) << "layer " << l;
  }
}

// A layer's cells re-run the model together (one batch of every cell's dKL prompts): each cell's
// dKL must be the bits it gets re-run alone.
TEST_F(StoriesProfile, CellsReRunTogetherGetTheDklEachGetsAlone) {
  ProfileOptions o = options();
  const std::vector<KvPair> pairs = {KvPair::parse("int4/f32"), KvPair::parse("f32/int2"),
                                     KvPair::parse("int8/int4")};
  o.candidates = pairs;
  const Profile together = run(o);
  ASSERT_TRUE(together.complete());
  for (size_t i = 0; i < pairs.size(); ++i) {
    o.candidates = {pairs[i]};
    const Profile alone = run(o);
    for (int l = 0; l < together.n_layers(); ++l) {
      EXPECT_GT(alone.cell(l, 0)->metrics.dkl, 0.0) << pairs[i].name() << " layer " << l;
      EXPECT_EQ(together.cell(l, i)->metrics.dkl, alone.cell(l, 0)->metrics.dkl)
          << pairs[i].name() << " layer " << l;
    }
  }
}

TEST_F(StoriesProfile, Fp8CellsAreMeasuredWithPerHeadScalesFromTheCalibrationMaxima) {
  ProfileOptions o = options();
  o.candidates = {KvPair::parse("fp8_e4m3/f32"), KvPair::parse("f32/fp8_e5m2")};
  const Profile p = run(o);
  const ModelConfig& c = model_->weights.config;
  // Maxima recomputed from plain forward passes over the same prompts (serial GEMMs, as the
  // profiler runs them, so the captures are bit-identical).
  const SerialEigenScope serial;
  std::vector<KvHeadAbsmax> expected(static_cast<size_t>(c.n_layers));
  std::vector<ForwardCapture> captures;
  for (const std::vector<int32_t>& prompt : calibration_->prompts) {
    KvCache cache(c, KvCacheOptions::exact_kv());
    ForwardCapture cap;
    (void)model_->model->forward(prompt, cache, &cap);
    for (size_t l = 0; l < expected.size(); ++l) {
      const int heads = c.n_kv_heads[l];
      expected[l].key.resize(static_cast<size_t>(heads), 0.0f);
      expected[l].value.resize(static_cast<size_t>(heads), 0.0f);
      for (int h = 0; h < heads; ++h) {
        for (Eigen::Index t = 0; t < cap.k[l].rows(); ++t) {
          for (int d = 0; d < c.head_dim; ++d) {
            const Eigen::Index col = static_cast<Eigen::Index>(h) * c.head_dim + d;
            float& km = expected[l].key[static_cast<size_t>(h)];
            float& vm = expected[l].value[static_cast<size_t>(h)];
            km = std::max(km, std::fabs(cap.k[l](t, col)));
            vm = std::max(vm, std::fabs(cap.v[l](t, col)));
          }
        }
      }
    }
    captures.push_back(std::move(cap));
  }
  ASSERT_EQ(p.kv_absmax, expected);
  EXPECT_EQ(profile_from_text(profile_text(p), "p.json").kv_absmax, expected);

  // e_k of the e4m3 key cell is the one the calibrated scales give, not the scale-1 one.
  const size_t cand = index_of(p, "fp8_e4m3/f32");
  for (int l = 0; l < c.n_layers; ++l) {
    const size_t L = static_cast<size_t>(l);
    const int heads = c.n_kv_heads[L];
    const std::vector<float> scales = fp8_head_scales(Format::parse("fp8_e4m3"), expected[L].key);
    MetricSum calibrated, unscaled;
    for (const ForwardCapture& cap : captures) {
      const RowMatrix with = kv_roundtrip(cap.k[L], KvSide::kKey, Format::parse("fp8_e4m3"),
                                          o.settings, l, heads, c.head_dim, scales);
      const RowMatrix without = kv_roundtrip(cap.k[L], KvSide::kKey, Format::parse("fp8_e4m3"),
                                             o.settings, l, heads, c.head_dim);
      for (int h = 0; h < heads; ++h) {
        const Eigen::Index col = static_cast<Eigen::Index>(h) * c.head_dim;
        const RowMatrix exact = cap.k[L].middleCols(col, c.head_dim);
        calibrated.add(relative_row_error(exact, with.middleCols(col, c.head_dim)));
        unscaled.add(relative_row_error(exact, without.middleCols(col, c.head_dim)));
      }
    }
    EXPECT_NEAR(p.cell(l, cand)->metrics.e_k, calibrated.mean(), 1e-12 * calibrated.mean());
    EXPECT_NE(calibrated.mean(), unscaled.mean()) << "layer " << l;
  }
}

}  // namespace
}  // namespace kvplan
