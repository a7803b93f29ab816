// The profile's candidates when K and V are chosen independently (the default): for every
// catalogue format that can pack this model, a key-only candidate "FMT/f32" (values exact) and a
// value-only candidate "f32/FMT" (keys exact), so the profile's cost is linear in the catalogue; a
// pair's sensitivity is modelled as the sum of its two sides (checked on a joint "anchor" pair per
// layer, profile/dkl_estimate.h).
//
// dKL re-runs the model from the layer on, which costs far more than the attention-side metrics,
// so by default it is measured only for the anchors (one key-only and one value-only 4-bit
// candidate, and their joint pair); every other side's dKL is estimated from its attention-output
// error (dkl_estimate.h). `all_dkl` measures every candidate instead.
//
//   SideCandidates c = catalog_side_candidates(config, settings, {});
//   c.candidates;  c.dkl_measured;
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "formats/kv_pair.h"
#include "formats/quant_settings.h"
#include "model/model_config.h"

namespace kvplan {

enum class CandidateSide { kKeyOnly, kValueOnly, kJoint };

// "q4_0/f32" -> key only, "f32/q4_0" -> value only, anything else (e.g. "q4_0/q4_0") -> joint.
CandidateSide candidate_side(const KvPair& pair);
// The side's format: the key of a key-only candidate, the value of a value-only one.
Format side_format(const KvPair& pair);

struct SideCandidateOptions {
  std::vector<Format> formats;  // empty = the default catalogue (KvFormatTraits::default_candidate)
  bool all_dkl = false;
};

struct SideCandidates {
  std::vector<KvPair> candidates;
  std::vector<bool> dkl_measured;    // [candidate]
  std::vector<std::string> skipped;  // one line per catalogue format left out, and why
};

// Formats that cannot pack every layer's rows (e.g. 32-value blocks on head_dim 8) are left out,
// and so is a format that packs exactly like an earlier one at this head_dim (int4_g128 is
// int4_g64 on a row of 64 values); each leaves one line in `skipped`.
SideCandidates catalog_side_candidates(const ModelConfig& config, const QuantSettings& settings,
                                       const SideCandidateOptions& options);

// The least bytes per token any plan over these candidates can take (keys and values of side
// candidates chosen independently, joint pairs as they are), from the formats' sizes alone: the
// budget check that needs no profile. Layers in `sixteen_bit_layers` count as f16/f16 (an engine
// that keeps them at the model's dtype).
double smallest_plan_bytes(const ModelConfig& config, const QuantSettings& settings,
                           const std::vector<KvPair>& candidates,
                           const std::vector<double>& layer_token_share = {},
                           const std::vector<int>& sixteen_bit_layers = {});

// The 4-bit format the anchors use: q4_0 where it packs, else int4.
Format anchor_format(const std::vector<Format>& available);

}  // namespace kvplan
