// Loading models: GGUF and safetensors tiny models built here, corrupted copies of stories260K,
// unknown architectures and tensor types, fingerprints.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/error.h"
#include "model/gguf_file.h"
#include "model/model_weights.h"
#include "model/transformer.h"
#include "model_file_writers.h"
#include "reference_forward.h"
#include "test_paths.h"

namespace kvplan {
namespace {

struct TinySpec {
  std::string arch = "llama";
  int layers = 2, hidden = 32, heads = 4, kv_heads = 2, ffn = 48, vocab = 64;
  uint32_t q_type = 0;  // ggml type id written for blk.0.attn_q.weight
};

// A tiny random Llama in GGUF naming (dims reversed: [in, out]).
std::filesystem::path write_tiny_gguf(const std::filesystem::path& path, const TinySpec& s) {
  std::mt19937 rng(3);
  test::GgufWriter g;
  g.add_string("general.architecture", s.arch);
  g.add_string("general.name", "tiny");
  g.add_u32(s.arch + ".block_count", static_cast<uint32_t>(s.layers));
  g.add_u32(s.arch + ".embedding_length", static_cast<uint32_t>(s.hidden));
  g.add_u32(s.arch + ".attention.head_count", static_cast<uint32_t>(s.heads));
  g.add_u32(s.arch + ".attention.head_count_kv", static_cast<uint32_t>(s.kv_heads));
  g.add_u32(s.arch + ".feed_forward_length", static_cast<uint32_t>(s.ffn));
  g.add_f32(s.arch + ".attention.layer_norm_rms_epsilon", 1e-5f);
  const uint64_t D = static_cast<uint64_t>(s.hidden), hd = D / static_cast<uint64_t>(s.heads);
  const uint64_t kv = hd * static_cast<uint64_t>(s.kv_heads), F = static_cast<uint64_t>(s.ffn);
  auto mat = [&](const std::string& name, uint64_t in, uint64_t out) {
    g.add_f32_tensor(name, {in, out}, test::random_values(in * out, rng, 0.3f));
  };
  mat("token_embd.weight", D, static_cast<uint64_t>(s.vocab));
  g.add_f32_tensor("output_norm.weight", {D}, test::random_values(D, rng, 1.0f));
  for (int l = 0; l < s.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    g.add_f32_tensor(b + "attn_norm.weight", {D}, test::random_values(D, rng, 1.0f));
    if (l == 0 && s.q_type != 0) {
      // Bytes of the right size for a 256-value K-quant block row, or anything for unknown ids.
      g.add_tensor(b + "attn_q.weight", {256, 4}, s.q_type, std::string(4 * 84, '\0'));
    } else {
      mat(b + "attn_q.weight", D, D);
    }
    mat(b + "attn_k.weight", D, kv);
    mat(b + "attn_v.weight", D, kv);
    mat(b + "attn_output.weight", D, D);
    g.add_f32_tensor(b + "ffn_norm.weight", {D}, test::random_values(D, rng, 1.0f));
    mat(b + "ffn_gate.weight", D, F);
    mat(b + "ffn_up.weight", D, F);
    mat(b + "ffn_down.weight", F, D);
  }
  test::write_bytes(path, g.bytes());
  return path;
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void expect_contains(const std::string& text, const std::vector<std::string>& needles) {
  for (const auto& n : needles) {
    EXPECT_NE(text.find(n), std::string::npos) << "'" << n << "' not in: " << text;
  }
}

TEST(ModelFiles, TinyGgufLlamaMatchesReference) {
  const auto dir = test::temp_dir("tiny_gguf");
  const ModelWeights w = load_model_weights(write_tiny_gguf(dir / "tiny.gguf", {}));
  EXPECT_TRUE(w.tied_embeddings());
  EXPECT_EQ(w.config.rope_layout, RopeLayout::kAdjacentPairs);
  const Transformer model(w);
  KvCache cache(w.config, KvCacheOptions::exact_kv());
  const std::vector<int32_t> tokens = {1, 17, 42, 5, 63, 0, 9};
  const RowMatrix logits = model.forward(tokens, cache);
  EXPECT_LT(test::max_relative_error(logits, test::reference_logits(w, tokens)), 1e-5);
}

TEST(ModelFiles, TinySafetensorsQwen2WithBiasMatchesReference) {
  const auto dir = test::temp_dir("tiny_hf");
  std::mt19937 rng(5);
  const uint64_t D = 32, hd = 8, nh = 4, nkv = 2, F = 48, V = 64;
  std::vector<test::SafetensorsEntry> e;
  auto add = [&](const std::string& name, std::vector<uint64_t> shape, float scale) {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    e.push_back({name, shape, test::random_values(n, rng, scale)});
  };
  add("model.embed_tokens.weight", {V, D}, 0.3f);
  add("model.norm.weight", {D}, 1.0f);
  for (int l = 0; l < 2; ++l) {
    const std::string b = "model.layers." + std::to_string(l) + ".";
    add(b + "input_layernorm.weight", {D}, 1.0f);
    add(b + "self_attn.q_proj.weight", {nh * hd, D}, 0.3f);
    add(b + "self_attn.k_proj.weight", {nkv * hd, D}, 0.3f);
    add(b + "self_attn.v_proj.weight", {nkv * hd, D}, 0.3f);
    add(b + "self_attn.q_proj.bias", {nh * hd}, 0.5f);
    add(b + "self_attn.k_proj.bias", {nkv * hd}, 0.5f);
    add(b + "self_attn.v_proj.bias", {nkv * hd}, 0.5f);
    add(b + "self_attn.o_proj.weight", {D, nh * hd}, 0.3f);
    add(b + "post_attention_layernorm.weight", {D}, 1.0f);
    add(b + "mlp.gate_proj.weight", {F, D}, 0.3f);
    add(b + "mlp.up_proj.weight", {F, D}, 0.3f);
    add(b + "mlp.down_proj.weight", {D, F}, 0.3f);
  }
  test::write_bytes(dir / "model.safetensors", test::safetensors_bytes(e));
  test::write_bytes(dir / "config.json", R"({"model_type": "qwen2", "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 32,
      "intermediate_size": 48, "vocab_size": 64, "rope_theta": 10000.0, "rms_norm_eps": 1e-6,
      "tie_word_embeddings": true})");
  const ModelWeights w = load_model_weights(dir);
  EXPECT_EQ(w.config.rope_layout, RopeLayout::kHalfSplit);
  EXPECT_EQ(w.layers[0].bqkv.size(), 64);
  EXPECT_EQ(w.fingerprint, read_model_info(dir).fingerprint);
  const Transformer model(w);
  KvCache cache(w.config, KvCacheOptions::exact_kv());
  const std::vector<int32_t> tokens = {3, 1, 4, 1, 5, 9, 2, 6};
  const RowMatrix logits = model.forward(tokens, cache);
  EXPECT_LT(test::max_relative_error(logits, test::reference_logits(w, tokens)), 1e-5);

  // A missing tensor is named.
  e.erase(e.begin() + 5);  // layer 0 v_proj.weight
  test::write_bytes(dir / "model.safetensors", test::safetensors_bytes(e));
  expect_contains(error_of([&] { (void)load_model_weights(dir); }),
                  {"model.layers.0.self_attn.v_proj.weight", "missing"});
}

// An empty embedding may have any row count; one past int is refused by name, not cast.
TEST(ModelFiles, ModelDimensionsMustFitAnInt) {
  const auto dir = test::temp_dir("tiny_huge_dim");
  test::write_bytes(dir / "model.safetensors",
                    test::safetensors_bytes({{"model.embed_tokens.weight", {1ull << 33, 0}, {}}}));
  test::write_bytes(dir / "config.json", R"({"model_type": "llama", "num_hidden_layers": 1,
      "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 32,
      "intermediate_size": 48, "vocab_size": 64})");
  expect_contains(error_of([&] { (void)read_model_info(dir); }),
                  {"model.embed_tokens.weight", "8589934592", "expected 1 to 2147483647"});
}

TEST(ModelFiles, RefusesUnknownArchitectureAndTensorTypes) {
  const auto dir = test::temp_dir("tiny_bad");
  TinySpec gpt2;
  gpt2.arch = "gpt2";
  expect_contains(
      error_of([&] { (void)load_model_weights(write_tiny_gguf(dir / "arch.gguf", gpt2)); }),
      {"arch.gguf", "gpt2", "not supported"});
  TinySpec q2k;
  q2k.q_type = 10;  // Q2_K: a real ggml type kvplan does not dequantize
  expect_contains(
      error_of([&] { (void)load_model_weights(write_tiny_gguf(dir / "q2k.gguf", q2k)); }),
      {"q2k.gguf", "blk.0.attn_q.weight", "Q2_K"});
  TinySpec unknown;
  unknown.q_type = 99;
  expect_contains(
      error_of([&] { (void)load_model_weights(write_tiny_gguf(dir / "type.gguf", unknown)); }),
      {"type.gguf", "blk.0.attn_q.weight", "99"});
}

// A model whose f32 weights exceed the memory there is is refused before any weight is read,
// with what it needs (KVPLAN_MEMORY_LIMIT stands in for a small machine).
TEST(ModelFiles, ModelLargerThanMemoryIsRefusedWithWhatItNeeds) {
  const auto dir = test::temp_dir("tiny_memory");
  const auto path = write_tiny_gguf(dir / "tiny.gguf", TinySpec{});
  const ModelInfo info = read_model_info(path);
  uint64_t elements = 0, bytes = 0;
  for (const TensorSummary& t : info.tensors) {
    uint64_t n = 1;
    for (const uint64_t d : t.shape) n *= d;
    elements += n;
    bytes += t.bytes;
  }
  ASSERT_EQ(::setenv("KVPLAN_MEMORY_LIMIT", std::to_string(bytes - 1).c_str(), 1), 0);
  const std::string e = error_of([&] { (void)load_model_weights(path); });
  expect_contains(e, {"tiny.gguf", "as stored",
                      std::to_string(bytes) + " B for " + std::to_string(elements) + " parameters",
                      "KVPLAN_MEMORY_LIMIT"});
  ASSERT_EQ(::setenv("KVPLAN_MEMORY_LIMIT", std::to_string(bytes).c_str(), 1), 0);
  EXPECT_NO_THROW((void)load_model_weights(path));
  ASSERT_EQ(::setenv("KVPLAN_MEMORY_LIMIT", "12 GiB", 1), 0);
  expect_contains(error_of([&] { (void)load_model_weights(path); }),
                  {"KVPLAN_MEMORY_LIMIT='12 GiB'", "whole number of bytes"});
  ::unsetenv("KVPLAN_MEMORY_LIMIT");
}

TEST(ModelFiles, CorruptedStoriesCopies) {
  const auto src = test::models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(src, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  const auto dir = test::temp_dir("corrupt");
  const std::string good = test::read_bytes(src);
  std::string magic = good;
  magic[0] = 'X';
  test::write_bytes(dir / "magic.gguf", magic);
  expect_contains(error_of([&] { (void)load_model_weights(dir / "magic.gguf"); }),
                  {"magic.gguf", "magic"});
  test::write_bytes(dir / "truncated.gguf", good.substr(0, good.size() * 3 / 5));
  const std::string truncated = error_of([&] { (void)load_model_weights(dir / "truncated.gguf"); });
  expect_contains(truncated, {"truncated.gguf", "tensor '"});
  test::write_bytes(dir / "header.gguf", good.substr(0, 100));
  expect_contains(error_of([&] { (void)load_model_weights(dir / "header.gguf"); }),
                  {"header.gguf"});
}

// The in-memory reader is the file reader: same metadata, tensors and bytes.
TEST(ModelFiles, GgufFromBytesEqualsGgufFromFile) {
  const auto path = write_tiny_gguf(test::temp_dir("gguf_bytes") / "tiny.gguf", {});
  const std::string bytes = test::read_bytes(path);
  const GgufFile from_file(path);
  const GgufFile from_bytes(std::as_bytes(std::span(bytes.data(), bytes.size())), "mem.gguf");
  EXPECT_EQ(from_bytes.path(), "mem.gguf");
  ASSERT_EQ(from_bytes.tensors().size(), from_file.tensors().size());
  const GgufTensorInfo& t = from_bytes.tensor("blk.1.ffn_down.weight");
  const auto a = from_bytes.tensor_bytes(t);
  const auto b = from_file.tensor_bytes(from_file.tensor("blk.1.ffn_down.weight"));
  EXPECT_TRUE(std::equal(a.begin(), a.end(), b.begin(), b.end()));
  EXPECT_EQ(from_bytes.get_uint("llama.block_count"), 2u);
}

// Review finding: n_elements / block_values * block_bytes wrapped for 2^62 f32 values, leaving a
// small n_bytes that passed the range check while n_elements promised 2^62 values.
TEST(ModelFiles, GgufTensorByteCountMayNotWrap) {
  test::GgufWriter g;
  g.add_string("general.architecture", "llama");
  g.add_tensor("huge", {uint64_t{1} << 31, uint64_t{1} << 31}, 0, std::string(64, '\0'));
  const std::string bytes = g.bytes();
  expect_contains(error_of([&] {
                    (void)GgufFile(std::as_bytes(std::span(bytes.data(), bytes.size())), "h.gguf");
                  }),
                  {"h.gguf: tensor 'huge': 4611686018427387904 values of F32 overflow"});
}

// Review finding: get_uint cast doubles of 2^64 and above to uint64 (undefined) before checking.
TEST(ModelFiles, GgufGetUintRefusesValuesPastUint64) {
  test::GgufWriter g;
  g.add_string("general.architecture", "llama");
  g.add_f32("big", 1e30f);
  const std::string bytes = g.bytes();
  const GgufFile gguf(std::as_bytes(std::span(bytes.data(), bytes.size())), "b.gguf");
  expect_contains(error_of([&] { (void)gguf.get_uint("big"); }),
                  {"b.gguf: metadata 'big' = 1", "expected a non-negative integer"});
}

TEST(ModelFiles, TensorTotalsCountValuesAndBytesAsStored) {
  const std::vector<TensorSummary> tensors = {{"token_embd.weight", {512, 64}, "Q4_1", 20480},
                                              {"output_norm.weight", {64}, "F32", 256},
                                              {"scalar", {}, "F32", 4}};
  const TensorTotals totals = tensor_totals(tensors);
  EXPECT_EQ(totals.parameters, 512u * 64 + 64 + 1);
  EXPECT_EQ(totals.bytes, 20480u + 256 + 4);
  EXPECT_EQ(tensor_totals({}).parameters, 0u);
}

TEST(ModelFiles, FingerprintIgnoresWeightsButNotShapes) {
  const auto dir = test::temp_dir("fingerprint");
  const ModelInfo a = read_model_info(write_tiny_gguf(dir / "a.gguf", {}));
  EXPECT_EQ(a.fingerprint, load_model_weights(dir / "a.gguf").fingerprint);
  // Same names/shapes/types, different random weights: same fingerprint.
  std::string bytes = test::read_bytes(dir / "a.gguf");
  bytes[bytes.size() - 5] ^= 0x40;
  test::write_bytes(dir / "b.gguf", bytes);
  EXPECT_EQ(read_model_info(dir / "b.gguf").fingerprint, a.fingerprint);
  TinySpec wider;
  wider.ffn = 64;
  EXPECT_NE(read_model_info(write_tiny_gguf(dir / "c.gguf", wider)).fingerprint, a.fingerprint);
}

}  // namespace
}  // namespace kvplan
