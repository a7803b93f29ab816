#include "plan/plan_fingerprint.h"

#include <bit>

#include "core/hash.h"

namespace kvplan {

uint64_t plan_fingerprint(const Plan& plan) {
  Hasher h;
  // The layout the stored bytes depend on, not the file's schema: a v1 plan and the same plan
  // written as v2 describe the same pages.
  h.update("kvplan.plan/v1");
  h.update(plan.model.fingerprint);
  h.update(plan.model.architecture);
  h.update_u64(static_cast<uint64_t>(plan.model.geometry.n_layers()));
  for (const KvLayerGeometry& lg : plan.model.geometry.layers) {
    h.update_u64(static_cast<uint64_t>(lg.n_kv_heads));
    h.update_u64(static_cast<uint64_t>(lg.head_dim));
    h.update_u64(static_cast<uint64_t>(lg.sliding_window));
  }
  const QuantSettings& q = plan.quantization;
  h.update(quant_mode_name(q.mode));
  h.update_u64(q.group_size);
  h.update_u64(q.residual_length);
  h.update_u64(q.block_size);
  h.update(plan.scale_dtype);
  const auto update_pair = [&](const KvPair& pair) {
    for (const Format& f : {pair.key, pair.value}) {
      h.update_u64(static_cast<uint64_t>(f.id()));
      h.update_u64(f.info().version);
      h.update_u64(f.slot_bytes());
    }
  };
  for (const PlanLayer& layer : plan.layers) {
    update_pair(layer.pair);
    // A per-KV-head layer's pages are its heads' runs: hashed only when present, so per-layer
    // plans keep their fingerprints.
    if (layer.per_head()) {
      h.update("heads");
      for (const KvPair& head : layer.heads) update_pair(head);
    }
    // FP8 scales change the stored codes, not the layout; hashed only when present, so plans
    // without FP8 layers keep their fingerprints.
    for (const std::vector<float>* scales : {&layer.fp8_scales.key, &layer.fp8_scales.value}) {
      if (scales->empty()) continue;
      h.update("fp8_scales");
      for (const float s : *scales) h.update_u64(std::bit_cast<uint32_t>(s));
    }
  }
  return h.digest();
}

}  // namespace kvplan
