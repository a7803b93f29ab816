#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli/run_kvplan.h"

namespace kvplan::test {
namespace {

TEST(FormatsCommand, ListsEveryFormatWithSizes) {
  const RunResult r = run_kvplan("formats --head-dim 128 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["formats"].size(), 50u);
  for (const auto& f : j["formats"]) {
    if (f["name"] == "q4_0" || f["name"] == "q4_0_had" || f["name"] == "q4_0_had64") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 72) << f;
    }
    if (f["name"] == "q5_1_had64") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 96);  // two spans of two 24-byte blocks
    }
    // The llama.cpp rotation variants of q4_1 and q5 are searched only when named; those of
    // q8_0, q4_0 and iq4_nl (whole row and spans of 64) by default.
    if (f["name"] == "q4_1_had" || f["name"] == "q5_0_had64" || f["name"] == "f32" ||
        f["name"] == "q6_0" || f["name"] == "q6_0_had64") {
      EXPECT_FALSE(f["searched_by_default"].get<bool>()) << f;
    }
    if (f["name"] == "q4_0_had" || f["name"] == "q4_0" || f["name"] == "q8_0_had64" ||
        f["name"] == "iq4_nl_had64") {
      EXPECT_TRUE(f["searched_by_default"].get<bool>()) << f;
    }
    // OCP MX: 4 blocks of 32 with one E8M0 byte each; NVFP4: 64 B of codes + 8 E4M3 scales.
    if (f["name"] == "mxfp4") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 68);
    }
    if (f["name"] == "mxfp6_e2m3") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 100);
    }
    if (f["name"] == "mxfp8_e4m3") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 132);
    }
    if (f["name"] == "fp8_per_token_head" || f["name"] == "int8_per_token_head") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 132);  // 128 codes + an f32 scale
    }
    // vLLM TurboQuant at head_dim 128 (turboquant_4bit_nc's 134-byte slot = 66 + 68): keys 64 B
    // of 4-bit codes + an f16 norm, values 64 B + f16 scale and min; 3-bit: 48 B of codes.
    if (f["name"] == "tq_mse4") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 66);
    }
    if (f["name"] == "tq_int4") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 68);
    }
    if (f["name"] == "tq_mse3") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 50);
    }
    if (f["name"] == "tq_int3") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 52);
    }
    if (f["name"] == "int4_per_token_head") {  // 64 B of codes + the f32 scale (zero point in it)
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 68);
    }
    if (f["name"] == "tq_fp8") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 128);
    }
    if (f["name"] == "nvfp4") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 72);
      EXPECT_DOUBLE_EQ(f["overhead_bits"].get<double>(), 0.5);
    }
    // One token's share of per-channel groups: 128 channels x (16 B codes + 4 B) per 32 tokens.
    if (f["name"] == "int4_kivi") {
      EXPECT_DOUBLE_EQ(f["bytes_per_row"].get<double>(), 80.0);
    }
    if (f["name"] == "int2") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 48);
    }
    // Their own group of 64 / 128: 2 x (4 B + 32 B) and 4 B + 64 B.
    if (f["name"] == "int4_g64") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 72);
    }
    if (f["name"] == "int4_g128") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 68);
    }
  }
  const RunResult text = run_kvplan("formats --head-dim 128");
  ASSERT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("\nq5_0_had64*"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\nq5_0 "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("* not a default candidate"), std::string::npos);
  const RunResult small = run_kvplan("formats --head-dim 8");
  ASSERT_EQ(small.exit_code, 0);
  EXPECT_NE(small.out.find("needs head_dim a multiple of 32"), std::string::npos);
  // The rotated formats need a power of two, which 96 is not (though it is a multiple of 32).
  const RunResult odd = run_kvplan("formats --head-dim 96 --json");
  for (const auto& f : nlohmann::json::parse(odd.out)["formats"]) {
    if (f["name"] == "q4_0_had") {
      EXPECT_NE(f["unsupported"].get<std::string>().find("power of two"), std::string::npos) << f;
    }
    // Spans of 64 need whole spans, not a power of two.
    if (f["name"] == "q4_0_had64") {
      EXPECT_NE(f["unsupported"].get<std::string>().find("spans of 64"), std::string::npos) << f;
    }
    if (f["name"] == "q4_0") {
      EXPECT_EQ(f["bytes_per_row"].get<int>(), 54);
    }
  }
  // Each format lists the engines that store it.
  for (const auto& f : j["formats"]) {
    if (f["name"] == "nvfp4") {
      EXPECT_EQ(f["engines"], nlohmann::json({"vllm", "trtllm", "modelopt"}));
    }
    if (f["name"] == "int4") {
      EXPECT_EQ(f["engines"], nlohmann::json({"hf"}));
    }
  }
  EXPECT_EQ(run_kvplan("formats --head-dim 0").exit_code, 2);
  const RunResult help = run_kvplan("formats --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("Example"), std::string::npos);
}

}  // namespace
}  // namespace kvplan::test
