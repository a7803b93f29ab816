// ik_llama.cpp: -ctk/-ctv for most layers, -ctk-first/-ctk-last/-ctv-first/-ctv-last TYPE,N for
// the first N and last M layers (PR #1599), -khad/-vhad where a side's layers are rotated.
// Grammar: docs/engines.md section 5.
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "engines/export_util.h"

namespace kvplan {
namespace {

// One side's types over the layers as ik_llama.cpp takes them: a type for the first N layers, one
// for the last M, one (-ctk/-ctv) for the rest. Layers between the first and last runs that differ
// take the widest type among them (never fewer bits than planned; the most frequent of equally
// wide ones), listed as losses.
struct FirstLastN {
  Format middle, first, last;
  int n_first = 0, n_last = 0;
};

FirstLastN first_last_n(const std::vector<Format>& t) {
  const int n = static_cast<int>(t.size());
  if (n == 0) return {};
  int first = 1;
  while (first < n && t[first] == t[0]) ++first;
  if (first == n) return {t[0], t[0], t[0], 0, 0};
  int last = 1;
  while (last < n - first && t[n - 1 - last] == t[n - 1]) ++last;
  FirstLastN r;
  if (first + last == n) {  // two runs: the longer is the default type, the shorter apart
    if (first >= last) {
      r.middle = t[0], r.last = t[n - 1], r.n_last = last;
    } else {
      r.middle = t[n - 1], r.first = t[0], r.n_first = first;
    }
    return r;
  }
  // The widest type between the runs; among equally wide ones the most frequent, then the first.
  std::map<FormatId, int> count;
  for (int i = first; i < n - last; ++i) ++count[t[i].id()];
  r.middle = t[first];
  for (int i = first; i < n - last; ++i) {
    const int bits = t[i].info().bits, best = r.middle.info().bits;
    if (bits > best || (bits == best && count[t[i].id()] > count[r.middle.id()])) r.middle = t[i];
  }
  if (t[0] != r.middle) r.first = t[0], r.n_first = first;
  if (t[n - 1] != r.middle) r.last = t[n - 1], r.n_last = last;
  return r;
}

std::string first_last_flags(const char* flag, const FirstLastN& s) {
  std::string out;
  if (s.n_first > 0) {
    out += fmt::format(" -{}-first {},{}", flag, engine_cache_type(s.first).name(), s.n_first);
  }
  if (s.n_last > 0) {
    out += fmt::format(" -{}-last {},{}", flag, engine_cache_type(s.last).name(), s.n_last);
  }
  return out;
}

Format type_at(const FirstLastN& s, int layer, int n_layers) {
  if (layer < s.n_first) return s.first;
  if (layer >= n_layers - s.n_last) return s.last;
  return s.middle;
}

}  // namespace

PlanExport export_ik_llamacpp(const Plan& plan) {
  const EngineSpec& ik = engine_spec(EngineId::kIkLlamaCpp);
  const int common = common_head_dim(plan.model.geometry);
  PlanExport e;
  // -khad/-vhad rotate a side on every layer: each side takes the setting that keeps the most of
  // its planned types (no flag on a tie), and the other layers the nearest type it stores.
  std::vector<Format> keys, values;
  RotationSetting setting;
  size_t least_changed = SIZE_MAX;
  for (const RotationSetting& s : rotation_settings(ik, common)) {
    std::vector<Format> k, v;
    size_t changed = 0;
    for (size_t i = 0; i < plan.layers.size(); ++i) {
      const int head_dim = plan.model.geometry.layers.at(i).head_dim;
      const std::vector<UniformBaseline>& measured = plan.results.baselines;
      const KvPair& planned = plan.layers[i].pair;
      k.push_back(nearest_stored_format(ik, planned.key, head_dim, measured, [&](const Format& c) {
        return setting_stores(ik, s, common, true, c);
      }));
      v.push_back(nearest_stored_format(
          ik, planned.value, head_dim, measured,
          [&](const Format& c) { return setting_stores(ik, s, common, false, c); }));
      changed += (k.back() != planned.key) + (v.back() != planned.value);
    }
    if (changed < least_changed) {
      least_changed = changed, setting = s, keys = std::move(k), values = std::move(v);
    }
  }
  const FirstLastN k = first_last_n(keys), v = first_last_n(values);
  const int n = static_cast<int>(plan.layers.size());
  bool quantized_v = false;
  for (size_t i = 0; i < plan.layers.size(); ++i) {
    const PlanLayer& l = plan.layers[i];
    const Format kt = type_at(k, static_cast<int>(i), n), vt = type_at(v, static_cast<int>(i), n);
    const char* between =
        "ik_llama.cpp sets one type between its first-N and last-M layers: the widest type "
        "planned there";
    e.runs.push_back({kt, vt});
    note_side_loss(e, ik, l.index, "key", l.pair.key, kt, between);
    note_side_loss(e, ik, l.index, "value", l.pair.value, vt, between);
    quantized_v = quantized_v || vt.family() != FormatFamily::kPlain;
  }
  e.text = fmt::format("-ctk {} -ctv {}{}{}", engine_cache_type(k.middle).name(),
                       engine_cache_type(v.middle).name(), first_last_flags("ctk", k),
                       first_last_flags("ctv", v));
  if (setting.keys) e.text += " -khad";
  if (setting.values) e.text += " -vhad";
  if (setting.keys || setting.values) {
    e.notes.push_back(fmt::format(
        "{} rotate{} every layer's {} (a Hadamard transform of the head's row, or of its spans "
        "of 64, before it is stored: kvplan's *_had or *_had64 formats); a 16-bit side under it "
        "is rotated too, which changes nothing but f16 rounding",
        rotation_words(ik, setting), setting.keys && setting.values ? "" : "s",
        setting.keys && setting.values ? "K and V"
        : setting.keys                 ? "K"
                                       : "V"));
  }
  if (quantized_v) {
    e.text += " -fa";
    e.notes.push_back("a quantized V cache needs flash attention (-fa)");
  }
  if (k.n_first + k.n_last + v.n_first + v.n_last > 0) {
    e.notes.push_back(
        "-ctk-first/-ctk-last/-ctv-first/-ctv-last need ik_llama.cpp with PR #1599 (2026-04-08) "
        "and, for -ctv-last, the fix of PR #1626 (2026-04-12)");
  }
  if (plan.quantization.mode != QuantMode::kPerToken) {
    e.losses.push_back({-1, "mode", std::string(quant_mode_name(plan.quantization.mode)),
                        "per-token", "ik_llama.cpp quantizes K and V per token"});
  }
  return e;
}

}  // namespace kvplan
