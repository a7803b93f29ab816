#include "profile/side_candidates.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/format_size.h"
#include "plan/memory_estimate.h"

namespace kvplan {
namespace {

const Format kExact(FormatId::kF32);

bool packs_every_layer(const ModelConfig& c, const KvPair& pair, const QuantSettings& s,
                       std::string* why) {
  try {
    for (int l = 0; l < c.n_layers; ++l) {
      const size_t L = static_cast<size_t>(l);
      (void)layer_bytes_per_token({c.n_kv_heads[L], c.head_dim, c.sliding_window[L]}, pair, s, l);
    }
    return true;
  } catch (const Error& e) {
    *why = e.what();
    return false;
  }
}

// Two formats with the same key pack identical codes for this row length.
std::tuple<int, int, size_t> packing_key(Format f, size_t row, size_t group_size) {
  if (f.family() != FormatFamily::kUniformInt) return {static_cast<int>(f.id()), 0, 0};
  return {-1, f.info().bits, effective_group_size(f, row, group_size)};
}

}  // namespace

CandidateSide candidate_side(const KvPair& pair) {
  const bool key_exact = pair.key == kExact, value_exact = pair.value == kExact;
  if (value_exact && !key_exact) return CandidateSide::kKeyOnly;
  if (key_exact && !value_exact) return CandidateSide::kValueOnly;
  return CandidateSide::kJoint;
}

Format side_format(const KvPair& pair) {
  return candidate_side(pair) == CandidateSide::kValueOnly ? pair.value : pair.key;
}

double smallest_plan_bytes(const ModelConfig& config, const QuantSettings& settings,
                           const std::vector<KvPair>& candidates) {
  constexpr double kNone = std::numeric_limits<double>::infinity();
  double total = 0;
  for (int l = 0; l < config.n_layers; ++l) {
    const size_t L = static_cast<size_t>(l);
    const KvLayerGeometry g{config.n_kv_heads[L], config.head_dim, config.sliding_window[L]};
    double key = kNone, value = kNone, joint = kNone;
    for (const KvPair& p : candidates) {
      const LayerTokenBytes b = layer_bytes_per_token(g, p, settings, l);
      switch (candidate_side(p)) {
        case CandidateSide::kKeyOnly:
          key = std::min(key, b.key);
          break;
        case CandidateSide::kValueOnly:
          value = std::min(value, b.value);
          break;
        case CandidateSide::kJoint:
          joint = std::min(joint, b.total());
          break;
      }
    }
    total += key < kNone && value < kNone ? std::min(key + value, joint) : joint;
  }
  return total;
}

Format anchor_format(const std::vector<Format>& available) {
  for (const char* name : {"q4_0", "int4"}) {
    const Format f = Format::parse(name);
    if (std::find(available.begin(), available.end(), f) != available.end()) return f;
  }
  if (available.empty()) fail(ErrorCode::kInvalidArgument, "no candidate formats");
  return available[available.size() / 2];
}

SideCandidates catalog_side_candidates(const ModelConfig& config, const QuantSettings& settings,
                                       const SideCandidateOptions& options) {
  std::vector<Format> formats = options.formats;
  if (formats.empty()) {
    for (const FormatInfo& info : all_format_infos()) {
      if (info.id != FormatId::kF32) formats.emplace_back(info.id);
    }
  }
  SideCandidates out;
  const size_t head_dim = static_cast<size_t>(config.head_dim);
  const size_t key_row = settings.mode == QuantMode::kKivi ? settings.group_size : head_dim;
  std::vector<Format> keys, values;
  for (const Format& f : formats) {
    if (f.is_slot() || f == kExact) {
      fail(ErrorCode::kInvalidArgument,
           "candidate format {}: expected a quantized or 16-bit format", f.name());
    }
    for (const bool key_side : {true, false}) {
      const KvPair pair = key_side ? KvPair{f, kExact} : KvPair{kExact, f};
      const char* side = key_side ? "keys" : "values";
      std::string why;
      if (!packs_every_layer(config, pair, settings, &why)) {
        out.skipped.push_back(fmt::format("{} for {}: {}", f.name(), side, why));
        continue;
      }
      std::vector<Format>& kept = key_side ? keys : values;
      const size_t row = key_side ? key_row : head_dim;
      const auto same = std::find_if(kept.begin(), kept.end(), [&](const Format& k) {
        return packing_key(k, row, settings.group_size) == packing_key(f, row, settings.group_size);
      });
      if (same != kept.end()) {
        out.skipped.push_back(fmt::format("{} for {}: packs exactly like {} on rows of {} values",
                                          f.name(), side, same->name(), row));
        continue;
      }
      kept.push_back(f);
    }
  }
  if (keys.empty() || values.empty()) {
    fail(ErrorCode::kInvalidArgument,
         "no candidate format can pack this model's {} rows (head_dim {})",
         keys.empty() ? "key" : "value", config.head_dim);
  }
  const Format key_anchor = anchor_format(keys), value_anchor = anchor_format(values);
  for (const Format& f : keys) {
    out.candidates.push_back({f, kExact});
    out.dkl_measured.push_back(options.all_dkl || f == key_anchor);
  }
  for (const Format& f : values) {
    out.candidates.push_back({kExact, f});
    out.dkl_measured.push_back(options.all_dkl || f == value_anchor);
  }
  out.candidates.push_back({key_anchor, value_anchor});  // the additivity check
  out.dkl_measured.push_back(true);
  return out;
}

}  // namespace kvplan
