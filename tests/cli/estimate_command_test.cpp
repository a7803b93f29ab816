#include <algorithm>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_kvplan.h"
#include "model/model_file_writers.h"
#include "test_paths.h"

namespace kvplan::test {
namespace {

namespace fs = std::filesystem;

fs::path scratch_dir() {
  const fs::path dir = fs::temp_directory_path() / ("kvplan_cli_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

fs::path write(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// Bad input: exit code 2 and exactly one line on stderr that names `must_mention`.
void expect_bad_input(const std::string& args, const std::string& must_mention) {
  const RunResult r = run_kvplan(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << args << "\n" << r.err;
  EXPECT_NE(r.err.find(must_mention), std::string::npos) << args << "\n" << r.err;
}

TEST(EstimateCommand, Llama8bF16JsonIsExact) {
  const RunResult r =
      run_kvplan("estimate --model llama-3.1-8b --context 4K,32K,128K --kv f16/f16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& e = j["estimates"][0];
  EXPECT_EQ(e["bytes_per_token"].get<double>(), 131072.0);
  EXPECT_EQ(e["contexts"][0]["bytes"].get<uint64_t>(), 536870912ull);
  EXPECT_EQ(e["contexts"][1]["bytes"].get<uint64_t>(), 4294967296ull);
  EXPECT_EQ(e["contexts"][2]["bytes"].get<uint64_t>(), 17179869184ull);
}

TEST(EstimateCommand, SequencesAndFormatsFromFlags) {
  const RunResult r = run_kvplan(
      "estimate --model llama-3.1-8b --context 32768 --sequences 4 --k-format q8_0 --v-format q4_0 "
      "--json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  // 32 x 8 x (136 + 72) = 53,248 B/token; x 32768 tokens x 4 sequences.
  EXPECT_EQ(j["estimates"][0]["bytes_per_token"].get<double>(), 53248.0);
  EXPECT_EQ(j["estimates"][0]["contexts"][0]["bytes"].get<uint64_t>(), 53248ull * 32768 * 4);
}

TEST(EstimateCommand, GpuMemoryAnswersHowManyTokensFit) {
  const RunResult r = run_kvplan(
      "estimate --model llama-3.1-8b --kv KV16 --gpu-memory 20GiB --weights-bytes 16GiB --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["estimates"][0]["max_context_per_sequence"].get<int64_t>(), 32768);
}

TEST(EstimateCommand, MiniMaxPlanIs3_23xSmaller) {
  const std::string plan =
      std::string(KVPLAN_SOURCE_DIR) + "/configs/plans/minimax-m2.5-slot134.json";
  const RunResult r =
      run_kvplan("estimate --model minimax-m2.5 --plan " + plan + " --context 32K --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_NEAR(j["estimates"][0]["contexts"][0]["compression_vs_bf16"].get<double>(), 3.23, 0.005);
}

TEST(EstimateCommand, ReadsConfigJsonDirectoriesAndGgufHeaders) {
  const fs::path dir = scratch_dir() / "model";
  fs::create_directories(dir);
  write(dir / "config.json", R"({"model_type":"mistral","num_hidden_layers":2,"hidden_size":256,
      "num_attention_heads":4,"num_key_value_heads":1,"sliding_window":100})");
  RunResult r =
      run_kvplan("estimate --model " + dir.string() + " --kv f16/f16 --context 1000 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // MQA, head_dim 64, window 100 tokens: 2 layers x 100 x 1 x 256 B.
  EXPECT_EQ(nlohmann::json::parse(r.out)["estimates"][0]["contexts"][0]["bytes"].get<uint64_t>(),
            51200u);

  const fs::path gguf = models_dir() / "stories260K.gguf";
  KVPLAN_NEED_FILE(gguf, "stories260K test model: ../shared/models or $KVPLAN_TEST_MODELS");
  r = run_kvplan("estimate --model " + gguf.string() + " --kv KV16 --context 512 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["model"]["num_layers"].get<int>(), 5);
  EXPECT_EQ(j["model"]["head_dim"].get<int>(), 8);
  // 5 layers x 4 KV heads x (8 + 8) bf16 values x 2 B x 512 tokens.
  EXPECT_EQ(j["estimates"][0]["contexts"][0]["bytes"].get<uint64_t>(), 5u * 4 * 32 * 512);
}

// A Gemma 3 GGUF header holds one window; llama.cpp slides 5 layers in 6 (layers 5, 11, 17 are
// global). Every layer used to be estimated as sliding.
TEST(EstimateCommand, GgufGemma3GlobalLayersKeepTheWholeContext) {
  GgufWriter g;
  g.add_string("general.architecture", "gemma3");
  g.add_u32("gemma3.block_count", 18);
  g.add_u32("gemma3.embedding_length", 640);
  g.add_u32("gemma3.attention.head_count", 4);
  g.add_u32("gemma3.attention.head_count_kv", 1);
  g.add_u32("gemma3.attention.key_length", 256);
  g.add_u32("gemma3.attention.value_length", 256);
  g.add_u32("gemma3.attention.sliding_window", 512);
  const fs::path gguf = write(scratch_dir() / "gemma3-header.gguf", g.bytes());
  RunResult r =
      run_kvplan("estimate --model " + gguf.string() + " --kv f16/f16 --context 8192 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // f16: 2 x 256 values x 2 B = 1024 B per token per layer; 15 layers x 512 + 3 x 8192 tokens.
  EXPECT_EQ(nlohmann::json::parse(r.out)["estimates"][0]["contexts"][0]["bytes"].get<uint64_t>(),
            15u * 512 * 1024 + 3u * 8192 * 1024);
  r = run_kvplan("estimate --model " + gguf.string() + " --kv f16/f16 --context 8192");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("sliding window: 512 tokens on 15 of 18 layers"), std::string::npos)
      << r.out;
}

// The fetched Gemma 3 270M against what llama.cpp (llama-cpp-python 0.3.36's llama.cpp,
// `llama-perplexity -c 4096 -b 4096`) prints for the same GGUF:
//   llama_kv_cache_iswa: creating non-SWA KV cache, size = 4096 cells
//   llama_kv_cache: size = 12.00 MiB ( 4096 cells,  3 layers, 1/1 seqs), K (f16): 6.00 MiB, ...
//   llama_kv_cache_iswa: creating     SWA KV cache, size = 1024 cells
//   llama_kv_cache: size = 15.00 MiB ( 1024 cells, 15 layers, 1/1 seqs), K (f16): 7.50 MiB, ...
// Its SWA cache allocates the 512-token window plus one 512-token ubatch of room; a sliding
// layer holds the window, which is what kvplan counts.
TEST(EstimateCommand, RealGemma3MatchesLlamaCppLayerCounts) {
  KVPLAN_NEED_FILE(gemma3_path(), "run scripts/models/fetch-gemma3.sh");
  const RunResult r = run_kvplan("estimate --model " + gemma3_path().string() +
                                 " --kv f16/f16 --context 4096 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto windows = j["model"]["sliding_window"].get<std::vector<int64_t>>();
  ASSERT_EQ(windows.size(), 18u);
  const auto global = std::count(windows.begin(), windows.end(), 0);
  EXPECT_EQ(global, 3);
  EXPECT_EQ(std::count(windows.begin(), windows.end(), 512), 15);
  constexpr uint64_t kMiB = 1 << 20;
  const uint64_t non_swa = 12 * kMiB;           // llama.cpp: 4096 cells x 3 layers
  const uint64_t swa = 15 * kMiB * 512 / 1024;  // llama.cpp's 15 layers, 512 of its 1024 cells
  EXPECT_EQ(j["estimates"][0]["contexts"][0]["bytes"].get<uint64_t>(), non_swa + swa);
}

TEST(EstimateCommand, HumanTableByDefault) {
  const RunResult r = run_kvplan("estimate --model smollm2-135m");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("K8V4"), std::string::npos);
  EXPECT_NE(r.out.find("30 layers, 3 KV heads, head_dim 64"), std::string::npos) << r.out;
}

TEST(EstimateCommand, BadInputsExitTwoWithOneLine) {
  const fs::path dir = scratch_dir();
  expect_bad_input("estimate --model " + (dir / "missing" / "config.json").string(), "missing");
  // A newline in a file name is escaped: the error stays one line.
  expect_bad_input("estimate --model '" + (dir / "two\nlines.json").string() + "'",
                   "two\\nlines.json");
  expect_bad_input(
      "estimate --model " + write(dir / "garbled.json", "{\"num_hidden_layers\": 3,").string(),
      "garbled.json");
  expect_bad_input(
      "estimate --model " +
          write(dir / "nolayers.json", R"({"hidden_size":64,"num_attention_heads":8})").string(),
      "num_hidden_layers");
  expect_bad_input("estimate --model " +
                       write(dir / "neg.json",
                             R"({"num_hidden_layers":-2,"hidden_size":64,"num_attention_heads":8})")
                           .string(),
                   "num_hidden_layers");
  expect_bad_input("estimate --model llama-3.1-8b --kv K3V2", "K3V2");
  expect_bad_input("estimate --model llama-3.1-8b --k-format q3_k --v-format q4_0", "q3_k");
  expect_bad_input("estimate --model llama-3.1-8b --context 0", "--context");
  expect_bad_input("estimate --model llama-3.1-8b --context -5", "--context");
  expect_bad_input("estimate --model llama-3.1-8b --sequences 0", "--sequences");
  expect_bad_input("estimate --model no-such-preset", "no-such-preset");
  expect_bad_input(
      "estimate --model " + write(dir / "bad.gguf", "GGUX\x03\x00\x00\x00 more bytes").string(),
      "magic");
  expect_bad_input("estimate --model " + write(dir / "short.gguf", "GG").string(), "short.gguf");
  expect_bad_input(
      "estimate --model " + write(dir / "mla.json", R"({"num_hidden_layers":2,"hidden_size":64,
                           "num_attention_heads":8,"kv_lora_rank":512})")
                                .string(),
      "MLA");
  expect_bad_input("estimate --model " +
                       write(dir / "hybrid.json", R"({"model_type":"jamba","num_hidden_layers":2,
                           "hidden_size":64,"num_attention_heads":8})")
                           .string(),
                   "jamba");
  // stories260K has head_dim 8: ggml blocks of 32 cannot hold a row.
  const fs::path gguf = models_dir() / "stories260K.gguf";
  if (fs::exists(gguf)) {
    expect_bad_input("estimate --model " + gguf.string() + " --kv q8_0/q8_0", "q8_0");
  }
  expect_bad_input("estimate --model llama-3.1-8b --gpu-memory lots", "--gpu-memory");
  expect_bad_input("estimate", "--model");
  fs::remove_all(dir);
}

TEST(EstimateCommand, PlanForAnotherModelIsRefused) {
  const std::string plan =
      std::string(KVPLAN_SOURCE_DIR) + "/configs/plans/minimax-m2.5-slot134.json";
  expect_bad_input("estimate --model llama-3.1-8b --plan " + plan, "62 layers");
}

}  // namespace
}  // namespace kvplan::test
