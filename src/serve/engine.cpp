#include "serve/engine.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "core/error.h"

namespace kvplan::serve {

GenerationStream::Snapshot GenerationStream::snapshot() const {
  return {tokens_, finish_, prompt_tokens_, restored_tokens_};
}

GenerationStream::Snapshot GenerationStream::wait(size_t seen,
                                                  std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, timeout,
                    [&] { return tokens_.size() > seen || finish_ != FinishReason::kNone; });
  return snapshot();
}

GenerationStream::Snapshot GenerationStream::wait_finished() const {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return finish_ != FinishReason::kNone; });
  return snapshot();
}

void GenerationStream::push(int32_t token) {
  {
    std::lock_guard lock(mutex_);
    tokens_.push_back(token);
  }
  changed_.notify_all();
}

void GenerationStream::set_restored(int64_t restored) {
  std::lock_guard lock(mutex_);
  restored_tokens_ = restored;
}

void GenerationStream::finish(FinishReason reason) {
  {
    std::lock_guard lock(mutex_);
    if (finish_ == FinishReason::kNone) finish_ = reason;
  }
  changed_.notify_all();
}

Engine::Engine(const Transformer& model, const Plan& plan, const EngineOptions& options)
    : batcher_(model, plan, serving_runtime_options(plan, options.tiers), options.kv_memory_bytes),
      kv_memory_bytes_(options.kv_memory_bytes) {
  counters_.kv_memory_bytes = kv_memory_bytes_;
  counters_.bytes_per_token = batcher_.bytes_per_token();
  worker_ = std::thread([this] { run(); });
}

Engine::~Engine() {
  drain();
}

uint64_t Engine::reservation(int64_t tokens) const {
  return batcher_.reservation(tokens);
}

std::shared_ptr<GenerationStream> Engine::submit(GenerationRequest request) {
  if (request.prompt.empty()) fail(ErrorCode::kInvalidArgument, "the prompt has no tokens");
  if (request.max_tokens < 1) {
    fail(ErrorCode::kInvalidArgument, "max_tokens {}: expected >= 1", request.max_tokens);
  }
  const auto tokens = static_cast<int64_t>(request.prompt.size()) + request.max_tokens;
  const uint64_t need = batcher_.reservation(tokens);
  if (!batcher_.can_ever_fit(need)) {
    fail(ErrorCode::kResourceExhausted,
         "{} prompt + {} answer tokens need {} bytes of KV memory; the server has {}",
         request.prompt.size(), request.max_tokens, need, kv_memory_bytes_);
  }
  auto stream = std::make_shared<GenerationStream>();
  stream->prompt_tokens_ = static_cast<int64_t>(request.prompt.size());
  {
    std::lock_guard lock(mutex_);
    if (draining_) fail(ErrorCode::kResourceExhausted, "the server is shutting down");
    ++counters_.requests;
    counters_.prompt_tokens += request.prompt.size();
    ++counters_.waiting;
    queue_.push_back({std::move(request), stream, need, Clock::now()});
  }
  work_.notify_one();
  return stream;
}

void Engine::drain() {
  {
    std::lock_guard lock(mutex_);
    draining_ = true;
  }
  work_.notify_one();
  if (worker_.joinable()) worker_.join();
}

EngineCounters Engine::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void Engine::finish(Active& a, FinishReason reason) {
  batcher_.release(a.id);
  {
    std::lock_guard lock(mutex_);
    counters_.kv_used_bytes = batcher_.used_bytes();
    switch (reason) {
      case FinishReason::kLength:
        ++counters_.finished_length;
        break;
      case FinishReason::kStop:
        ++counters_.finished_stop;
        break;
      default:
        ++counters_.cancelled;
        break;
    }
  }
  // Counted before the caller hears of it.
  a.pending.stream->finish(reason);
}

bool Engine::deliver(Active& a, int32_t token) {
  const std::vector<int32_t>& stops = a.pending.request.stop_ids;
  if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
    finish(a, FinishReason::kStop);
    return false;
  }
  a.pending.stream->push(token);
  a.last = token;
  ++a.generated;
  {
    std::lock_guard lock(mutex_);
    ++counters_.generated_tokens;
  }
  if (a.generated >= a.pending.request.max_tokens) {
    finish(a, FinishReason::kLength);
    return false;
  }
  return true;
}

void Engine::admit_waiting(std::unique_lock<std::mutex>& lock) {
  while (!queue_.empty()) {
    if (queue_.front().stream->cancelled()) {
      queue_.front().stream->finish(FinishReason::kCancelled);
      queue_.pop_front();
      --counters_.waiting;
      ++counters_.cancelled;
      continue;
    }
    if (!batcher_.fits(queue_.front().reserved)) return;  // first come, first served
    Active a{std::move(queue_.front()), 0, Sampler({}), 0, 0};
    queue_.pop_front();
    --counters_.waiting;
    a.sampler = Sampler(a.pending.request.sampling);
    lock.unlock();
    Batcher::Prefilled p;
    try {
      p = batcher_.admit(a.pending.request.prompt, a.pending.reserved);
    } catch (const std::exception& e) {
      // A prompt the model cannot take fails that request only.
      spdlog::error("serve: a request's prefill failed: {}", e.what());
      a.pending.stream->finish(FinishReason::kCancelled);
      lock.lock();
      ++counters_.cancelled;
      continue;
    }
    a.id = p.id;
    const double ttft = std::chrono::duration<double>(Clock::now() - a.pending.submitted).count();
    const auto restored = static_cast<int64_t>(p.restore.tokens);
    a.pending.stream->set_restored(restored);
    const bool goes_on = deliver(a, a.sampler.next(p.logits));
    lock.lock();
    counters_.restored_tokens += static_cast<uint64_t>(restored);
    counters_.computed_tokens += a.pending.request.prompt.size() - static_cast<uint64_t>(restored);
    ++counters_.ttft_count;
    counters_.ttft_sum_s += ttft;
    for (size_t b = 0; b < std::size(kTtftBucketsS); ++b) {
      counters_.ttft_buckets[b] += ttft <= kTtftBucketsS[b];
    }
    counters_.kv_used_bytes = batcher_.used_bytes();
    counters_.runtime = batcher_.runtime_stats();
    if (goes_on) running_.push_back(std::move(a));
    counters_.running = running_.size();
  }
}

void Engine::decode_step(std::unique_lock<std::mutex>& lock) {
  // Requests whose client is gone leave before the step.
  std::vector<Active> kept;
  for (Active& a : running_) {
    if (a.pending.stream->cancelled()) {
      lock.unlock();
      finish(a, FinishReason::kCancelled);
      lock.lock();
    } else {
      kept.push_back(std::move(a));
    }
  }
  running_ = std::move(kept);
  counters_.running = running_.size();
  if (running_.empty()) return;
  std::vector<Batcher::StepToken> tokens;
  for (const Active& a : running_) tokens.push_back({a.id, a.last});
  lock.unlock();
  // Only this thread changes running_, so it is read without the lock during the compute.
  const RowMatrix logits = batcher_.step(tokens);
  std::vector<bool> goes_on(running_.size());
  for (size_t i = 0; i < running_.size(); ++i) {
    const auto row = logits.row(static_cast<Eigen::Index>(i));
    goes_on[i] = deliver(running_[i], running_[i].sampler.next(row));
  }
  lock.lock();
  std::vector<Active> still;
  for (size_t i = 0; i < running_.size(); ++i) {
    if (goes_on[i]) still.push_back(std::move(running_[i]));
  }
  running_ = std::move(still);
  counters_.running = running_.size();
  counters_.kv_used_bytes = batcher_.used_bytes();
}

void Engine::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    work_.wait(lock, [&] { return !queue_.empty() || !running_.empty() || draining_; });
    if (queue_.empty() && running_.empty()) return;  // draining, nothing left
    try {
      admit_waiting(lock);
      decode_step(lock);
    } catch (const std::exception& e) {
      // A failure of the compute fails the requests in flight, not the server.
      spdlog::error("serve: {}", e.what());
      if (!lock.owns_lock()) lock.lock();
      for (Active& a : running_) {
        a.pending.stream->finish(FinishReason::kCancelled);
        batcher_.release(a.id);
        ++counters_.cancelled;
      }
      running_.clear();
      counters_.running = 0;
      counters_.kv_used_bytes = batcher_.used_bytes();
    }
  }
}

}  // namespace kvplan::serve
