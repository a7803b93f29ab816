// build_record: what the binary says it was built with, and its JSON round trip as plan.json and
// profile.json keep it.
#include "core/build_record.h"

#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"

namespace kvplan {
namespace {

TEST(BuildRecord, NamesTheBuildsIsaCompilerAndEigen) {
  const BuildRecord b = this_build();
  EXPECT_EQ(b.isa, std::string(KVPLAN_ISA).empty() ? "compiler default" : KVPLAN_ISA);
  EXPECT_FALSE(b.vector_extensions.empty());
#if defined(__AVX2__) && defined(__FMA__)
  EXPECT_NE(b.vector_extensions.find("AVX2"), std::string::npos) << b.vector_extensions;
  EXPECT_NE(b.vector_extensions.find("FMA"), std::string::npos) << b.vector_extensions;
#endif
#ifndef __AVX512F__
  EXPECT_EQ(b.vector_extensions.find("AVX-512"), std::string::npos) << b.vector_extensions;
#endif
  EXPECT_TRUE(b.compiler.starts_with("GCC ") || b.compiler.starts_with("Clang ")) << b.compiler;
  EXPECT_TRUE(b.eigen.starts_with("3.")) << b.eigen;
}

TEST(BuildRecord, JsonRoundTripKeepsEveryField) {
  const BuildRecord b{"x86-64-v3", "AVX2 FMA", "GCC 12.2.0", "3.4.0"};
  const nlohmann::ordered_json j = build_record_to_json(b);
  EXPECT_EQ(
      json_text(j, -1),
      R"({"isa":"x86-64-v3","vector_extensions":"AVX2 FMA","compiler":"GCC 12.2.0","eigen":"3.4.0"})");
  const nlohmann::json plain(j);
  EXPECT_EQ(build_record_from_json(JsonFields(plain, "plan.json", "provenance.build")), b);
}

TEST(BuildRecord, AMistypedFieldNamesItsPath) {
  const nlohmann::json j = {{"isa", 3}};
  try {
    (void)build_record_from_json(JsonFields(j, "plan.json", "provenance.build"));
    FAIL() << "accepted a number as the ISA";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("provenance.build.isa"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kvplan
