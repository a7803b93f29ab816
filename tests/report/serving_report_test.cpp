// The bench serve page: a table row per run, a TTFT CDF per KV memory, the sweep charts when
// there are several memories, escaped labels, the host tier when the sweep scales it, and the
// same bytes for the same data.
#include "report/serving_report.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "core/error.h"

namespace kvplan::report {
namespace {

ServingReport sample() {
  ServingReport r{.model = "tiny <model>", .workload = "2 users x 2 rounds", .runs = {}};
  for (const uint64_t memory : {uint64_t{1} << 20, uint64_t{4} << 20}) {
    for (const char* kv : {"bf16/bf16", "plan:plan.json"}) {
      ServingRun run;
      run.kv = kv;
      run.kv_memory_bytes = memory;
      run.bytes_per_token = 100;
      run.requests = 4;
      run.completed = memory > (1u << 20) ? 4 : 2;
      run.ttft_s = {0.5, 1.5, 0.25, 2.0};
      run.ttft_p95_s = 2.0;
      r.runs.push_back(run);
    }
  }
  return r;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ServingReport, TableChartsAndTheSameBytes) {
  const std::string html = serving_html(sample());
  EXPECT_EQ(count(html, "<tr><td>"), 4u);
  EXPECT_NE(html.find("<th>waiting at the end</th>"), std::string::npos);
  EXPECT_EQ(count(html, "<svg"), 2u + 2u);  // a CDF per memory, two sweep charts
  EXPECT_NE(html.find("TTFT distribution at 1.00 MiB of KV memory"), std::string::npos);
  EXPECT_NE(html.find("tiny &lt;model&gt;"), std::string::npos);
  EXPECT_EQ(html.find("tiny <model>"), std::string::npos);
  EXPECT_EQ(serving_html(sample()), html);

  ServingReport one = sample();
  one.runs.resize(2);  // one memory: no sweep
  EXPECT_EQ(count(serving_html(one), "<svg"), 1u);
  EXPECT_THROW(serving_html({}), Error);
}

// Text as PLplot's SVG writes it: every character as a hexadecimal entity.
std::string svg_text(const std::string& text) {
  std::string out;
  for (const char c : text) out += fmt::format("&#x{:x};", static_cast<unsigned char>(c));
  return out;
}

TEST(ServingReport, AHostTierScaledWithTheKvMemoryIsShown) {
  const std::string axis = svg_text("KV memory (MiB), host tier scaled with it");
  ServingReport r = sample();
  EXPECT_EQ(serving_html(r).find(axis), std::string::npos);
  EXPECT_NE(serving_html(r).find(svg_text("KV memory (MiB)")), std::string::npos);
  EXPECT_NE(serving_html(r).find(svg_text("fraction of requests issued")), std::string::npos);
  for (ServingRun& run : r.runs) run.host_memory_bytes = 8 * run.kv_memory_bytes;
  const std::string html = serving_html(r);
  EXPECT_NE(html.find("TTFT distribution at 1.00 MiB of KV memory, 8.00 MiB host tier"),
            std::string::npos);
  EXPECT_NE(html.find("<td>32.0 MiB</td>"), std::string::npos);
  EXPECT_NE(html.find(axis), std::string::npos);
}

}  // namespace
}  // namespace kvplan::report
