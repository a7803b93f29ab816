#include "server/prometheus_metrics.h"

#include <iterator>

#include <fmt/format.h>

namespace kvplan::server {
namespace {

class Exposition {
 public:
  // A metric's HELP and TYPE lines, then its samples.
  Exposition& metric(const char* name, const char* type, const char* help) {
    name_ = name;
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    return *this;
  }
  Exposition& sample(double value, const std::string& labels = {}, const char* suffix = "") {
    out_ +=
        fmt::format("{}{}{} {}\n", name_, suffix, labels.empty() ? "" : "{" + labels + "}", value);
    return *this;
  }
  [[nodiscard]] std::string text() const { return out_; }

 private:
  std::string name_;
  std::string out_;
};

double d(uint64_t v) {
  return static_cast<double>(v);
}

}  // namespace

std::string prometheus_metrics(const serve::EngineCounters& c,
                               const std::map<int, uint64_t>& http_responses_by_status) {
  const RuntimeStats& rt = c.runtime;
  Exposition e;
  e.metric("kvplan_requests_total", "counter", "Generation requests accepted by the engine.")
      .sample(d(c.requests));
  e.metric("kvplan_requests_finished_total", "counter", "Generation requests ended, by reason.")
      .sample(d(c.finished_length), "reason=\"length\"")
      .sample(d(c.finished_stop), "reason=\"stop\"")
      .sample(d(c.cancelled), "reason=\"cancelled\"");
  e.metric("kvplan_prompt_tokens_total", "counter", "Prompt tokens of admitted requests.")
      .sample(d(c.restored_tokens + c.computed_tokens));
  e.metric("kvplan_prompt_tokens_restored_total", "counter",
           "Prompt tokens restored from stored prefixes instead of computed.")
      .sample(d(c.restored_tokens));
  e.metric("kvplan_prompt_tokens_computed_total", "counter", "Prompt tokens prefilled.")
      .sample(d(c.computed_tokens));
  e.metric("kvplan_recomputed_tokens_total", "counter",
           "Tokens after the stored prefix of looked-up prompts (runtime).")
      .sample(d(rt.recomputed_tokens));
  e.metric("kvplan_generated_tokens_total", "counter", "Tokens generated.")
      .sample(d(c.generated_tokens));
  e.metric("kvplan_prefix_lookups_total", "counter", "Prompts looked up in the prefix store.")
      .sample(d(rt.lookups));
  e.metric("kvplan_prefix_hits_total", "counter",
           "Stored prefix chunks found for looked-up prompts, by the tier holding them.")
      .sample(d(rt.hits_device), "tier=\"device\"")
      .sample(d(rt.hits_host), "tier=\"host\"")
      .sample(d(rt.hits_disk), "tier=\"disk\"");
  e.metric("kvplan_prefix_misses_total", "counter",
           "Lookups whose stored prefix ended before the prompt did.")
      .sample(d(rt.misses));
  e.metric("kvplan_runtime_bytes_total", "counter", "Bytes the runtime moved, by direction.")
      .sample(d(rt.bytes_device_to_host), "direction=\"device_to_host\"")
      .sample(d(rt.bytes_host_to_device), "direction=\"host_to_device\"")
      .sample(d(rt.bytes_to_disk), "direction=\"to_disk\"")
      .sample(d(rt.bytes_from_disk), "direction=\"from_disk\"");
  e.metric("kvplan_runtime_evictions_total", "counter", "Stored chunks evicted, by tier.")
      .sample(d(rt.evictions_device), "tier=\"device\"")
      .sample(d(rt.evictions_host), "tier=\"host\"")
      .sample(d(rt.evictions_disk), "tier=\"disk\"");
  e.metric("kvplan_runtime_refusals_total", "counter",
           "Stored chunks refused (corrupt, or of another plan or model) and recomputed.")
      .sample(d(rt.refusals));
  e.metric("kvplan_running_requests", "gauge", "Requests being decoded.").sample(d(c.running));
  e.metric("kvplan_waiting_requests", "gauge", "Requests waiting for KV memory.")
      .sample(d(c.waiting));
  e.metric("kvplan_kv_memory_bytes", "gauge", "KV memory of the running requests' pages.")
      .sample(d(c.kv_memory_bytes));
  e.metric("kvplan_kv_memory_used_bytes", "gauge", "KV memory reserved by running requests.")
      .sample(d(c.kv_used_bytes));
  e.metric("kvplan_kv_bytes_per_token", "gauge", "Real KV bytes per token of the plan.")
      .sample(c.bytes_per_token);
  e.metric("kvplan_ttft_seconds", "histogram", "Time from a request's arrival to its first token.");
  for (size_t b = 0; b < std::size(serve::kTtftBucketsS); ++b) {
    e.sample(d(c.ttft_buckets[b]), fmt::format("le=\"{}\"", serve::kTtftBucketsS[b]), "_bucket");
  }
  e.sample(d(c.ttft_count), "le=\"+Inf\"", "_bucket")
      .sample(c.ttft_sum_s, {}, "_sum")
      .sample(d(c.ttft_count), {}, "_count");
  e.metric("kvplan_http_responses_total", "counter", "HTTP responses, by status code.");
  for (const auto& [status, n] : http_responses_by_status) {
    e.sample(d(n), fmt::format("status=\"{}\"", status));
  }
  return e.text();
}

}  // namespace kvplan::server
