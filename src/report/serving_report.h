// The HTML page of a `kvplan bench serve` run: the workload, a table of every configuration at
// every KV memory, the TTFT distribution of each configuration as a CDF (one chart per KV memory)
// and the memory sweep (completed requests and p95 TTFT against KV memory), drawn with PLplot like
// the plan reports; a sweep that scales the host tier with the KV memory says so on its axis.
// Self-contained: inline CSS and SVG, no script; the same data give the same bytes.
//
//   ServingReport r{.model = "SmolLM2", .workload = "8 users x 4 rounds ...", .runs = runs};
//   write_file_atomic("serve.html", serving_html(r));
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvplan::report {

struct ServingRun {
  std::string kv;  // the configuration's label
  uint64_t kv_memory_bytes = 0;
  uint64_t host_memory_bytes = 0;  // the host tier for stored prefixes; 0 = not known (HTTP)
  double bytes_per_token = 0;
  int requests = 0, completed = 0;
  double ttft_p50_s = 0, ttft_p95_s = 0, ttft_p99_s = 0, itl_mean_s = 0;
  double decode_tokens_per_s = 0;
  int64_t computed_tokens = 0, restored_tokens = 0;
  double served_mean_kl = 0, served_top1 = 0;
  int without_first_token = 0;  // requests still waiting at the end
  std::vector<double> ttft_s;   // serve::ttft_samples(): every request issued and not refused
};

struct ServingReport {
  std::string model;
  std::string workload;  // one line, as `bench serve` prints it
  std::vector<ServingRun> runs;
};

// Throws Error(kInvalidArgument) for a report without runs.
std::string serving_html(const ServingReport& report);

}  // namespace kvplan::report
