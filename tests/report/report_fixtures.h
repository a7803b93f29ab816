// A small profile and plan built by hand (2 layers, 1 KV head, head_dim 32, int formats in groups
// of 32) whose sizes are easy to check on paper: an int8 row is 32 B of codes + 4 B of f16 scale
// and zero = 36 B, int4 16 + 4 = 20 B, bf16 64 B.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "plan/plan.h"
#include "profile/profile_data.h"
#include "profile/profile_hash.h"
#include "report/report_data.h"

namespace kvplan::test {

inline Profile tiny_profile() {
  Profile p;
  p.tool_version = "test";
  p.model = {"tiny <model> & co", "llama", "00112233aabbccdd", 4,
             KvGeometry::uniform("tiny <model> & co", 2, 1, 32)};
  p.calibration = {"cal.jsonl", "feedfacefeedface", 4, 100, 64, 0, 2, 50};
  p.candidates = {KvPair::parse("KV8"), KvPair::parse("K8V4"), KvPair::parse("KV4")};
  p.reset_cells();
  // dKL per [layer][candidate]; e_o is dKL x 10 so the two heatmaps differ.
  const double dkl[2][3] = {{1e-4, 3e-3, 0.1}, {2e-4, 5e-3, 0.4}};
  const double bytes[3][2] = {{36, 36}, {36, 20}, {20, 20}};
  const double bits[3][2] = {{8, 8}, {8, 4}, {4, 4}};
  for (int l = 0; l < 2; ++l) {
    for (size_t c = 0; c < 3; ++c) {
      ProfileCell cell;
      cell.pair = p.candidates[c];
      cell.key_bits = bits[c][0];
      cell.value_bits = bits[c][1];
      cell.nominal_bits = (bits[c][0] + bits[c][1]) / 2;
      cell.key_bytes_per_token = bytes[c][0];
      cell.value_bytes_per_token = bytes[c][1];
      cell.metrics.dkl = dkl[l][c];
      cell.metrics.e_o = 10 * dkl[l][c];
      p.cells[static_cast<size_t>(l)][c] = cell;
    }
  }
  return p;
}

// Layer 0 KV8, layer 1 KV4: 72 + 40 = 112 B/token; bf16 is 2 x 128 = 256 B/token.
inline Plan tiny_plan(const Profile& profile) {
  Plan plan;
  plan.tool_version = "test";
  plan.created = "2026-01-01T00:00:00Z";
  plan.model.name = profile.model.name;
  plan.model.architecture = "llama";
  plan.model.fingerprint = profile.model.fingerprint;
  plan.model.n_attention_heads = 4;
  plan.model.geometry = KvGeometry::uniform(profile.model.name, 2, 1, 32);
  plan.layers = {{0, 0, KvPair::parse("KV8")}, {1, 1, KvPair::parse("KV4")}};
  // The measured sections as a plan file holds them, read the way plan_from_json reads them.
  nlohmann::json sections;
  sections["quality"] = {
      {"metric", "mean KL"},
      {"mean_kl", 0.05},
      {"top1_agreement", 0.9},
      {"ppl", 5.5},
      {"ppl_exact_kv", 5.0},
      {"predicted_error", 0.06},
      {"validated", true},
      {"data", {{"source", "held.jsonl"}, {"hash", "abc"}, {"tokens", 80}, {"scored", 70}}}};
  sections["pareto_front"] = nlohmann::json::array({{{"memory", 4.0},
                                                     {"predicted_error", 0.5},
                                                     {"equivalent_bits", 4.0},
                                                     {"bytes_per_token", 80.0}},
                                                    {{"memory", 6.0},
                                                     {"predicted_error", 0.06},
                                                     {"equivalent_bits", 6.0},
                                                     {"bytes_per_token", 112.0},
                                                     {"mean_kl", 0.05}}});
  sections["baselines"] = nlohmann::json::array({{{"kv", "KV8"},
                                                  {"equivalent_bits", 8.0},
                                                  {"bytes_per_token", 144.0},
                                                  {"within_budget", false},
                                                  {"mean_kl", 0.001},
                                                  {"top1_agreement", 0.99},
                                                  {"ppl", 5.01}},
                                                 {{"kv", "KV4"},
                                                  {"equivalent_bits", 4.0},
                                                  {"bytes_per_token", 80.0},
                                                  {"within_budget", true},
                                                  {"mean_kl", 0.3},
                                                  {"top1_agreement", 0.7},
                                                  {"ppl", 7.0}}});
  sections["provenance"] = {
      {"algorithm", "test"},
      {"sensitivity", "dkl"},
      {"memory_measure", "equivalent_bits"},
      {"budget", "6 equivalent bits"},
      {"seed", 42},
      {"surrogate_weights", {2.0, 0.5}},
      {"validations",
       {{{"round", 1}, {"memory", 6.0}, {"predicted_error", 0.06}, {"mean_kl", 0.05}}}},
      {"profile", {{"hash", profile_hash(profile)}}}};
  plan.results = results_from_json(sections, "plan.json");
  return plan;
}

inline report::ReportData tiny_report(report::MemoryOptions memory = {}) {
  const Profile profile = tiny_profile();
  return report::build_report_data({profile, "profile.json"}, {tiny_plan(profile), "plan.json"},
                                   memory);
}

}  // namespace kvplan::test
