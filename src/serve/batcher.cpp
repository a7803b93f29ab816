#include "serve/batcher.h"

#include <algorithm>

#include "core/error.h"
#include "formats/kv_bytes.h"
#include "runtime/plan_layout.h"

namespace kvplan::serve {

RuntimeOptions serving_runtime_options(const Plan& plan, const ServingTiers& t) {
  const PlanLayout layout(plan, {.chunk_tokens = t.chunk_tokens});
  RuntimeOptions r;
  r.backend = make_host_standin_backend({.lock_host_pages = false});
  r.chunk_tokens = t.chunk_tokens;
  r.device_capacity_bytes = (t.longest_prompt_tokens / t.chunk_tokens + 1) * layout.chunk_bytes();
  r.host_capacity_bytes = std::max<uint64_t>(t.host_memory_bytes, stored_chunk_bytes(layout));
  r.disk_dir = t.disk_dir;
  r.disk_capacity_bytes = t.disk_bytes;
  r.disk_fsync = false;
  return r;
}

Batcher::Batcher(const Transformer& model, const Plan& plan, RuntimeOptions runtime,
                 uint64_t kv_memory_bytes)
    : model_(model),
      geometry_(plan.model.geometry),
      kv_config_(plan.kv_config()),
      settings_(plan.quantization),
      cache_options_(cache_options(plan)),
      prefixes_(plan, std::move(runtime)),
      kv_memory_bytes_(kv_memory_bytes),
      bytes_per_token_(kv_bytes_per_token(geometry_, kv_config_, settings_)) {}

uint64_t Batcher::reservation(int64_t tokens) const {
  return kv_cache_bytes(geometry_, kv_config_, settings_, tokens, 1);
}

Batcher::Prefilled Batcher::admit(std::span<const int32_t> prompt, uint64_t reserved) {
  if (prompt.empty()) fail(ErrorCode::kInvalidArgument, "a sequence needs at least one token");
  Sequence seq{std::make_unique<KvCache>(model_.config(), cache_options_), reserved};
  Prefilled p;
  p.restore = prefixes_.restore(prompt, *seq.cache);
  const RowMatrix logits = prefixes_.prefill_storing(model_, prompt, p.restore.tokens, *seq.cache);
  p.logits = logits.row(logits.rows() - 1);
  p.id = next_id_++;
  used_bytes_ += reserved;
  sequences_.emplace(p.id, std::move(seq));
  return p;
}

RowMatrix Batcher::step(std::span<const StepToken> tokens) {
  std::vector<RowMatrix> inputs;
  inputs.reserve(tokens.size());
  std::vector<Transformer::BatchSequence> batch;
  batch.reserve(tokens.size());
  for (const StepToken& t : tokens) {
    const auto it = sequences_.find(t.id);
    if (it == sequences_.end()) {
      fail(ErrorCode::kInvalidArgument, "decode step: no running sequence {}", t.id);
    }
    inputs.push_back(model_.embed(std::span(&t.token, 1)));
    batch.push_back({&inputs.back(), it->second.cache.get(), 0, nullptr});
  }
  if (batch.empty()) return RowMatrix(0, 0);
  return model_.forward_batch_from_layer(0, batch);
}

void Batcher::release(SequenceId id) {
  const auto it = sequences_.find(id);
  if (it == sequences_.end()) return;
  used_bytes_ -= it->second.reserved;
  sequences_.erase(it);
}

}  // namespace kvplan::serve
