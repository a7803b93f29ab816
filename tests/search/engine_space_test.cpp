#include "search/engine_space.h"

#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan::search {
namespace {

// Every key x value pair of a few formats of several engines; errors fall as bits rise, keys weigh
// three times more than values, and each layer has its own sensitivity.
std::vector<LayerCandidates> catalogue_layers(const std::vector<double>& sensitivity,
                                              const std::vector<const char*>& formats = {
                                                  "f16", "q8_0", "q4_0", "fp8_e4m3", "nvfp4",
                                                  "int4", "int8", "tq_fp8", "tq_mse4", "tq_mse3",
                                                  "tq_int4", "tq_int3"}) {
  std::vector<LayerCandidates> layers;
  for (size_t l = 0; l < sensitivity.size(); ++l) {
    LayerCandidates lc{static_cast<int>(l), {}};
    for (const char* k : formats) {
      for (const char* v : formats) {
        const KvPair p{Format::parse(k), Format::parse(v)};
        const double kb = p.key.nominal_bits(64), vb = p.value.nominal_bits(64);
        const double err = sensitivity[l] * (3 * std::exp2(-kb) + std::exp2(-vb));
        lc.candidates.push_back({p, (kb + vb) / 2, 2 * 64 * (kb + vb) / 8, err});
      }
    }
    layers.push_back(std::move(lc));
  }
  return layers;
}

double bytes_of(const KvPair& p) {
  return 2 * 64 * (p.key.nominal_bits(64) + p.value.nominal_bits(64)) / 8;
}

// Whatever the engine, every choice the search can make is a pair the engine stores.
TEST(EngineSpace, EveryChoiceIsAPairTheEngineStores) {
  const auto layers = catalogue_layers({1, 2, 0.5, 1, 3, 1});
  for (const EngineSpec& engine : all_engines()) {
    if (!engine.not_packed.empty()) continue;
    const EngineSpace s = engine_search_space(layers, engine, MemoryMeasure::kBytes, 6 * 1000.0);
    for (const LayerGroup& g : s.space.groups) {
      ASSERT_FALSE(g.choices.empty()) << engine.name;
      for (const KvPair& p : g.choices) {
        EXPECT_TRUE(engine_stores(engine, p)) << engine.name << " " << p.name();
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
  const EngineSpace s = engine_search_space(layers, engine_spec(EngineId::kLlamaCpp),
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
// uniform q8_0, ik_llama.cpp's best structure keeps them apart.
TEST(EngineSpace, IkLlamaCppSetsTheSensitiveFirstAndLastLayersApart) {
  const auto layers = catalogue_layers({40, 1, 1, 1, 1, 1, 1, 40});
  const double q4 = bytes_of(KvPair::parse("q4_0/q4_0")), q8 = bytes_of(KvPair::parse("q8_0/q8_0"));
  const EngineSpace s = engine_search_space(layers, engine_spec(EngineId::kIkLlamaCpp),
                                            MemoryMeasure::kBytes, 6 * q4 + 2 * q8);
  ASSERT_EQ(s.space.groups.size(), 3u) << s.structure;
  EXPECT_EQ(s.space.groups[0].layers, (std::vector<int>{0}));
  EXPECT_EQ(s.space.groups[1].layers, (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(s.space.groups[2].layers, (std::vector<int>{7}));
  EXPECT_EQ(s.structure, "first 1 (layers 0), layers 1-6 alike, last 1 (layers 7)");
  // Every N and M with N + M <= 8 was priced.
  EXPECT_EQ(s.structures_priced, 45u);
}

// vLLM: one quantized dtype for every layer that is quantized, the others at the model's dtype.
TEST(EngineSpace, VllmTakesOneQuantizedDtypeAndTheModelsDtype) {
  const auto layers = catalogue_layers({1, 8, 1, 1});
  const double f16 = bytes_of(KvPair::parse("f16/f16")),
               fp8 = bytes_of(KvPair::parse("fp8_e4m3/fp8_e4m3"));
  const EngineSpace s = engine_search_space(layers, engine_spec(EngineId::kVllm),
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
    (void)engine_search_space(layers, engine_spec(EngineId::kVllm), MemoryMeasure::kBytes, 1e9);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    const std::string what = e.what();
    EXPECT_NE(what.find("layer 0"), std::string::npos) << what;
    EXPECT_NE(what.find("--formats f16,bf16,fp8_e4m3"), std::string::npos) << what;
  }
  try {
    (void)engine_search_space(layers, engine_spec(EngineId::kVllmTurboquant), MemoryMeasure::kBytes,
                              1e9);
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
  const EngineSpace s = engine_search_space(layers, tq, MemoryMeasure::kBytes, 5 * f16);
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
  const EngineSpace none = engine_search_space(layers, tq, MemoryMeasure::kBytes, 3.9 * f16);
  EXPECT_TRUE(std::isinf(best_error_within_budget(none.space)));
  EXPECT_NE(none.structure.find("turboquant_3bit_nc"), std::string::npos) << none.structure;
}

}  // namespace
}  // namespace kvplan::search
