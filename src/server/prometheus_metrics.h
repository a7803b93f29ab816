// The serving counters as Prometheus' text exposition format (version 0.0.4): the engine's
// requests and tokens, prefix hits per runtime tier, bytes the runtime moved, recomputed tokens,
// KV memory in use, the time-to-first-token histogram, and the HTTP answers by status.
//
//   std::string text = prometheus_metrics(engine.counters(), http_statuses);
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "serve/engine.h"

namespace kvplan::server {

std::string prometheus_metrics(const serve::EngineCounters& c,
                               const std::map<int, uint64_t>& http_responses_by_status);

}  // namespace kvplan::server
