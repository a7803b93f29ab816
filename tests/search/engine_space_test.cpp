#include "search/engine_space.h"

#include <cmath>
#include <limits>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "core/error.h"
#include "search/exact_front.h"
#include "search/nsga2_search.h"

namespace kvplan::search {
namespace {

// A head_dim neither llama.cpp nor ik_llama.cpp rotates at (not a multiple of 64, not a power of
// two), for the tests of layer structure.
constexpr int kNoRotation = 96;

// Every key x value pair of `formats`, with errors key_scale[l] * 2^-bits for keys and
// value_scale[l] * 2^-bits for values; 16 B per side-bit (2 heads of 64 values).
std::vector<LayerCandidates> side_scaled_layers(const std::vector<double>& key_scale,
                                                const std::vector<double>& value_scale,
                                                const std::vector<const char*>& formats) {
  std::vector<LayerCandidates> layers;
  for (size_t l = 0; l < key_scale.size(); ++l) {
    LayerCandidates lc{static_cast<int>(l), {}};
    for (const char* k : formats) {
      for (const char* v : formats) {
        const KvPair p{Format::parse(k), Format::parse(v)};
        const double kb = p.key.nominal_bits(64), vb = p.value.nominal_bits(64);
        lc.candidates.push_back({p, (kb + vb) / 2, 16 * (kb + vb),
                                 key_scale[l] * std::exp2(-kb) + value_scale[l] * std::exp2(-vb)});
      }
    }
    layers.push_back(std::move(lc));
  }
  return layers;
}

// A few formats of several engines; errors fall as bits rise, keys weigh three times more than
// values, and each layer has its own sensitivity.
std::vector<LayerCandidates> catalogue_layers(const std::vector<double>& sensitivity,
                                              const std::vector<const char*>& formats = {
                                                  "f16", "q8_0", "q4_0", "fp8_e4m3", "nvfp4",
                                                  "int4", "int8", "tq_fp8", "tq_mse4", "tq_mse3",
                                                  "tq_int4", "tq_int3"}) {
  std::vector<double> keys;
  for (const double s : sensitivity) keys.push_back(3 * s);
  return side_scaled_layers(keys, sensitivity, formats);
}

double bytes_of(const KvPair& p) {
  return 2 * 64 * (p.key.nominal_bits(64) + p.value.nominal_bits(64)) / 8;
}

// Whatever the engine, every choice the search can make is a pair the engine stores.
TEST(EngineSpace, EveryChoiceIsAPairTheEngineStores) {
  const auto layers = catalogue_layers({1, 2, 0.5, 1, 3, 1});
  for (const EngineSpec& engine : all_engines()) {
    if (!engine.not_packed.empty()) continue;
    const EngineSpace s =
        engine_search_space(layers, engine, kNoRotation, MemoryMeasure::kBytes, 6 * 1000.0);
    for (const LayerGroup& g : s.space.groups) {
      ASSERT_FALSE(g.choices.empty()) << engine.name;
      for (const KvPair& p : g.choices) {
        EXPECT_TRUE(engine_stores(engine, p, kNoRotation)) << engine.name << " " << p.name();
        if (engine.one_dtype_per_layer) {
          EXPECT_EQ(p.key, p.value) << engine.name;
        }
        if (engine.id == EngineId::kHf) {
          EXPECT_NE(p.key.family(), FormatFamily::kPlain);
        }
        if (!engine.presets.empty() && !is_model_dtype(p.key)) {
          EXPECT_NE(engine_preset(engine, p), nullptr) << engine.name << " " << p.name();
        }
      }
    }
  }
}

TEST(EngineSpace, LlamaCppIsOneGroupOfEveryLayer) {
  const auto layers = catalogue_layers({1, 2, 0.5, 1});
  const EngineSpace s = engine_search_space(layers, engine_spec(EngineId::kLlamaCpp), kNoRotation,
                                            MemoryMeasure::kBytes, 4 * 400.0);
  ASSERT_EQ(s.space.groups.size(), 1u);
  EXPECT_EQ(s.space.groups[0].layers, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_FALSE(s.may_cluster);
  // q8_0/q8_0, q4_0/q4_0 and the like: llama.cpp's K and V types are independent.
  std::set<std::string> names;
  for (const KvPair& p : s.space.groups[0].choices) names.insert(p.name());
  EXPECT_TRUE(names.contains("q8_0/q4_0"));
  EXPECT_FALSE(names.contains("fp8_e4m3/fp8_e4m3"));
}

// The first and the last layer are far more sensitive: at a budget between uniform q4_0 and
// uniform q8_0, ik_llama.cpp's best structure keeps them apart, for keys and for values.
TEST(EngineSpace, IkLlamaCppSetsTheSensitiveFirstAndLastLayersApart) {
  const auto layers = catalogue_layers({40, 1, 1, 1, 1, 1, 1, 40});
  const double q4 = bytes_of(KvPair::parse("q4_0/q4_0")), q8 = bytes_of(KvPair::parse("q8_0/q8_0"));
  const EngineSpace s = engine_search_space(layers, engine_spec(EngineId::kIkLlamaCpp), kNoRotation,
                                            MemoryMeasure::kBytes, 6 * q4 + 2 * q8);
  ASSERT_EQ(s.space.groups.size(), 6u) << s.structure;
  for (size_t g = 0; g < 6; ++g) {
    EXPECT_EQ(s.space.groups[g].side, g < 3 ? GroupSide::kKeys : GroupSide::kValues);
    EXPECT_EQ(s.space.groups[g].layers,
              (std::vector<std::vector<int>>{{0}, {1, 2, 3, 4, 5, 6}, {7}})[g % 3]);
  }
  EXPECT_EQ(s.structure,
            "keys and values each: first 1 (layers 0), layers 1-6 alike, last 1 (layers 7)");
  // Every N and M with N + M <= 8, for keys and for values.
  EXPECT_EQ(s.structures_priced, 45u * 45u);
  EXPECT_FALSE(s.may_cluster);
}

namespace {

Assignment best_within_budget(const SearchSpace& space) {
  const ExactFront f = exact_front(space, SearchTable::build(space));
  EXPECT_FALSE(f.points.empty());
  return f.points.back();
}

}  // namespace

// Keys matter on the first two and the last two layers, values on the first and the last:
// ik_llama.cpp takes -ctk-first/-ctk-last q8_0,2 and -ctv-first/-ctv-last q8_0,1 apart. A
// structure shared by K and V has two cuts where these need four, so it either gives values 8 bits
// on layers 1 and 6 too or leaves a sensitive side at 4 bits.
TEST(EngineSpace, IkLlamaCppSetsKeysAndValuesApartWhereEachSideNeedsIt) {
  const std::vector<double> keys{400, 400, 1, 1, 1, 1, 400, 400},
      values{400, 1, 1, 1, 1, 1, 1, 400};
  const auto layers = side_scaled_layers(keys, values, {"q8_0", "q4_0"});
  // Uniform q4_0 (4 nominal bits a side), and 4 more bits for the six sensitive sides.
  const double budget = 8 * 16 * 8.0 + 6 * 16 * 4.0;
  const EngineSpace s = engine_search_space(layers, engine_spec(EngineId::kIkLlamaCpp), kNoRotation,
                                            MemoryMeasure::kBytes, budget);
  EXPECT_EQ(s.structure,
            "keys: first 2 (layers 0-1), layers 2-5 alike, last 2 (layers 6-7); values: first 1 "
            "(layers 0), layers 1-6 alike, last 1 (layers 7)");
  const Assignment best = best_within_budget(s.space);
  std::vector<std::string> pairs;
  for (const KvPair& p : best.pairs) pairs.push_back(p.name());
  EXPECT_EQ(pairs, (std::vector<std::string>{"q8_0/q8_0", "q8_0/q4_0", "q4_0/q4_0", "q4_0/q4_0",
                                             "q4_0/q4_0", "q4_0/q4_0", "q8_0/q4_0", "q8_0/q8_0"}));
  EXPECT_DOUBLE_EQ(best.memory, budget);
  EXPECT_DOUBLE_EQ(best.predicted_error, best_error_within_budget(s.space));
  EXPECT_NEAR(best.predicted_error, 6 * 400.0 / 256 + 4 * 1.0 / 16 + 6 * 1.0 / 16, 1e-12);

  // The same candidates as joint pairs (one pair off its sides' sum by 1e-6): K and V then share
  // N and M, and the best within the budget is far worse.
  auto joint = layers;
  joint[3].candidates[0].error += 1e-6;
  const EngineSpace shared = engine_search_space(joint, engine_spec(EngineId::kIkLlamaCpp),
                                                 kNoRotation, MemoryMeasure::kBytes, budget);
  EXPECT_NE(shared.structure.find("the same N and M for keys and values"), std::string::npos)
      << shared.structure;
  EXPECT_GT(best_error_within_budget(shared.space), 3 * best.predicted_error);

  // NSGA-II searches the split space too: each of its plans is one the structure allows.
  const SearchResult nsga = nsga2_front(s.space, {.population = 16, .generations = 20});
  ASSERT_FALSE(nsga.front.empty());
  for (const Assignment& a : nsga.front) {
    EXPECT_TRUE(a.feasible);
    for (const LayerGroup& g : s.space.groups) {
      for (const int l : g.layers) {
        const KvPair& first = a.pairs[static_cast<size_t>(g.layers.front())];
        const KvPair& p = a.pairs[static_cast<size_t>(l)];
        EXPECT_EQ(g.side == GroupSide::kKeys ? p.key : p.value,
                  g.side == GroupSide::kKeys ? first.key : first.value);
      }
    }
  }
}

// At the least memory every structure holds the same plan, its error summed in other orders: the
// simplest structure is the one named, not one that wins by rounding.
TEST(EngineSpace, IkLlamaCppNamesTheSimplestStructureAmongEqualPlans) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> scale(0.1, 3.0);
  std::vector<double> keys(30), values(30);
  for (size_t l = 0; l < 30; ++l) keys[l] = scale(rng), values[l] = scale(rng);
  const auto layers = side_scaled_layers(keys, values, {"q8_0", "q4_0"});
  const EngineSpace s = engine_search_space(layers, engine_spec(EngineId::kIkLlamaCpp), kNoRotation,
                                            MemoryMeasure::kBytes, 30 * 16 * 8.0);
  EXPECT_EQ(s.structure, "keys and values each: layers 0-29 alike");
  EXPECT_EQ(s.space.groups.size(), 2u);
}

// On small random instances, the split search's best within the budget is the least error over
// every key structure x value structure x type per segment, found by brute force.
TEST(EngineSpace, IkLlamaCppSplitStructuresMatchBruteForce) {
  const std::vector<const char*> formats{"q8_0", "q5_0", "q4_0"};
  std::vector<double> side_bits;
  for (const char* f : formats) side_bits.push_back(Format::parse(f).nominal_bits(64));
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> scale(0.1, 30.0);
  for (int trial = 0; trial < 6; ++trial) {
    const size_t n = 5;
    std::vector<double> keys(n), values(n);
    for (size_t l = 0; l < n; ++l) keys[l] = scale(rng), values[l] = scale(rng);
    const auto layers = side_scaled_layers(keys, values, formats);
    const double budget = 16 * (n * 9.0 + 3 + 2 * trial);
    // One side: the least error of every (first, last) and type per segment, by its memory.
    const auto side_points = [&](const std::vector<double>& sc) {
      std::vector<std::pair<double, double>> points;  // (memory, error)
      for (size_t first = 0; first <= n; ++first) {
        for (size_t last = 0; first + last <= n; ++last) {
          for (size_t a = 0; a < 3; ++a) {
            for (size_t b = 0; b < 3; ++b) {
              for (size_t c = 0; c < 3; ++c) {
                double memory = 0, error = 0;
                for (size_t l = 0; l < n; ++l) {
                  const size_t f = l < first ? a : l >= n - last ? c : b;
                  memory += 16 * side_bits[f];
                  error += sc[l] * std::exp2(-side_bits[f]);
                }
                points.emplace_back(memory, error);
              }
            }
          }
        }
      }
      return points;
    };
    double brute = std::numeric_limits<double>::infinity();
    for (const auto& [km, ke] : side_points(keys)) {
      for (const auto& [vm, ve] : side_points(values)) {
        if (km + vm <= budget * (1 + 1e-12)) brute = std::min(brute, ke + ve);
      }
    }
    const EngineSpace s = engine_search_space(layers, engine_spec(EngineId::kIkLlamaCpp),
                                              kNoRotation, MemoryMeasure::kBytes, budget);
    EXPECT_NEAR(best_error_within_budget(s.space), brute, 1e-12 * brute)
        << trial << " " << s.structure;
  }
}

// vLLM: one quantized dtype for every layer that is quantized, the others at the model's dtype.
TEST(EngineSpace, VllmTakesOneQuantizedDtypeAndTheModelsDtype) {
  const auto layers = catalogue_layers({1, 8, 1, 1});
  const double f16 = bytes_of(KvPair::parse("f16/f16")),
               fp8 = bytes_of(KvPair::parse("fp8_e4m3/fp8_e4m3"));
  const EngineSpace s = engine_search_space(layers, engine_spec(EngineId::kVllm), kNoRotation,
                                            MemoryMeasure::kBytes, 3 * fp8 + f16);
  std::set<std::string> quantized;
  for (const LayerGroup& g : s.space.groups) {
    for (const KvPair& p : g.choices) {
      if (p.key.family() != FormatFamily::kPlain) quantized.insert(p.name());
    }
  }
  EXPECT_EQ(quantized.size(), 1u) << s.structure;
  EXPECT_EQ(s.structures_priced, 2u);  // fp8_e4m3 and nvfp4
}

TEST(EngineSpace, AProfileWithoutTheEnginesFormatsIsRefusedNamingThem) {
  std::vector<LayerCandidates> layers = {{0, {{KvPair::parse("KV4"), 4, 64, 1.0}}}};
  try {
    (void)engine_search_space(layers, engine_spec(EngineId::kVllm), kNoRotation,
                              MemoryMeasure::kBytes, 1e9);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    const std::string what = e.what();
    EXPECT_NE(what.find("layer 0"), std::string::npos) << what;
    EXPECT_NE(what.find("--formats f16,bf16,fp8_e4m3"), std::string::npos) << what;
  }
  try {
    (void)engine_search_space(layers, engine_spec(EngineId::kVllmTurboquant), kNoRotation,
                              MemoryMeasure::kBytes, 1e9);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    const std::string what = e.what();
    EXPECT_NE(what.find("as its K/V presets"), std::string::npos) << what;
    EXPECT_NE(what.find("--formats f16,bf16,tq_fp8,tq_mse3,tq_mse4,tq_int3,tq_int4"),
              std::string::npos)
        << what;
  }
}

// vLLM TurboQuant: one preset K/V pair for every quantized layer; the first and last two layers
// at the model's dtype whatever the budget.
TEST(EngineSpace, TurboquantTakesOnePresetAndKeepsItsBoundaryLayers) {
  const auto layers = catalogue_layers({1, 1, 4, 1, 1, 1, 1, 1});
  const EngineSpec& tq = engine_spec(EngineId::kVllmTurboquant);
  const double f16 = bytes_of(KvPair::parse("f16/f16"));
  const EngineSpace s =
      engine_search_space(layers, tq, kNoRotation, MemoryMeasure::kBytes, 5 * f16);
  EXPECT_EQ(s.structures_priced, 4u) << s.structure;  // the four presets
  EXPECT_NE(s.structure.find("one preset, turboquant_"), std::string::npos) << s.structure;
  EXPECT_NE(s.structure.find("layers 0, 1, 6, 7 at the model's dtype"), std::string::npos)
      << s.structure;
  std::set<std::string> quantized;
  for (const LayerGroup& g : s.space.groups) {
    for (const KvPair& p : g.choices) {
      if (is_model_dtype(p.key)) continue;
      quantized.insert(p.name());
      for (int l : g.layers) EXPECT_TRUE(l >= 2 && l <= 5) << p.name() << " on layer " << l;
    }
  }
  EXPECT_EQ(quantized.size(), 1u) << s.structure;
  // A budget below the boundary layers' own bytes: nothing fits, and the structure offered is the
  // one that takes the least (3bit_nc), so the budget error names the least TurboQuant can take.
  const EngineSpace none =
      engine_search_space(layers, tq, kNoRotation, MemoryMeasure::kBytes, 3.9 * f16);
  EXPECT_TRUE(std::isinf(best_error_within_budget(none.space)));
  EXPECT_NE(none.structure.find("turboquant_3bit_nc"), std::string::npos) << none.structure;
}

// llama.cpp at head_dim 64 rotates every quantized side by default (PR #21038), or nothing under
// LLAMA_ATTN_ROT_DISABLE: each search space holds one of the two, never a rotated side beside an
// unrotated quantized one, and the better within the budget is taken.
TEST(EngineSpace, LlamaCppSearchesItsRotatedDefaultAndItsUnrotatedSettingApart) {
  const std::vector<const char*> formats{"f16",      "q8_0",     "q4_0",       "q4_1",
                                         "q8_0_had", "q4_0_had", "q4_0_had64", "q8_0_had64"};
  // Rotation halves the error of q4_0 here (its nominal bits are the same: 4.5).
  auto layers = catalogue_layers({1, 2, 0.5, 1}, formats);
  const auto rotated = [](const Format& f) { return engine_cache_type(f) != f; };
  for (LayerCandidates& l : layers) {
    for (LayerCandidate& c : l.candidates) {
      if (rotated(c.pair.key)) c.error *= 0.5;
      if (rotated(c.pair.value)) c.error *= 0.5;
    }
  }
  const double q4 = bytes_of(KvPair::parse("q4_0/q4_0"));
  const EngineSpec& llama = engine_spec(EngineId::kLlamaCpp);
  const EngineSpace s = engine_search_space(layers, llama, 64, MemoryMeasure::kBytes, 4 * q4);
  EXPECT_EQ(s.rotation, (RotationSetting{true, true, false})) << s.structure;
  EXPECT_NE(s.structure.find("llama.cpp's default"), std::string::npos) << s.structure;
  EXPECT_EQ(s.structures_priced, 2u);
  for (const KvPair& p : s.space.groups.at(0).choices) {
    for (const Format& f : {p.key, p.value})
      EXPECT_TRUE(rotated(f) || f.family() == FormatFamily::kPlain) << p.name();
  }
  // Unrotated is better: the other setting, named with its environment variable.
  for (LayerCandidates& l : layers) {
    for (LayerCandidate& c : l.candidates) {
      if (rotated(c.pair.key)) c.error *= 8;
      if (rotated(c.pair.value)) c.error *= 8;
    }
  }
  const EngineSpace plain = engine_search_space(layers, llama, 64, MemoryMeasure::kBytes, 4 * q4);
  EXPECT_TRUE(plain.rotation.disabled_by_environment) << plain.structure;
  EXPECT_NE(plain.structure.find("LLAMA_ATTN_ROT_DISABLE=1"), std::string::npos);
  for (const KvPair& p : plain.space.groups.at(0).choices)
    EXPECT_FALSE(rotated(p.key) || rotated(p.value)) << p.name();
  // At head_dim 64 a span of 64 is the row: the pairs are named with the whole-row formats.
  for (const KvPair& p : s.space.groups.at(0).choices) {
    EXPECT_EQ(p.key.info().rotation_span(), 0) << p.name();
    EXPECT_EQ(p.value.info().rotation_span(), 0) << p.name();
  }
  // head_dim 128: keys rotated whole, values in spans of 64 (*_had64).
  for (LayerCandidates& l : layers) {
    for (LayerCandidate& c : l.candidates) {
      if (rotated(c.pair.key)) c.error /= 8;
      if (rotated(c.pair.value)) c.error /= 8;
    }
  }
  const EngineSpace wide = engine_search_space(layers, llama, 128, MemoryMeasure::kBytes, 4 * q4);
  EXPECT_EQ(wide.rotation, (RotationSetting{true, true, false})) << wide.structure;
  bool quantized_values = false;
  for (const KvPair& p : wide.space.groups.at(0).choices) {
    if (rotated(p.key)) {
      EXPECT_EQ(p.key.info().rotation_span(), 0) << p.name();
    }
    if (rotated(p.value)) {
      EXPECT_EQ(p.value.info().rotation_span(), 64) << p.name();
    }
    EXPECT_TRUE(rotated(p.value) || p.value.family() == FormatFamily::kPlain) << p.name();
    quantized_values = quantized_values || rotated(p.value);
  }
  EXPECT_TRUE(quantized_values);
}

// ik_llama.cpp rotates keys and values on switches of their own: keys that gain from rotation
// take -khad while values that lose by it stay unrotated.
TEST(EngineSpace, IkLlamaCppRotatesEachSideWhereItPays) {
  auto layers = side_scaled_layers({4, 4, 4, 4}, {1, 1, 1, 1}, {"q8_0", "q4_0", "q4_0_had"});
  for (LayerCandidates& l : layers) {
    for (LayerCandidate& c : l.candidates) {
      if (c.pair.key.id() == FormatId::kQ4_0Had) c.error -= 4 * std::exp2(-4.5) * 0.6;
      if (c.pair.value.id() == FormatId::kQ4_0Had) c.error += std::exp2(-4.5) * 0.6;
    }
  }
  const double q4 = bytes_of(KvPair::parse("q4_0/q4_0"));
  const EngineSpace s = engine_search_space(layers, engine_spec(EngineId::kIkLlamaCpp), 64,
                                            MemoryMeasure::kBytes, 4 * q4);
  EXPECT_EQ(s.rotation, (RotationSetting{true, false, false})) << s.structure;
  EXPECT_NE(s.structure.find("; -khad"), std::string::npos) << s.structure;
  EXPECT_EQ(s.structures_priced, 4u * 15u * 15u);  // 4 settings, N + M <= 4 for each side
  const Assignment best = best_within_budget(s.space);
  for (const KvPair& p : best.pairs) EXPECT_EQ(p.name(), "q4_0_had/q4_0");
}

}  // namespace
}  // namespace kvplan::search
