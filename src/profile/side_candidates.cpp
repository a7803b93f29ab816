#include "profile/side_candidates.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include <fmt/format.h>

#include "core/error.h"
#include "formats/format_size.h"
#include "formats/kv_bytes.h"

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

// Two formats with the same key pack identical codes on this side (int4 and int4_g64 on rows of 32
// values; int4 and int4_kivi when the plan's mode already packs every key per channel; q4_0_had
// and q4_0_had64 on rows of 64 values, one span). Ints: {-1, bits, group, per channel}; rotated
// blocks: {-2, codec, values rotated together, false}; any other format: {id, 0, 0, false}.
std::tuple<int, int, size_t, bool> packing_key(const KvPair& side_pair, Format f,
                                               const QuantSettings& settings, size_t head_dim) {
  const KvFormatTraits& info = f.info();
  if (info.rotated() && info.block_values() > 0) {
    const size_t span =
        info.rotation_span() > 0 ? static_cast<size_t>(info.rotation_span()) : head_dim;
    return {-2, static_cast<int>(info.codec), span, false};
  }
  if (f.family() != FormatFamily::kUniformInt) return {static_cast<int>(f.id()), 0, 0, false};
  const bool per_channel = side_pair.key == f && keys_packed_per_channel(side_pair, settings);
  const size_t row = per_channel ? settings.group_size : head_dim;
  return {-1, f.info().bits, effective_group_size(f, row, settings.group_size), per_channel};
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
                           const std::vector<KvPair>& candidates,
                           const std::vector<double>& layer_token_share,
                           const std::vector<int>& sixteen_bit_layers) {
  constexpr double kNone = std::numeric_limits<double>::infinity();
  double total = 0;
  for (int l = 0; l < config.n_layers; ++l) {
    const size_t L = static_cast<size_t>(l);
    const KvLayerGeometry g{config.n_kv_heads[L], config.head_dim, config.sliding_window[L]};
    double key = kNone, value = kNone, joint = kNone;
    const bool sixteen_bit = std::find(sixteen_bit_layers.begin(), sixteen_bit_layers.end(), l) !=
                             sixteen_bit_layers.end();
    for (const KvPair& p :
         sixteen_bit ? std::vector<KvPair>{KvPair::parse("f16/f16")} : candidates) {
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
    const double least = key < kNone && value < kNone ? std::min(key + value, joint) : joint;
    total += least * (layer_token_share.empty() ? 1.0 : layer_token_share.at(L));
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
    for (const KvFormatTraits& info : format_table()) {
      if (info.default_candidate) formats.emplace_back(info.id);
    }
  }
  SideCandidates out;
  const size_t head_dim = static_cast<size_t>(config.head_dim);
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
      const auto side_key = [&](Format k) {
        return packing_key(key_side ? KvPair{k, kExact} : KvPair{kExact, k}, k, settings, head_dim);
      };
      const auto same = std::find_if(kept.begin(), kept.end(),
                                     [&](const Format& k) { return side_key(k) == side_key(f); });
      if (same != kept.end()) {
        const auto [id, bits, group, per_channel] = side_key(f);
        out.skipped.push_back(fmt::format("{} for {}: packs exactly like {} ({} {} {})", f.name(),
                                          side, same->name(),
                                          id == -2 ? "rotated spans of" : "groups of", group,
                                          per_channel ? "tokens per channel" : "values per row"));
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
