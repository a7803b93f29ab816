#include "server/prometheus_metrics.h"

#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace kvplan::server {
namespace {

TEST(PrometheusMetrics, WritesTheExpositionFormat) {
  serve::EngineCounters c;
  c.requests = 3;
  c.finished_length = 2;
  c.cancelled = 1;
  c.restored_tokens = 64;
  c.computed_tokens = 10;
  c.runtime.hits_host = 2;
  c.runtime.bytes_host_to_device = 4096;
  c.ttft_count = 3;
  c.ttft_sum_s = 0.75;
  c.ttft_buckets[1] = 1;  // <= 0.1 s
  c.ttft_buckets[2] = 3;
  c.kv_memory_bytes = 1 << 20;
  const std::string text = prometheus_metrics(c, {{200, 5}, {400, 1}});
  for (const char* line :
       {"# TYPE kvplan_requests_total counter", "kvplan_requests_total 3",
        "kvplan_requests_finished_total{reason=\"length\"} 2",
        "kvplan_requests_finished_total{reason=\"cancelled\"} 1", "kvplan_prompt_tokens_total 74",
        "kvplan_prompt_tokens_restored_total 64", "kvplan_prefix_hits_total{tier=\"host\"} 2",
        "kvplan_runtime_bytes_total{direction=\"host_to_device\"} 4096",
        "kvplan_kv_memory_bytes 1048576", "# TYPE kvplan_ttft_seconds histogram",
        "kvplan_ttft_seconds_bucket{le=\"0.1\"} 1", "kvplan_ttft_seconds_bucket{le=\"0.25\"} 3",
        "kvplan_ttft_seconds_bucket{le=\"+Inf\"} 3", "kvplan_ttft_seconds_sum 0.75",
        "kvplan_ttft_seconds_count 3", "kvplan_http_responses_total{status=\"400\"} 1"}) {
    EXPECT_NE(text.find(std::string(line) + "\n"), std::string::npos) << line;
  }
  // Every sample line is `name{labels} value`; every metric has HELP and TYPE.
  std::istringstream lines(text);
  std::string line;
  int help = 0, type = 0;
  while (std::getline(lines, line)) {
    help += line.starts_with("# HELP ");
    type += line.starts_with("# TYPE ");
    if (!line.starts_with("#")) {
      EXPECT_TRUE(line.starts_with("kvplan_")) << line;
      EXPECT_EQ(std::count(line.begin(), line.end(), ' '), 1) << line;
    }
  }
  EXPECT_EQ(help, type);
  EXPECT_GT(help, 15);
}

}  // namespace
}  // namespace kvplan::server
