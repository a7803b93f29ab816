// Byte-identity of the int, FP8 and iq4_nl formats with an independent implementation: expected
// bytes come from scripts/fixtures/gen-kv-golden.py (Python written from the format definitions,
// not from src/formats/kv_format_math.h) into data/kv_golden.json. Inputs are regenerated here from
// the script's LCG and must match the stored f32 bits, so both sides quantize the same floats.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "formats/format_size.h"
#include "formats/kv_row_format.h"
#include "formats/pack.h"
#include "hex.h"

namespace kvplan {
namespace {

using nlohmann::json;

using test::to_hex;

uint32_t bits_of(float v) {
  uint32_t u;
  std::memcpy(&u, &v, sizeof u);
  return u;
}

float from_bits(uint32_t u) {
  float v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// gen-kv-golden.py's generator: every value is an integer times a power of two, so ldexp is exact.
class Lcg {
 public:
  Lcg(uint32_t seed, uint32_t a, uint32_t c) : state_(seed), a_(a), c_(c) {}
  uint32_t next() { return state_ = state_ * a_ + c_; }

 private:
  uint32_t state_, a_, c_;
};

// v, or the next float down (how 1) or up (how 2).
float nudge(float v, uint32_t how) {
  if (how == 0) return v;
  return std::nextafter(v, how == 1 ? -INFINITY : INFINITY);
}

std::vector<float> generate(const json& g, uint32_t a, uint32_t c) {
  Lcg rng(g.at("seed").get<uint32_t>(), a, c);
  const int n = g.at("n").get<int>();
  const std::string kind = g.at("kind").get<std::string>();
  std::vector<float> x;
  int64_t lo_units = 0, s_units = 0;  // neartie: the group's minimum and step, in 2^-11
  for (int i = 0; i < n; ++i) {
    if (kind == "uniform") {
      const int64_t u = rng.next() >> (32 - g.at("bits").get<int>());
      x.push_back(std::ldexp(static_cast<float>(u + g.at("offset").get<int64_t>()),
                             g.at("exp").get<int>()));
    } else if (kind == "wide") {
      const int64_t m = static_cast<int64_t>(rng.next() >> 8) - (int64_t{1} << 23);
      const int emin = g.at("emin").get<int>(), emax = g.at("emax").get<int>();
      const int e =
          emin + static_cast<int>((rng.next() >> 16) % static_cast<uint32_t>(emax - emin + 1));
      x.push_back(std::ldexp(static_cast<float>(m), e - 23));
    } else if (kind == "grid") {
      const int count = g.at("count").get<int>();
      int j = static_cast<int>((rng.next() >> 8) % static_cast<uint32_t>(count + 1));
      if (i % 32 == 0) j = 0;
      if (i % 32 == 1) j = count;
      x.push_back(std::ldexp(static_cast<float>(2 * j - count), g.at("exp").get<int>() - 1));
    } else if (kind == "fp8ties") {
      const int m = 2 * static_cast<int>((rng.next() >> 8) % 32) + 1;
      const uint32_t r = rng.next();
      const int emin = g.at("emin").get<int>(), emax = g.at("emax").get<int>();
      const int e = emin + static_cast<int>((r >> 16) % static_cast<uint32_t>(emax - emin + 1));
      x.push_back(std::ldexp(static_cast<float>(((r >> 8) & 1) ? -m : m), e));
    } else if (kind == "neartie") {
      if (i % 32 == 0) {
        lo_units = -static_cast<int64_t>((rng.next() >> 8) % 512) * 128;
        s_units = 2 * (1024 + static_cast<int64_t>((rng.next() >> 8) % 1024));
      }
      const uint32_t r = rng.next();
      const int64_t levels = g.at("levels").get<int64_t>();
      int64_t units = lo_units + (2 * ((r >> 8) % levels) + 1) * s_units / 2;
      if (i % 32 == 0) units = lo_units;
      if (i % 32 == 1) units = lo_units + levels * s_units;
      x.push_back(
          nudge(std::ldexp(static_cast<float>(units), -11), i % 32 > 1 ? (r >> 20) % 3 : 0));
    } else if (kind == "iq4mid") {
      const uint32_t r = rng.next();
      const int k = 1 + static_cast<int>((r >> 8) % 30);
      int twice =
          k % 2 == 0 ? 2 * kIq4NlValues[k / 2] : kIq4NlValues[k / 2] + kIq4NlValues[k / 2 + 1];
      if (i % 32 == 0) twice = -254;
      x.push_back(nudge(std::ldexp(static_cast<float>(twice), -3), i % 32 > 0 ? (r >> 20) % 3 : 0));
    } else {
      ADD_FAILURE() << "unknown generator kind " << kind;
      return {};
    }
  }
  for (int i = 0; i < g.value("zero_prefix", 0); ++i) x[static_cast<size_t>(i)] = 0.0f;
  return x;
}

json load_golden() {
  std::ifstream in(std::string(KVPLAN_SOURCE_DIR) + "/tests/formats/data/kv_golden.json");
  EXPECT_TRUE(in) << "missing tests/formats/data/kv_golden.json";
  return in ? json::parse(in) : json();
}

TEST(KvGolden, GeneratorReproducesTheStoredInputs) {
  const json golden = load_golden();
  const uint32_t a = golden.at("lcg").at("a"), c = golden.at("lcg").at("c");
  int generated = 0;
  for (const json& cs : golden.at("cases")) {
    const json& g = cs.at("generator");
    if (g.at("kind") == "literal") continue;
    const std::vector<float> x = generate(g, a, c);
    const auto stored = cs.at("input_f32_bits").get<std::vector<uint32_t>>();
    ASSERT_EQ(x.size(), stored.size()) << cs.at("name");
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(bits_of(x[i]), stored[i]) << cs.at("name") << " value " << i;
    }
    ++generated;
  }
  EXPECT_GE(generated, 10);
}

// Both host paths: pack_row (src/formats) and the per-unit dispatch the GPU kernels run
// (src/formats/kv_row_format.h), compiled here for the CPU.
TEST(KvGolden, IntFp8AndIq4NlBytesMatchTheIndependentImplementation) {
  const json golden = load_golden();
  int checked = 0;
  std::vector<std::string> formats_seen;
  for (const json& cs : golden.at("cases")) {
    std::vector<float> x;
    for (uint32_t b : cs.at("input_f32_bits").get<std::vector<uint32_t>>())
      x.push_back(from_bits(b));
    for (const json& e : cs.at("expected")) {
      const std::string name = e.at("format");
      const Format f = Format::parse(name);
      PackOptions opt{.group_size = e.at("group_size").get<size_t>()};
      if (e.contains("fp8_scale_bits")) opt.fp8_scale = from_bits(e.at("fp8_scale_bits"));
      const std::string where = cs.at("name").get<std::string>() + " " + name + " group " +
                                std::to_string(opt.group_size) + " fp8_scale " +
                                std::to_string(opt.fp8_scale);

      std::vector<uint8_t> out(packed_row_bytes(f, x.size(), opt.group_size), 0xAB);
      pack_row(f, x, out, opt);
      EXPECT_EQ(to_hex(out), e.at("hex").get<std::string>()) << where;

      RowFormat rf;
      ASSERT_TRUE(make_row_format(static_cast<uint16_t>(f.id()), static_cast<int>(x.size()),
                                  static_cast<int>(opt.group_size), &rf))
          << where;
      std::vector<uint8_t> unit_out(static_cast<size_t>(rf.row_bytes), 0xCD);
      for (int u = 0; u < rf.n_units; ++u) {
        quantize_row_unit(rf, x.data(), u, unit_out.data(), opt.fp8_scale);
      }
      EXPECT_EQ(to_hex(unit_out), e.at("hex").get<std::string>()) << where << " (unit dispatch)";
      ++checked;
      if (std::find(formats_seen.begin(), formats_seen.end(), name) == formats_seen.end()) {
        formats_seen.push_back(name);
      }
    }
  }
  EXPECT_GE(checked, 200);
  // int8/int4/int2 (plan group and g64/g128), iq4_nl, fp8_e4m3, fp8_e5m2.
  EXPECT_EQ(formats_seen.size(), 12u);
}

}  // namespace
}  // namespace kvplan
