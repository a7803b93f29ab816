// A serve::Workload sent to a running `kvplan serve` over HTTP, as `kvplan bench serve` serves it
// in process: one client thread per user, the user's first question at its start time and each
// next one a think time after the previous answer; every request a streamed /v1/completions of
// the turn's token ids, greedy, `max_tokens` = the workload's answer tokens and `ignore_eos` (so
// every configuration generates the same count). Times are the client's wall clock from the
// start: TTFT is what an HTTP client sees, the in-process loop's compute plus the HTTP path.
//
//   ServeResult r = drive_workload_over_http("http://127.0.0.1:8080", workload, 60);
//   ServeSummary s = serve::summarize(r);
#pragma once

#include <string>

#include "serve/serving_loop.h"
#include "serve/workload.h"

namespace kvplan::server {

struct HttpServerInfo {
  std::string model;  // the id /v1/models lists first
  uint64_t kv_memory_bytes = 0;
  double bytes_per_token = 0;
};

// Reads /v1/models and /metrics. Throws Error(kIo) when the server does not answer.
HttpServerInfo http_server_info(const std::string& url);

// Runs the workload against the server; `duration_s` > 0 ends the run then (requests not finished
// by then are not completed). The result's runtime hits are the server's /metrics deltas.
serve::ServeResult drive_workload_over_http(const std::string& url, const serve::Workload& workload,
                                            double duration_s);

}  // namespace kvplan::server
