// kvplan verify: checks that a plan's KV pages survive the runtime byte-exact — through the device
// pool, the pinned host tier and the disk tier — that no copy strays outside its page, that
// attention over reloaded pages equals attention over the device originals, and (separately) how
// far the plan's quantization moves K, V and attention from exact KV. The check is plan_verify.h;
// this file parses options and prints.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/format_bytes.h"
#include "core/json_text.h"
#include "model/model_config.h"
#include "plan/plan.h"
#include "runtime/plan_verify.h"

namespace kvplan::cli {
namespace {

struct VerifyOptions {
  std::string plan_path;
  std::string model;
  int64_t chunk_tokens = 0;  // 0: max(block_size, 64) rounded to a block multiple
  uint64_t seed = 1;
  bool json = false;
};

constexpr Tier kTiers[] = {Tier::kDevice, Tier::kHost, Tier::kDisk};

nlohmann::json to_json(const PlanVerifyResult& r, const std::string& plan_path) {
  nlohmann::json tiers = nlohmann::json::object();
  for (Tier t : kTiers) {
    const TierCheck& c = r.tier(t);
    tiers[std::string(tier_name(t))] = {{"chunks", c.chunks},
                                        {"bytes_compared", c.bytes_compared},
                                        {"mismatches", c.mismatches},
                                        {"refusals", c.refusals}};
  }
  tiers["disk"]["bytes_read"] = r.disk_bytes_read;
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerVerify& l : r.layers) {
    nlohmann::json j = {{"layer", l.layer},
                        {"group", l.group},
                        {"pair", l.pair},
                        {"page_bytes", l.page_bytes},
                        {"device_mismatches", l.device_mismatches},
                        {"host_mismatches", l.host_mismatches},
                        {"disk_mismatches", l.disk_mismatches}};
    if (l.attention_device_vs_reloaded_max_abs_diff) {
      j["attention_device_vs_reloaded_max_abs_diff"] = *l.attention_device_vs_reloaded_max_abs_diff;
      j["quality"] = {{"key_rel_error", l.key_rel_error},
                      {"value_rel_error", l.value_rel_error},
                      {"attention_rel_error", l.attention_rel_error}};
    }
    layers.push_back(std::move(j));
  }
  return {{"plan", plan_path},
          {"chunk_tokens", r.chunk_tokens},
          {"chunk_bytes", r.chunk_bytes},
          {"transfer_groups", r.transfer_groups},
          {"backend", r.backend},
          {"tiers_checked", r.tiers_checked()},
          {"tiers", tiers},
          {"guard_violations", r.guard_violations},
          {"refusals", r.refusals},
          {"ok", r.ok},
          {"layers", layers}};
}

void print_text(const PlanVerifyResult& r, const std::string& plan_path) {
  std::printf("plan      %s\n", plan_path.c_str());
  std::printf("layout    %zu-token chunks of %s in %zu transfer groups; backend %s\n",
              r.chunk_tokens, format_bytes(static_cast<double>(r.chunk_bytes), 2).c_str(),
              r.transfer_groups, r.backend.c_str());
  std::printf("\ntiers (each chunk credited to the tier it was loaded back from):\n");
  std::printf("%-7s %7s %14s %11s %8s\n", "tier", "chunks", "bytes compared", "mismatches",
              "refused");
  for (Tier t : kTiers) {
    const TierCheck& c = r.tier(t);
    std::printf("%-7s %7llu %14llu %11llu %8llu\n", std::string(tier_name(t)).c_str(),
                (unsigned long long)c.chunks, (unsigned long long)c.bytes_compared,
                (unsigned long long)c.mismatches, (unsigned long long)c.refusals);
  }
  std::printf("bytes the runtime read from disk: %llu\n", (unsigned long long)r.disk_bytes_read);
  std::printf("\nround trip, guards and attention per layer (must be exact):\n");
  std::printf("%5s %5s %-16s %9s %9s %9s %14s\n", "layer", "group", "pair", "device", "host",
              "disk", "attn diff");
  for (const LayerVerify& l : r.layers) {
    const std::string diff = l.attention_device_vs_reloaded_max_abs_diff
                                 ? fmt::format("{:g}", *l.attention_device_vs_reloaded_max_abs_diff)
                                 : "opaque slot";
    std::printf("%5d %5d %-16s %9llu %9llu %9llu %14s\n", l.layer, l.group, l.pair.c_str(),
                (unsigned long long)l.device_mismatches, (unsigned long long)l.host_mismatches,
                (unsigned long long)l.disk_mismatches, diff.c_str());
  }
  std::printf("guard bytes changed: %llu; objects refused: %llu\n",
              (unsigned long long)r.guard_violations, (unsigned long long)r.refusals);
  std::printf("\nquantization quality vs exact KV (relative RMS error, random N(0,1) KV):\n");
  std::printf("%5s %-16s %10s %10s %10s\n", "layer", "pair", "K", "V", "attention");
  for (const LayerVerify& l : r.layers) {
    if (!l.attention_device_vs_reloaded_max_abs_diff) continue;
    std::printf("%5d %-16s %10.3g %10.3g %10.3g\n", l.layer, l.pair.c_str(), l.key_rel_error,
                l.value_rel_error, l.attention_rel_error);
  }
  std::printf("\n%s\n", r.ok ? "OK: every byte came back through every tier"
                             : "FAILED: see the non-zero counts above");
}

void run_verify(const VerifyOptions& o) {
  const Plan plan = read_plan(o.plan_path);
  if (!o.model.empty()) {
    const ModelConfig config = load_model_config(o.model, config_dir() / "models");
    KvGeometry g;
    g.model_name = config.name;
    for (int l = 0; l < config.n_layers; ++l) {
      g.layers.push_back({config.n_kv_heads[l], config.head_dim, config.sliding_window[l]});
    }
    check_plan_matches(plan, g, config.source);
  }
  if (o.chunk_tokens < 0) {
    fail(ErrorCode::kInvalidArgument, "--chunk-tokens {}: expected > 0", o.chunk_tokens);
  }
  PlanVerifyOptions verify;
  verify.chunk_tokens = static_cast<size_t>(o.chunk_tokens);
  verify.seed = o.seed;
  const PlanVerifyResult r = verify_plan(plan, verify);
  if (o.json) {
    std::printf("%s\n", json_text(to_json(r, o.plan_path), 2).c_str());
  } else {
    print_text(r, o.plan_path);
  }
  if (!r.ok) fail(ErrorCode::kInternal, "verify failed for {}", o.plan_path);
}

}  // namespace

void register_verify_command(CLI::App& app) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "Check a plan's KV pages through the runtime's device, host and disk tiers");
  cmd->footer(
      "Examples:\n"
      "  kvplan verify --plan configs/plans/minimax-m2.5-slot134.json\n"
      "  kvplan verify --plan plan.json --model SmolLM2-135M --json\n"
      "Exit codes: 0 all exact, 1 a mismatch or failure, 2 bad input (plan, model, options).");
  cmd->add_option("--plan", o->plan_path, "The plan.json to verify")->required();
  cmd->add_option("--model", o->model,
                  "Check the plan against this model (config.json, .gguf or preset name)");
  cmd->add_option("--chunk-tokens", o->chunk_tokens,
                  "Tokens per cached chunk (a multiple of the plan's block_size)");
  cmd->add_option("--seed", o->seed, "Seed of the random KV");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { run_verify(*o); });
}

}  // namespace kvplan::cli
