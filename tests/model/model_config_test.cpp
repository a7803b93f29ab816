// ModelConfig from config.json text and GGUF headers: the bounds and types every field is checked
// against (found by fuzzing, tests/fuzz/fuzz_config.cpp and fuzz_gguf.cpp).
#include "model/model_config.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "model/gguf_file.h"
#include "model_file_writers.h"

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

}  // namespace
}  // namespace kvplan
