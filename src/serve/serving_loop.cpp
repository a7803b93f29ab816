#include "serve/serving_loop.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <memory>
#include <queue>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "model/greedy.h"
#include "model/next_token_kl.h"
#include "serve/batcher.h"

namespace kvplan::serve {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

struct Arrival {
  double at_s = 0;
  int user = 0;
  int round = 0;
  bool operator>(const Arrival& o) const { return at_s != o.at_s ? at_s > o.at_s : user > o.user; }
};

// A request being served.
struct Running {
  size_t record = 0;
  Batcher::SequenceId id = 0;
  std::vector<int32_t> generated;
  bool sampled = false;
  std::vector<Eigen::RowVectorXf> served;  // sampled: each answer position's logits
};

RuntimeOptions runtime_options(const Plan& plan, const Workload& w, const ServeOptions& o) {
  return serving_runtime_options(plan, {.chunk_tokens = o.chunk_tokens,
                                        .longest_prompt_tokens = longest_prompt_tokens(w),
                                        .host_memory_bytes = o.host_memory_bytes,
                                        .disk_dir = o.disk_dir,
                                        .disk_bytes = o.disk_bytes});
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100 * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

// KL(exact || served) and argmax agreement of a sampled request's answer positions: the exact-KV
// model given the prompt and the served tokens.
void add_quality(const Transformer& model, const std::vector<int32_t>& prompt, const Running& seq,
                 ServeResult& r, double& kl_sum, int64_t& top1) {
  std::vector<int32_t> tokens = prompt;
  tokens.insert(tokens.end(), seq.generated.begin(), seq.generated.end() - 1);
  KvCache exact(model.config(), KvCacheOptions::exact_kv());
  const RowMatrix logits =
      model.forward(tokens, exact, nullptr, {.logits_from_row = prompt.size() - 1});
  for (size_t j = 0; j < seq.served.size(); ++j) {
    const auto p = logits.row(static_cast<Eigen::Index>(j));
    const LogitSummary ps = summarize_logits(p), qs = summarize_logits(seq.served[j]);
    kl_sum += next_token_kl(p, ps, seq.served[j], qs);
    top1 += ps.argmax == qs.argmax;
    ++r.quality_positions;
  }
}

}  // namespace

ServeResult run_serving(const Transformer& model, const Plan& plan, const std::string& label,
                        const Workload& w, const ServeOptions& o) {
  Batcher batcher(model, plan, runtime_options(plan, w, o), o.kv_memory_bytes);
  ServeResult r;
  r.label = label;
  r.bytes_per_token = batcher.bytes_per_token();
  const int64_t answer = w.options.answer_tokens;

  std::priority_queue<Arrival, std::vector<Arrival>, std::greater<>> arrivals;
  for (int u = 0; u < w.options.users; ++u) arrivals.push({w.user_start_s[u], u, 0});
  std::deque<size_t> waiting;
  std::vector<Running> running;
  double now = 0, kl_sum = 0;
  int64_t top1 = 0;
  int sampled = 0;
  const auto stopped = [&] { return o.duration_s > 0 && now >= o.duration_s; };

  while (!stopped()) {
    while (!arrivals.empty() && arrivals.top().at_s <= now) {
      const Arrival a = arrivals.top();
      arrivals.pop();
      RequestRecord rec;
      rec.user = a.user;
      rec.round = a.round;
      rec.arrival_s = a.at_s;
      rec.prompt_tokens = static_cast<int64_t>(w.turn(a.user, a.round).prompt.size());
      r.requests.push_back(rec);
      waiting.push_back(r.requests.size() - 1);
    }
    // Admission, first come first served: the head waits until the running ones leave room.
    while (!waiting.empty() && !stopped()) {
      RequestRecord& rec = r.requests[waiting.front()];
      const Turn& turn = w.turn(rec.user, rec.round);
      const uint64_t need = batcher.reservation(static_cast<int64_t>(turn.prompt.size()) + answer);
      if (!batcher.can_ever_fit(need)) {
        rec.rejected = true;  // the user's conversation ends here
        waiting.pop_front();
        continue;
      }
      if (!batcher.fits(need)) break;
      waiting.pop_front();
      Running seq;
      seq.record = static_cast<size_t>(&rec - r.requests.data());
      seq.sampled = sampled < o.quality_samples;
      sampled += seq.sampled;
      rec.admitted_s = now;
      const auto start = Clock::now();
      const Batcher::Prefilled prefilled = batcher.admit(turn.prompt, need);
      now += seconds_since(start);
      seq.id = prefilled.id;
      rec.restored_tokens = static_cast<int64_t>(prefilled.restore.tokens);
      rec.computed_tokens = rec.prompt_tokens - rec.restored_tokens;
      rec.first_token_s = now;
      rec.token_s.push_back(now);
      seq.generated.push_back(greedy_token(prefilled.logits));
      if (seq.sampled) seq.served.push_back(prefilled.logits);
      running.push_back(std::move(seq));
      r.most_running = std::max(r.most_running, static_cast<int>(running.size()));
    }
    if (stopped()) break;
    if (running.empty()) {
      if (arrivals.empty()) break;  // (waiting is empty too: its head would have been admitted)
      now = std::max(now, arrivals.top().at_s);
      continue;
    }
    // One decode step of every running request that still has tokens to generate.
    std::vector<Batcher::StepToken> tokens;
    std::vector<Running*> stepping;
    for (Running& seq : running) {
      if (static_cast<int64_t>(seq.generated.size()) >= answer) continue;
      tokens.push_back({seq.id, seq.generated.back()});
      stepping.push_back(&seq);
    }
    if (!stepping.empty()) {
      const auto start = Clock::now();
      const RowMatrix logits = batcher.step(tokens);
      now += seconds_since(start);
      for (size_t i = 0; i < stepping.size(); ++i) {
        Running& seq = *stepping[i];
        const auto row = logits.row(static_cast<Eigen::Index>(i));
        seq.generated.push_back(greedy_token(row));
        if (seq.sampled) seq.served.push_back(row);
        r.requests[seq.record].token_s.push_back(now);
      }
    }
    // Finished requests leave (their prompt's chunks were stored as they were computed); the user
    // comes back later.
    for (auto it = running.begin(); it != running.end();) {
      if (static_cast<int64_t>(it->generated.size()) < answer) {
        ++it;
        continue;
      }
      RequestRecord& rec = r.requests[it->record];
      const Turn& turn = w.turn(rec.user, rec.round);
      rec.finished_s = now;
      rec.completed = true;
      batcher.release(it->id);
      if (it->sampled) add_quality(model, turn.prompt, *it, r, kl_sum, top1);
      if (rec.round + 1 < w.options.rounds) {
        arrivals.push({now + w.options.think_time_s, rec.user, rec.round + 1});
      }
      it = running.erase(it);
    }
  }
  r.end_s = o.duration_s > 0 ? std::min(now, o.duration_s) : now;
  r.runtime = batcher.runtime_stats();
  if (r.quality_positions > 0) {
    r.served_mean_kl = kl_sum / static_cast<double>(r.quality_positions);
    r.served_top1 = static_cast<double>(top1) / static_cast<double>(r.quality_positions);
  }
  return r;
}

std::vector<double> ttft_samples(const ServeResult& r) {
  std::vector<double> ttft;
  for (const RequestRecord& rec : r.requests) {
    if (rec.rejected) continue;
    ttft.push_back((rec.first_token_s >= 0 ? rec.first_token_s : r.end_s) - rec.arrival_s);
  }
  return ttft;
}

ServeSummary summarize(const ServeResult& r) {
  ServeSummary s;
  std::vector<double> itl;
  int64_t generated = 0;
  for (const RequestRecord& rec : r.requests) {
    ++s.requests;
    s.rejected += rec.rejected;
    s.completed += rec.completed;
    s.without_first_token += !rec.rejected && rec.first_token_s < 0;
    s.computed_tokens += rec.computed_tokens;
    s.restored_tokens += rec.restored_tokens;
    generated += static_cast<int64_t>(rec.token_s.size());
    for (size_t i = 1; i < rec.token_s.size(); ++i) {
      itl.push_back(rec.token_s[i] - rec.token_s[i - 1]);
    }
  }
  const std::vector<double> ttft = ttft_samples(r);
  s.ttft_p50_s = percentile(ttft, 50);
  s.ttft_p95_s = percentile(ttft, 95);
  s.ttft_p99_s = percentile(ttft, 99);
  double itl_sum = 0;
  for (const double x : itl) itl_sum += x;
  s.itl_mean_s = itl.empty() ? 0 : itl_sum / static_cast<double>(itl.size());
  s.itl_p95_s = percentile(itl, 95);
  s.decode_tokens_per_s = r.end_s > 0 ? static_cast<double>(generated) / r.end_s : 0;
  return s;
}

}  // namespace kvplan::serve
