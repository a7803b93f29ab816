// profile.json (schema "kvplan.profile/v2"; v1 files still load): per layer and candidate (key,
// value) pair, the bytes per token, nominal bits and KVTuner's sensitivity metrics (metrics.h) —
// the input of the search.
//
// Layout (keys in this order; floats in nlohmann's shortest round-trip form, so the same numbers
// give the same bytes):
//   schema, tool_version,
//   model        {name, architecture, fingerprint, num_layers, num_attention_heads, num_kv_heads[],
//                 head_dim, sliding_window[] (only when a layer slides)}
//   calibration  {source, hash, prompts, tokens, max_tokens, truncated, kl_prompts, kl_tokens}
//   quantization {mode, group_size, residual_length, chunk_attends_quantized}
//   candidates   ["KV8", "K8V4", ...]; side candidates "q4_0/f32" (keys only) and "f32/q4_0"
//   dkl_measured [names]: the candidates whose dKL re-runs the model (v2; v1: all)
//   shard        {index, count}          only in a shard's file (count > 1)
//   complete     every (layer, candidate) cell present
//   layers[]     {index, pairs[]: {pair, key, value, key_bits, value_bits, nominal_bits,
//                 key_bytes_per_token, value_bytes_per_token, e_k, e_v, e_a, e_o, dkl, o_mse,
//                 dkl_measured, o_mse_heads, dkl_heads (layers of more than one KV head)}}
//   timings      machine-dependent (seconds, threads, per shard; profile_timings.h): always last,
//                and the only field that differs between reruns or between a merged and an
//                unsharded profile.
//
//   kvplan::Profile p = kvplan::read_profile("profile.json");
//   p.cell(3, 0)->metrics.dkl;
//   kvplan::write_profile("out.json", p);
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "formats/fp8_scales.h"
#include "formats/kv_geometry.h"
#include "formats/kv_pair.h"
#include "formats/quant_settings.h"
#include "profile/profile_timings.h"

namespace kvplan {

inline constexpr const char* kProfileSchema = "kvplan.profile/v2";
// v1 profiles (every cell's dKL measured, no o_mse) still load.
inline constexpr const char* kProfileSchemaV1 = "kvplan.profile/v1";

struct ProfileCalibration {
  std::string source;  // file name (no directories: shards run on different machines)
  std::string hash;    // calibration_hash() of the token ids, hex
  int prompts = 0;
  int64_t tokens = 0;
  int max_tokens = 0;  // the per-prompt limit applied
  int truncated = 0;
  int kl_prompts = 0;  // prompts dKL re-runs (an evenly spaced subset, see profiler.h)
  int64_t kl_tokens = 0;
};

struct CellMetrics {
  double e_k = 0, e_v = 0, e_a = 0, e_o = 0, dkl = 0;
  // Mean over (token, query head) of ||Ô - O||^2: the attention output's squared error, to which
  // dKL is proportional to second order (profile/dkl_estimate.h).
  double o_mse = 0;
  // [KV head] each KV head's share of o_mse: the squared error of the query heads it serves, over
  // the same count, so the shares sum to o_mse. Heads attend independently and every format packs
  // one head's row on its own, so a share is exactly the o_mse of quantizing that head alone.
  // Empty in profiles written before it existed (and in a one-KV-head layer's cells).
  std::vector<double> o_mse_heads{};
  // [KV head] dKL with only that head of the layer quantized: re-run like dkl for the cells whose
  // dKL is measured, estimated for the others as alpha_h * o_mse_heads[h] (dkl_estimate.h). Heads
  // differ in how their output error reaches the logits (each has its own columns of W_o), so a
  // head's share of o_mse alone does not apportion dKL. Empty where o_mse_heads is.
  std::vector<double> dkl_heads{};
  bool dkl_measured = true;  // false: dkl estimated from the layer's measured cells
};

struct ProfileCell {
  KvPair pair;
  double key_bits = 0, value_bits = 0, nominal_bits = 0;
  double key_bytes_per_token = 0, value_bytes_per_token = 0;  // src/formats/kv_bytes.h
  CellMetrics metrics;
};

struct Profile {
  std::string tool_version;
  KvModel model;
  ProfileCalibration calibration;
  QuantSettings quantization;
  bool chunk_attends_quantized = true;
  // Where the attention-side metrics ran, "cpu" or "gpu": GPU probabilities differ from the
  // CPU's in rounding, so cells from both must not be mixed in one profile.
  std::string attention_device = "cpu";
  // [layer] the largest |K| and |V| per KV head over the calibration text, from which FP8 formats
  // take their per-head scales (formats/fp8_scales.h). Empty in profiles written before it existed.
  std::vector<KvHeadAbsmax> kv_absmax{};
  std::vector<KvPair> candidates;
  // [candidate] whether dKL re-runs the model for it (the others' dKL is estimated); empty = all.
  std::vector<bool> dkl_measured;
  int shard_index = 0;
  int shard_count = 1;
  // [layer][candidate]; empty optionals are cells this file does not hold.
  std::vector<std::vector<std::optional<ProfileCell>>> cells;
  ProfileTimings timings;

  // Sizes `cells` for the model and candidates (all empty).
  void reset_cells();
  [[nodiscard]] const ProfileCell* cell(int layer, size_t candidate) const;
  [[nodiscard]] size_t n_present() const;
  [[nodiscard]] int n_layers() const { return model.geometry.n_layers(); }
  // Every layer's (profiles are of one head_dim).
  [[nodiscard]] int head_dim() const {
    return model.geometry.layers.empty() ? 0 : model.geometry.layers.front().head_dim;
  }
  [[nodiscard]] size_t n_cells() const { return n_layers() * candidates.size(); }
  [[nodiscard]] bool complete() const { return n_present() == n_cells(); }
  // `pair`'s FP8 scales at `layer`, from kv_absmax; none (scale 1, as such a profile's cells were
  // measured) when the profile predates kv_absmax.
  [[nodiscard]] KvHeadScales fp8_scales(int layer, const KvPair& pair) const;
  [[nodiscard]] bool measures_dkl(size_t candidate) const {
    return dkl_measured.empty() || dkl_measured[candidate];
  }
  // Whether the run re-ran its dKL anchors once per KV head (`--per-head-dkl`), read off the
  // cells: true when its measured cells of multi-head layers carry dkl_heads, false when they do
  // not, none when it holds no such cell (a shard or partial profile may hold none).
  [[nodiscard]] std::optional<bool> per_head_dkl() const;
};

// Which shard computes cell (layer, candidate): cells are numbered layer-major
// (layer * candidates + candidate) and dealt round-robin, so every shard gets a similar mix of
// early (expensive dKL) and late layers.
inline int shard_of_cell(int layer, size_t candidate, size_t n_candidates, int shard_count) {
  return static_cast<int>((static_cast<size_t>(layer) * n_candidates + candidate) %
                          static_cast<size_t>(shard_count));
}

// Throws Error(kInvalidArgument) naming `source` and the field for a wrong schema, missing or
// mistyped fields, unknown formats, a cell outside its shard, duplicates or non-finite metrics.
Profile profile_from_json(const nlohmann::json& j, const std::string& source);
// Parses profile.json text already in memory (`source` names it in errors).
Profile profile_from_text(std::string_view text, const std::string& source);
Profile read_profile(const std::filesystem::path& path);
nlohmann::ordered_json profile_to_json(const Profile& profile);
// Exactly the bytes write_profile writes.
std::string profile_text(const Profile& profile);
void write_profile(const std::filesystem::path& path, const Profile& profile);

// Empty when `a` and `b` describe the same experiment (model, calibration, quantization settings,
// candidates); otherwise the first differing field and both values, e.g.
// "model.fingerprint: 3f2a... vs 91c0...".
std::string profile_identity_mismatch(const Profile& a, const Profile& b);

}  // namespace kvplan
