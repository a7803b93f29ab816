// ModelConfig from config.json text and GGUF headers: the bounds and types every field is checked
// against (found by fuzzing, tests/fuzz/fuzz_config.cpp and fuzz_gguf.cpp).
#include "model/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "core/error.h"
#include "model/gguf_file.h"
#include "model/model_weights.h"
#include "model_file_writers.h"
#include "formats/kv_bytes.h"

namespace kvplan {
namespace {

constexpr const char* kBase =
    R"("model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
       "num_key_value_heads": 2)";

std::string config_error(const std::string& extra) {
  try {
    (void)hf_config_from_text("{" + std::string(kBase) + extra + "}", "m/config.json");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << extra;
  return {};
}

TEST(ModelConfig, ReadsConfigText) {
  const ModelConfig c = hf_config_from_text(
      "{" + std::string(kBase) + R"(, "intermediate_size": 128, "rope_theta": 5e5})",
      "m/config.json");
  EXPECT_EQ(c.name, "m");
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_EQ(c.ffn_size, 128);
  EXPECT_EQ(c.rope_theta, 5e5);
  EXPECT_EQ(kv_geometry(c).n_layers(), 2);
}

// Fuzz finding: json::value() threw nlohmann's type_error for a mistyped optional field (and cast
// an out-of-range double to int, which is undefined).
TEST(ModelConfig, MistypedOptionalFieldsAreNamed) {
  EXPECT_NE(config_error(R"(, "intermediate_size": "big")")
                .find("field 'intermediate_size': expected a non-negative integer, got \"big\""),
            std::string::npos);
  EXPECT_NE(config_error(R"(, "vocab_size": 1e300)").find("field 'vocab_size'"), std::string::npos);
  EXPECT_NE(config_error(R"(, "rope_theta": [1])").find("field 'rope_theta': expected a finite"),
            std::string::npos);
  EXPECT_NE(config_error(R"(, "tie_word_embeddings": 1)").find("field 'tie_word_embeddings'"),
            std::string::npos);
  EXPECT_NE(config_error(R"(, "rope_scaling": {"rope_type": "llama3", "factor": "x"})")
                .find("rope_scaling: field 'factor'"),
            std::string::npos);
}

// Per-layer vectors are sized by num_hidden_layers: a file claiming 2^30 layers allocated 8 GiB.
TEST(ModelConfig, CountsAreBounded) {
  const std::string e = config_error(R"(, "num_hidden_layers": 1073741824)");
  EXPECT_NE(e.find("field 'num_hidden_layers': expected an integer in 1..100000"),
            std::string::npos)
      << e;
  EXPECT_NE(config_error(R"(, "intermediate_size": 99999999999)").find("expected an integer in"),
            std::string::npos);
}

// Qwen2's max_window_layers below zero indexed the window vector before its start.
TEST(ModelConfig, NegativeMaxWindowLayersMeansEveryLayerSlides) {
  const ModelConfig c = hf_config_from_text(
      "{" + std::string(kBase) + R"(, "sliding_window": 64, "max_window_layers": -5})", "c.json");
  EXPECT_EQ(c.sliding_window, (std::vector<int64_t>{64, 64}));
}

// Real HF Gemma 3 checkpoints (transformers 4 configs): the local RoPE base in its own field, the
// scaling for the global layers in rope_scaling, the window on five layers in six.
TEST(ModelConfig, HfGemma3TextConventions) {
  const ModelConfig c = hf_config_from_text(
      R"({"model_type": "gemma3_text", "num_hidden_layers": 6, "hidden_size": 640,
          "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
          "query_pre_attn_scalar": 256, "sliding_window": 512, "sliding_window_pattern": 6,
          "rope_theta": 1000000.0, "rope_local_base_freq": 10000.0,
          "rope_scaling": {"rope_type": "linear", "factor": 8.0},
          "final_logit_softcapping": null, "attn_logit_softcapping": null})",
      "g/config.json");
  EXPECT_EQ(c.architecture, "gemma3");
  EXPECT_TRUE(c.qk_norm && c.post_norms && c.norm_weights_offset_by_one);
  EXPECT_EQ(c.ffn_activation, FfnActivation::kGeluTanh);
  EXPECT_FLOAT_EQ(static_cast<float>(c.embedding_scale), std::sqrt(640.0f));
  EXPECT_DOUBLE_EQ(c.attention_scale, 1.0 / 16.0);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_theta_sliding, 1e4);
  EXPECT_EQ(c.rope_scaling, RopeScaling::kLinear);
  EXPECT_EQ(c.sliding_window, (std::vector<int64_t>{512, 512, 512, 512, 512, 0}));
  EXPECT_EQ(c.attn_logit_softcap, 0.0);
  EXPECT_TRUE(c.unsupported_rope_scaling.empty());
}

// Gemma 2 configs from before layer_types: even layers slide; the soft caps come from the config.
TEST(ModelConfig, HfGemma2AlternatesWindowsAndCaps) {
  const ModelConfig c = hf_config_from_text(
      R"({"model_type": "gemma2", "num_hidden_layers": 4, "hidden_size": 64,
          "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
          "sliding_window": 4096, "query_pre_attn_scalar": 144,
          "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0})",
      "g/config.json");
  EXPECT_EQ(c.sliding_window, (std::vector<int64_t>{4096, 0, 4096, 0}));
  EXPECT_EQ(c.attn_logit_softcap, 50.0);
  EXPECT_EQ(c.final_logit_softcap, 30.0);
  EXPECT_DOUBLE_EQ(c.attention_scale, 1.0 / 12.0);
  EXPECT_FALSE(c.qk_norm);
}

// The estimator reads any RoPE; the harness refuses the variants it does not implement, by name.
TEST(ModelConfig, RopeVariantsTheHarnessLacksAreNamed) {
  const ModelConfig yarn = hf_config_from_text(
      "{" + std::string(kBase) + R"(, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}})",
      "y/config.json");
  EXPECT_EQ(kv_geometry(yarn).n_layers(), 2);
  EXPECT_NE(harness_support_problem(yarn, "safetensors").find("RoPE type 'yarn'"),
            std::string::npos);
  const ModelConfig partial = hf_config_from_text(
      R"({"model_type": "phi3", "num_hidden_layers": 2, "hidden_size": 64,
          "num_attention_heads": 4, "rope_parameters": {"rope_type": "default",
          "rope_theta": 10000.0, "partial_rotary_factor": 0.75}})",
      "p/config.json");
  EXPECT_NE(harness_support_problem(partial, "safetensors").find("partial_rotary_factor 0.75"),
            std::string::npos);
  // Phi-3 GGUFs fuse gate and up into ffn_up: the GGUF loader does not claim them.
  ModelConfig phi3 = partial;
  phi3.unsupported_rope_scaling.clear();
  EXPECT_TRUE(harness_support_problem(phi3, "safetensors").empty());
  EXPECT_NE(harness_support_problem(phi3, "gguf").find("supported: llama, mistral, qwen2, gemma3"),
            std::string::npos);
}

std::string gguf_error(const std::function<void(test::GgufWriter&)>& edit) {
  test::GgufWriter g;
  g.add_string("general.architecture", "llama");
  g.add_u32("llama.block_count", 2);
  g.add_u32("llama.embedding_length", 64);
  g.add_u32("llama.attention.head_count", 4);
  edit(g);
  const std::string bytes = g.bytes();
  try {
    const GgufFile gguf(std::as_bytes(std::span(bytes.data(), bytes.size())), "m.gguf");
    (void)gguf_model_config(gguf);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

// Fuzz finding (tests/fuzz/regressions/gguf/block-count-huge-alloc): block_count was trusted and
// sized per-layer vectors (a 939 MB allocation from a 14 KB file).
TEST(ModelConfig, GgufCountsAreBounded) {
  EXPECT_EQ(gguf_error([](auto&) {}), "accepted");
  EXPECT_EQ(gguf_error([](auto& g) { g.add_u32("llama.attention.head_count_kv", 70000); }),
            "m.gguf: metadata 'llama.attention.head_count_kv' = 70000: expected at most 65536");
  EXPECT_EQ(
      gguf_error([](auto& g) { g.add_f32("llama.attention.key_length", 1e10f); }),
      "m.gguf: metadata 'llama.attention.key_length' = 10000000000: expected at most 16777216");
  // A float too large for uint64 is refused before it is cast (the cast is undefined).
  const std::string e = gguf_error([](auto& g) { g.add_f32("llama.context_length", 3e38f); });
  EXPECT_NE(e.find("'llama.context_length' = 3"), std::string::npos) << e;
  EXPECT_NE(e.find("expected a non-negative integer"), std::string::npos) << e;
}

// Gemma 3 270M's geometry: 18 layers, 1 KV head of 256, a 512-token window. llama.cpp
// (set_swa_pattern(6)) makes layers 5, 11 and 17 global and the other 15 sliding.
test::GgufWriter gemma3_header() {
  test::GgufWriter g;
  g.add_string("general.architecture", "gemma3");
  g.add_u32("gemma3.block_count", 18);
  g.add_u32("gemma3.embedding_length", 640);
  g.add_u32("gemma3.attention.head_count", 4);
  g.add_u32("gemma3.attention.head_count_kv", 1);
  g.add_u32("gemma3.attention.key_length", 256);
  g.add_u32("gemma3.attention.value_length", 256);
  g.add_u32("gemma3.attention.sliding_window", 512);
  return g;
}

ModelConfig config_of(const test::GgufWriter& g) {
  const std::string bytes = g.bytes();
  const GgufFile gguf(std::as_bytes(std::span(bytes.data(), bytes.size())), "m.gguf");
  return gguf_model_config(gguf);
}

uint64_t f16_bytes(const ModelConfig& c, int64_t context) {
  const std::vector<KvPair> pairs(static_cast<size_t>(c.n_layers), KvPair::parse("KV16"));
  return kv_cache_bytes(kv_geometry(c), pairs, QuantSettings{}, context, 1);
}

// The GGUF header path gave every layer the window: Gemma 3's global layers were estimated at 512
// tokens instead of the whole context.
TEST(ModelConfig, GgufGemma3SlidesFiveLayersInSix) {
  const ModelConfig c = config_of(gemma3_header());
  std::vector<int64_t> expected(18, 512);
  for (int l : {5, 11, 17}) expected[static_cast<size_t>(l)] = 0;
  EXPECT_EQ(c.sliding_window, expected);
  // f16 K and V: 2 x 1 head x 256 values x 2 B = 1024 B per token per layer. At 8192 tokens the
  // 15 sliding layers hold 512 tokens, the 3 global layers all 8192.
  EXPECT_EQ(f16_bytes(c, 8192), 15u * 512 * 1024 + 3u * 8192 * 1024);  // 33030144
  // Below the window every layer holds the whole context.
  EXPECT_EQ(f16_bytes(c, 256), 18u * 256 * 1024);
}

// Gemma 3's block conventions, as llama.cpp's gemma3 loader sets them: Q/K and post norms, GeGLU
// (tanh), embeddings times sqrtf(hidden), queries scaled by 1/sqrt(head_dim) (27B: by
// 1/sqrt(hidden / heads)), RoPE base 10000 on the sliding layers unless the file says otherwise.
TEST(ModelConfig, GgufGemma3BlockConventions) {
  test::GgufWriter g = gemma3_header();
  g.add_f32("gemma3.rope.freq_base", 1e6f);
  const ModelConfig c = config_of(g);
  EXPECT_TRUE(c.qk_norm);
  EXPECT_TRUE(c.post_norms);
  EXPECT_EQ(c.ffn_activation, FfnActivation::kGeluTanh);
  EXPECT_EQ(c.embedding_scale, static_cast<double>(std::sqrt(640.0f)));
  EXPECT_DOUBLE_EQ(c.attention_scale, 1.0 / 16);
  EXPECT_EQ(c.rope_theta, 1e6);
  EXPECT_EQ(c.rope_theta_sliding, 10000.0);
  EXPECT_EQ(c.rope_layout, RopeLayout::kHalfSplit);
  g.add_f32("gemma3.rope.freq_base_swa", 5000.0f);
  EXPECT_EQ(config_of(g).rope_theta_sliding, 5000.0);
  // The Llama family keeps none of them.
  test::GgufWriter llama;
  llama.add_string("general.architecture", "llama");
  llama.add_u32("llama.block_count", 2);
  llama.add_u32("llama.embedding_length", 64);
  llama.add_u32("llama.attention.head_count", 4);
  const ModelConfig l = config_of(llama);
  EXPECT_FALSE(l.qk_norm || l.post_norms);
  EXPECT_EQ(l.ffn_activation, FfnActivation::kSilu);
  EXPECT_EQ(l.embedding_scale, 1.0);
  EXPECT_EQ(l.attention_scale, 0.0);
  EXPECT_EQ(l.rope_theta_sliding, 0.0);
}

TEST(ModelConfig, GgufLlamaWithoutWindowKeepsEveryToken) {
  test::GgufWriter g;
  g.add_string("general.architecture", "llama");
  g.add_u32("llama.block_count", 4);
  g.add_u32("llama.embedding_length", 256);
  g.add_u32("llama.attention.head_count", 4);
  g.add_u32("llama.attention.head_count_kv", 2);
  const ModelConfig c = config_of(g);
  EXPECT_EQ(c.sliding_window, std::vector<int64_t>(4, 0));
  // 2 (K, V) x 2 heads x 64 values x 2 B = 512 B per token per layer.
  EXPECT_EQ(f16_bytes(c, 8192), 4u * 8192 * 512);
}

TEST(ModelConfig, GgufSlidingLayersFollowTheArchitectureOrThePatternKey) {
  // gemma2 alternates (period 2: even layers slide) and defaults the window to 4096.
  test::GgufWriter gemma2;
  gemma2.add_string("general.architecture", "gemma2");
  gemma2.add_u32("gemma2.block_count", 4);
  gemma2.add_u32("gemma2.embedding_length", 256);
  gemma2.add_u32("gemma2.attention.head_count", 4);
  EXPECT_EQ(config_of(gemma2).sliding_window, (std::vector<int64_t>{4096, 0, 4096, 0}));
  // An explicit per-layer array wins over the architecture's period.
  test::GgufWriter listed = gemma3_header();
  std::vector<bool> flags(18, false);
  flags[0] = flags[1] = true;
  listed.add_bool_array("gemma3.attention.sliding_window_pattern", flags);
  std::vector<int64_t> expected(18, 0);
  expected[0] = expected[1] = 512;
  EXPECT_EQ(config_of(listed).sliding_window, expected);
  // A number is a period: with 3, layers 2 and 5 of 6 are global.
  test::GgufWriter period;
  period.add_string("general.architecture", "smallmodel");
  period.add_u32("smallmodel.block_count", 6);
  period.add_u32("smallmodel.embedding_length", 256);
  period.add_u32("smallmodel.attention.head_count", 4);
  period.add_u32("smallmodel.attention.sliding_window", 128);
  EXPECT_EQ(config_of(period).sliding_window, std::vector<int64_t>(6, 128));  // phi3-style: all
  period.add_u32("smallmodel.attention.sliding_window_pattern", 3);
  EXPECT_EQ(config_of(period).sliding_window, (std::vector<int64_t>{128, 128, 0, 128, 128, 0}));
  // An array of the wrong length is refused, naming the key.
  test::GgufWriter short_list = gemma3_header();
  short_list.add_u32_array("gemma3.attention.sliding_window_pattern", {1, 1, 0});
  try {
    (void)config_of(short_list);
    FAIL() << "accepted a 3-entry pattern for 18 layers";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'gemma3.attention.sliding_window_pattern' lists 3 "
                                         "layers, expected 18"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace kvplan
