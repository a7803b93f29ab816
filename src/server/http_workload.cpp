#include "server/http_workload.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <mutex>
#include <thread>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace kvplan::server {
namespace {

using Clock = std::chrono::steady_clock;
using Metrics = std::map<std::string, double>;

httplib::Client client(const std::string& url) {
  httplib::Client c(url);
  c.set_read_timeout(std::chrono::seconds(600));
  c.set_connection_timeout(std::chrono::seconds(10));
  return c;
}

std::string get(const std::string& url, const std::string& path) {
  httplib::Client c = client(url);
  const httplib::Result r = c.Get(path);
  if (!r || r->status != 200) {
    fail(ErrorCode::kIo, "{}{}: no answer from a kvplan server ({})", url, path,
         r ? std::to_string(r->status) : httplib::to_string(r.error()));
  }
  return r->body;
}

Metrics metrics(const std::string& url) {
  Metrics m;
  const std::string text = get(url, "/metrics");
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    at = end + 1;
    const size_t space = line.rfind(' ');
    if (line.empty() || line[0] == '#' || space == std::string::npos) continue;
    m[line.substr(0, space)] = std::stod(line.substr(space + 1));
  }
  return m;
}

double seconds(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// One streamed completion of `turn`; fills the record's times and token counts.
void run_request(httplib::Client& http, const std::string& model, const serve::Turn& turn,
                 int64_t answer, Clock::time_point start, double duration_s,
                 serve::RequestRecord& rec) {
  const nlohmann::json body{{"model", model},
                            {"prompt", turn.prompt},
                            {"max_tokens", answer},
                            {"temperature", 0},
                            {"ignore_eos", true},
                            {"stream", true},
                            {"stream_options", {{"include_usage", true}}}};
  std::string pending;
  bool finished = false, past_deadline = false;
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    const Clock::time_point now = Clock::now();
    const double t = seconds(start, now);
    if (duration_s > 0 && t >= duration_s) {
      past_deadline = true;
      return false;  // the run is over: this request is not completed
    }
    pending.append(data, n);
    for (size_t end; (end = pending.find("\n\n")) != std::string::npos;) {
      const std::string event = pending.substr(0, end);
      pending.erase(0, end + 2);
      if (!event.starts_with("data: ") || event == "data: [DONE]") continue;
      const nlohmann::json j = nlohmann::json::parse(event.substr(6), nullptr, false);
      if (j.is_discarded()) continue;
      if (j.contains("usage") && j["usage"].is_object()) {
        rec.restored_tokens = j["usage"]["prompt_tokens_details"].value("cached_tokens", 0);
        rec.computed_tokens = rec.prompt_tokens - rec.restored_tokens;
      }
      if (!j.contains("choices") || j["choices"].empty()) continue;
      const nlohmann::json& choice = j["choices"][0];
      if (!choice.value("text", std::string()).empty()) {
        if (rec.first_token_s < 0) rec.first_token_s = t;
        rec.token_s.push_back(t);
      }
      if (choice.contains("finish_reason") && !choice["finish_reason"].is_null()) finished = true;
    }
    return true;
  };
  const httplib::Result r = http.send(req);
  if (r && r->status == 400) {
    rec.rejected = true;  // it can never fit the server's KV memory
    return;
  }
  if (!past_deadline && r && r->status == 200 && finished) {
    rec.finished_s = seconds(start, Clock::now());
    rec.completed = true;
  }
}

}  // namespace

HttpServerInfo http_server_info(const std::string& url) {
  HttpServerInfo info;
  const nlohmann::json models = nlohmann::json::parse(get(url, "/v1/models"), nullptr, false);
  if (models.is_discarded() || !models.contains("data") || models["data"].empty()) {
    fail(ErrorCode::kIo, "{}/v1/models: not a model list", url);
  }
  info.model = models["data"][0].value("id", "");
  const Metrics m = metrics(url);
  const auto value = [&](const char* name) {
    const auto it = m.find(name);
    if (it == m.end()) fail(ErrorCode::kIo, "{}/metrics: no {} (not a kvplan server?)", url, name);
    return it->second;
  };
  info.kv_memory_bytes = static_cast<uint64_t>(value("kvplan_kv_memory_bytes"));
  info.bytes_per_token = value("kvplan_kv_bytes_per_token");
  return info;
}

serve::ServeResult drive_workload_over_http(const std::string& url, const serve::Workload& w,
                                            double duration_s) {
  const HttpServerInfo info = http_server_info(url);
  const Metrics before = metrics(url);
  const Clock::time_point start = Clock::now();
  std::vector<std::vector<serve::RequestRecord>> per_user(static_cast<size_t>(w.options.users));
  std::vector<std::thread> users;
  for (int u = 0; u < w.options.users; ++u) {
    users.emplace_back([&, u] {
      httplib::Client http = client(url);
      double next = w.user_start_s[static_cast<size_t>(u)];
      for (int round = 0; round < w.options.rounds; ++round) {
        if (duration_s > 0 && next >= duration_s) break;
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(next)));
        serve::RequestRecord rec;
        rec.user = u;
        rec.round = round;
        rec.arrival_s = next;
        const serve::Turn& turn = w.turn(u, round);
        rec.prompt_tokens = static_cast<int64_t>(turn.prompt.size());
        rec.computed_tokens = rec.prompt_tokens;  // until the usage says what was restored
        run_request(http, info.model, turn, w.options.answer_tokens, start, duration_s, rec);
        per_user[static_cast<size_t>(u)].push_back(rec);
        if (!rec.completed) break;  // rejected, or the run ended
        next = rec.finished_s + w.options.think_time_s;
      }
    });
  }
  for (std::thread& t : users) t.join();
  serve::ServeResult r;
  r.label = "http:" + (url.starts_with("http://") ? url.substr(7) : url);
  r.bytes_per_token = info.bytes_per_token;
  for (auto& records : per_user) {
    for (serve::RequestRecord& rec : records) r.requests.push_back(std::move(rec));
  }
  std::stable_sort(r.requests.begin(), r.requests.end(),
                   [](const auto& a, const auto& b) { return a.arrival_s < b.arrival_s; });
  const double end = seconds(start, Clock::now());
  r.end_s = duration_s > 0 ? std::min(end, duration_s) : end;
  const Metrics after = metrics(url);
  const auto delta = [&](const std::string& name) {
    const auto a = after.find(name), b = before.find(name);
    return static_cast<uint64_t>((a == after.end() ? 0 : a->second) -
                                 (b == before.end() ? 0 : b->second));
  };
  r.runtime.hits_device = delta("kvplan_prefix_hits_total{tier=\"device\"}");
  r.runtime.hits_host = delta("kvplan_prefix_hits_total{tier=\"host\"}");
  r.runtime.hits_disk = delta("kvplan_prefix_hits_total{tier=\"disk\"}");
  r.runtime.bytes_host_to_device =
      delta("kvplan_runtime_bytes_total{direction=\"host_to_device\"}");
  r.runtime.bytes_device_to_host =
      delta("kvplan_runtime_bytes_total{direction=\"device_to_host\"}");
  r.runtime.bytes_to_disk = delta("kvplan_runtime_bytes_total{direction=\"to_disk\"}");
  r.runtime.bytes_from_disk = delta("kvplan_runtime_bytes_total{direction=\"from_disk\"}");
  return r;
}

}  // namespace kvplan::server
