// The kernels' shared math and CPU reference paths, on every build (no GPU needed): row geometry
// vs src/formats sizes, paged pack/unpack bytes vs src/formats, split decode attention and the
// profiler's batched attention vs f64, parameter checks, and device selection without a GPU.
#include <gtest/gtest.h>

#include "core/error.h"
#include "gpu/device_selection.h"
#include "kv_cases.h"

namespace kvplan::test {
namespace {

static_assert(kFmtF32 == static_cast<uint16_t>(FormatId::kF32) &&
              kFmtF16 == static_cast<uint16_t>(FormatId::kF16) &&
              kFmtBF16 == static_cast<uint16_t>(FormatId::kBF16) &&
              kFmtInt8 == static_cast<uint16_t>(FormatId::kInt8) &&
              kFmtInt4 == static_cast<uint16_t>(FormatId::kInt4) &&
              kFmtInt2 == static_cast<uint16_t>(FormatId::kInt2) &&
              kFmtInt8G64 == static_cast<uint16_t>(FormatId::kInt8G64) &&
              kFmtInt8G128 == static_cast<uint16_t>(FormatId::kInt8G128) &&
              kFmtInt4G64 == static_cast<uint16_t>(FormatId::kInt4G64) &&
              kFmtInt4G128 == static_cast<uint16_t>(FormatId::kInt4G128) &&
              kFmtInt2G64 == static_cast<uint16_t>(FormatId::kInt2G64) &&
              kFmtInt2G128 == static_cast<uint16_t>(FormatId::kInt2G128) &&
              kFmtQ8_0 == static_cast<uint16_t>(FormatId::kQ8_0) &&
              kFmtQ4_0 == static_cast<uint16_t>(FormatId::kQ4_0) &&
              kFmtQ4_1 == static_cast<uint16_t>(FormatId::kQ4_1) &&
              kFmtQ5_0 == static_cast<uint16_t>(FormatId::kQ5_0) &&
              kFmtQ5_1 == static_cast<uint16_t>(FormatId::kQ5_1) &&
              kFmtIq4Nl == static_cast<uint16_t>(FormatId::kIq4Nl) &&
              kFmtFp8E4M3 == static_cast<uint16_t>(FormatId::kFp8E4M3) &&
              kFmtFp8E5M2 == static_cast<uint16_t>(FormatId::kFp8E5M2));

TEST(RowFormat, AgreesWithFormatSizeForEveryFormat) {
  int checked = 0;
  for (const Format& f : kernel_formats()) {
    for (int D : {8, 16, 32, 40, 64, 96, 128, 256, 512}) {
      for (int group : {1, 8, 24, 32, 64, 128, 1000}) {
        RowFormat r;
        const bool ok = make_row_format(static_cast<uint16_t>(f.id()), D, group, &r);
        size_t bytes = 0;
        bool formats_ok = true;
        try {
          bytes = packed_row_bytes(f, static_cast<size_t>(D), static_cast<size_t>(group));
        } catch (const Error&) {
          formats_ok = false;
        }
        ASSERT_EQ(ok, formats_ok) << f.name() << " D=" << D << " group=" << group;
        if (!ok) continue;
        EXPECT_EQ(static_cast<size_t>(r.row_bytes), bytes) << f.name() << " D=" << D;
        int sum = 0;
        for (int u = 0; u < r.n_units; ++u) sum += row_unit_values(r, u);
        EXPECT_EQ(sum, D) << f.name();
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 500);
  RowFormat r;
  EXPECT_FALSE(make_row_format(kFmtQ4_0, 1024, 32, &r)) << "rows over kMaxRowValues are refused";
  EXPECT_FALSE(make_row_format(999, 128, 32, &r)) << "unknown ids are refused";
}

TEST(PackReference, BytesAndValuesMatchSrcFormats) {
  uint32_t seed = 100;
  for (const Format& f : kernel_formats()) {
    for (const int D : pack_test_head_dims(f)) {
      for (DenseType type : {DenseType::kF32, DenseType::kF16, DenseType::kBF16}) {
        check_pack_unpack({f, D, 3, 32, type, 37, 5, 16, seed++}, false);
      }
    }
    if (f.info().block_values() == 0 && !f.info().rotated()) {
      // Rows that are not whole blocks, int groups wider than 32 and clamped to the row.
      check_pack_unpack({f, 40, 2, 24, DenseType::kF32, 19, 0, 8, seed++}, false);
      check_pack_unpack({f, 96, 2, 64, DenseType::kBF16, 9, 3, 4, seed++}, false);
      check_pack_unpack({f, 256, 1, 512, DenseType::kF16, 5, 1, 16, seed++}, false);
    }
  }
}

TEST(DecodeReference, MatchesF64Attention) {
  const auto F = [](const char* name) { return Format::parse(name); };
  check_decode({F("f16"), F("f16"), 128, 8, 2, 32, {1, 100, 517}, 16, 0, 1}, false);
  check_decode({F("q8_0"), F("q4_0"), 128, 8, 2, 32, {300, 33, 2}, 16, 3, 2}, false);
  check_decode({F("int4"), F("int2"), 64, 4, 4, 32, {257, 16, 17}, 8, 0, 3}, false);
  check_decode({F("fp8_e4m3"), F("iq4_nl"), 96, 6, 1, 32, {90, 1}, 32, 5, 4}, false);
  check_decode({F("q5_1"), F("int8"), 256, 8, 1, 64, {64, 200}, 16, 2, 5}, false);
  check_decode({F("bf16"), F("q5_0"), 128, 16, 2, 32, {1000}, 16, 0, 6}, false);
  check_decode({F("f32"), F("fp8_e5m2"), 32, 2, 2, 32, {45, 3, 77, 128}, 4, 7, 7}, false);
  check_decode({F("q4_1"), F("f32"), 64, 1, 1, 16, {31, 32, 33}, 16, 1, 8}, false);
  check_decode({F("tq_mse4"), F("tq_int4"), 128, 4, 2, 32, {70, 5}, 16, 0, 9}, false);
  check_decode({F("tq_mse3"), F("tq_int3"), 64, 2, 1, 32, {33, 90}, 16, 2, 10}, false);
  check_decode({F("tq_fp8"), F("tq_int4"), 256, 8, 2, 32, {17}, 16, 1, 11}, false);
  // Rotated rows: keys whole (one unit per row), values in spans of 64 (two units per row).
  check_decode({F("q5_0_had"), F("iq4_nl_had64"), 128, 4, 2, 32, {65, 7}, 16, 1, 12}, false);
  // ik_llama.cpp's 6-bit blocks, plain keys and values rotated in spans of 64.
  check_decode({F("q6_0"), F("q6_0_had64"), 128, 4, 2, 32, {40, 129}, 16, 0, 13}, false);
}

TEST(BatchedReference, MatchesF64Attention) {
  const auto F = [](const char* name) { return Format::parse(name); };
  check_batched({F("q4_0"), F("int4"), 64, 4, 2, 32, 24, 64, 0, 16, 1}, false);
  check_batched({F("f16"), F("fp8_e4m3"), 64, 4, 2, 32, 24, 64, 17, 16, 2}, false);
  check_batched({F("int2"), F("q8_0"), 128, 8, 8, 32, 50, 50, 0, 8, 3}, false);
}

TEST(KernelParams, RejectBadInputWithAReason) {
  RowFormat f;
  ASSERT_TRUE(make_row_format(kFmtQ4_0, 128, 32, &f));
  std::vector<uint8_t> pages(1024);
  float dummy[4];
  int32_t lens[1] = {1};
  gpu::DecodeAttentionParams p;
  p.q = p.out = p.workspace = dummy;
  p.seq_lens = lens;
  p.k = p.v = {pages.data(), nullptr, 16, 2, f.row_bytes, 4};
  p.k_format = p.v_format = f;
  p.batch = 1;
  p.n_heads = 8;
  p.n_kv_heads = 2;
  p.head_dim = 128;
  p.max_seq_len = 64;
  p.sm_scale = 0.1f;
  EXPECT_TRUE(gpu::check_decode_params(p).ok());
  gpu::DecodeAttentionParams bad = p;
  bad.n_heads = 7;
  EXPECT_EQ(gpu::check_decode_params(bad).code, gpu::StatusCode::kInvalidArgument);
  bad = p;
  bad.max_seq_len = 65;
  EXPECT_EQ(gpu::check_decode_params(bad).code, gpu::StatusCode::kInvalidArgument);
  bad = p;
  bad.k.row_bytes = 72 + 1;
  EXPECT_EQ(gpu::check_decode_params(bad).code, gpu::StatusCode::kInvalidArgument);
  bad = p;
  bad.n_heads = 32;
  bad.n_kv_heads = 1;  // group 32 x 128 > 2048
  EXPECT_EQ(gpu::check_decode_params(bad).code, gpu::StatusCode::kUnimplemented);
  EXPECT_NE(std::string(gpu::check_decode_params(bad).message).find("2048"), std::string::npos);
  gpu::PackPageParams pp;
  EXPECT_EQ(gpu::check_pack_params(pp).code, gpu::StatusCode::kInvalidArgument);
  // Splits cover the longest sequence in whole tiles.
  for (int64_t len : {1, 15, 16, 17, 1000, 32768}) {
    for (int s : {1, 3, gpu::decode_attention_default_splits(8, 8, len)}) {
      const int64_t per = gpu::decode_attention_split_tokens(len, s);
      EXPECT_EQ(per % gpu::kDecodeTile, 0);
      EXPECT_GE(per * s, len);
    }
  }
}

TEST(DeviceSelection, ParsesAndFallsBackWithoutAGpu) {
  EXPECT_EQ(parse_device_request("auto").kind, DeviceRequest::Kind::kAuto);
  EXPECT_EQ(parse_device_request("cpu").kind, DeviceRequest::Kind::kCpu);
  EXPECT_EQ(parse_device_request("gpu").index, 0);
  EXPECT_EQ(parse_device_request("gpu:3").index, 3);
  for (const char* bad : {"", "GPU", "gpu:", "gpu:-1", "gpu:1x", "cuda", "gpu:99999999999"}) {
    EXPECT_THROW(parse_device_request(bad), Error) << bad;
  }
  EXPECT_FALSE(select_device(parse_device_request("cpu")).use_gpu);
  int n = 0;
  const gpu::Status s = gpu::device_count(&n);
  if (s.ok()) GTEST_SKIP() << "a GPU is present; the fallback path is not reachable here";
  const DeviceChoice c = select_device(parse_device_request("auto"));
  EXPECT_FALSE(c.use_gpu);
  EXPECT_NE(c.description.find(gpu::compiled_in() ? "found no GPU" : "no GPU support compiled in"),
            std::string::npos)
      << c.description;
  try {
    select_device(parse_device_request("gpu"));
    ADD_FAILURE() << "--device gpu without a GPU must fail";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), gpu::compiled_in() ? ErrorCode::kNotFound : ErrorCode::kUnimplemented);
  }
}

}  // namespace
}  // namespace kvplan::test
