// candidate_lists: --candidates and --formats as `kvplan profile` and `kvplan tune` parse them.
#include "profile/candidate_lists.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan {
namespace {

std::vector<std::string> names(const std::vector<KvPair>& pairs) {
  std::vector<std::string> out;
  for (const KvPair& p : pairs) out.push_back(p.name());
  return out;
}

TEST(CandidateLists, KvtunerIsTheNineJointIntPairs) {
  EXPECT_EQ(names(kvtuner_candidates()),
            (std::vector<std::string>{"KV8", "K8V4", "K8V2", "K4V8", "KV4", "K4V2", "K2V8", "K2V4",
                                      "KV2"}));
}

TEST(CandidateLists, ParseCandidates) {
  EXPECT_EQ(names(parse_candidates(" KV8, ,q8_0/q4_0 ,")),
            (std::vector<std::string>{"KV8", "q8_0/q4_0"}));
  EXPECT_THROW(parse_candidates("KV8,KV8"), Error);
  EXPECT_THROW(parse_candidates("slot:134"), Error);
  EXPECT_THROW(parse_candidates("K9V4"), Error);
  EXPECT_THROW(parse_candidates(" , "), Error);
}

TEST(CandidateLists, ParseFormatList) {
  const std::vector<Format> two = parse_format_list("int4, int8");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].name(), "int4");
  EXPECT_EQ(two[1].name(), "int8");
  const std::vector<Format> all = parse_format_list("all");
  EXPECT_EQ(all.size(), format_table().size() - 1);  // every format but f32
  for (const Format& f : all) EXPECT_NE(f.id(), FormatId::kF32);
  EXPECT_THROW(parse_format_list("int4,bogus"), Error);
  EXPECT_THROW(parse_format_list("int4,int4"), Error);
  EXPECT_THROW(parse_format_list("f32"), Error);
  EXPECT_THROW(parse_format_list(""), Error);
}

}  // namespace
}  // namespace kvplan
