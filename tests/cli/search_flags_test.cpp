// The search flags parsed once into a pipeline::SearchRequest (no model or file read).
#include "cli/search_flags.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan::cli {
namespace {

TEST(SearchFlags, EachBudgetFlagBecomesItsRequest) {
  SearchFlags f;
  f.gpu_memory = "1GiB";
  f.context = "4K";
  f.sequences = 2;
  const pipeline::SearchRequest r = search_request_from_flags(f);
  EXPECT_EQ(r.budget.kind, BudgetRequest::Kind::kGpuMemory);
  EXPECT_EQ(r.budget.gpu_bytes, 1ull << 30);
  EXPECT_EQ(r.budget.context, 4096);
  EXPECT_EQ(r.budget.sequences, 2);

  SearchFlags bits;
  bits.max_bits = 4.5;
  EXPECT_EQ(search_request_from_flags(bits).budget.kind, BudgetRequest::Kind::kEffectiveBits);
  SearchFlags none;
  none.memory = "bits";
  EXPECT_EQ(search_request_from_flags(none).budget.unbounded_measure, MemoryMeasure::kBits);
}

TEST(SearchFlags, ConflictingOrMalformedFlagsAreRefusedBeforeAnyFileIsRead) {
  SearchFlags two;
  two.max_bits = 4;
  two.max_bytes_per_token = 100;
  EXPECT_THROW(search_request_from_flags(two), Error);
  SearchFlags no_context;
  no_context.gpu_memory = "1GiB";
  EXPECT_THROW(search_request_from_flags(no_context), Error);
  SearchFlags metric;
  metric.metric = "mse";
  EXPECT_THROW(search_request_from_flags(metric), Error);
  SearchFlags ctx;
  ctx.ctx = 8;
  EXPECT_THROW(search_request_from_flags(ctx), Error);
  SearchFlags engine;
  engine.engine = "tgi";
  EXPECT_THROW(search_request_from_flags(engine), Error);
}

TEST(SearchFlags, TextsDefaultToTheCommittedSelectionAndReportSets) {
  const pipeline::SearchRequest r = search_request_from_flags({});
  EXPECT_EQ(r.texts.selection.filename(), "selection.jsonl");
  EXPECT_EQ(r.texts.report.filename(), "report.jsonl");
  EXPECT_EQ(r.long_context.contexts, (std::vector<int>{256, 2048, 8192}));
  EXPECT_FALSE(r.stamp.created.empty());
}

}  // namespace
}  // namespace kvplan::cli
