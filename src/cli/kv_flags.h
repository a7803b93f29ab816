// The flags every command that sizes or runs a KV cache shares — which formats (a plan, a pair for
// every layer, or a key and a value format) and the quantization settings — and their resolution
// against a model's geometry, so estimate, eval and profile read them the same way.
//
//   KvFlags flags;  add_kv_flags(cmd, flags, /*several_pairs=*/false);
//   ResolvedKv kv = resolve_kv_flags(flags, kv_geometry(config), config.source, QuantSettings{});
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "formats/kv_geometry.h"
#include "formats/kv_pair.h"
#include "formats/quant_settings.h"
#include "plan/plan.h"

namespace kvplan::cli {

struct KvFlags {
  std::string plan_path;
  std::vector<std::string> kv;  // --kv: several for estimate, one elsewhere
  std::string k_format, v_format;
  std::string mode;
  int64_t group_size = 0;  // 0: the plan's or the default
  int64_t residual_length = 0;
  int64_t block_size = 0;
};

// Registers --plan, --kv, --k-format/--v-format, --mode, --group-size, --residual-length and, when
// `with_block_size`, --block-size.
void add_kv_flags(CLI::App* cmd, KvFlags& flags, bool several_pairs, bool with_block_size = false);

struct KvChoice {
  std::string label;  // "K8V4", "q8_0/q4_0", "plan:plan.json"
  // One pair per layer, or for a per-KV-head plan one per KV head (Plan::kv_config).
  std::vector<KvPair> pairs;
};

struct ResolvedKv {
  std::optional<Plan> plan;
  std::string plan_path;  // where the plan came from (--plan, or a plan.json given to --kv)
  QuantSettings settings;
  std::vector<KvChoice> choices;  // in flag order: the plan, --k/--v-format, each --kv
};

// Reads the plan (refusing one made for another geometry), parses the formats and applies the
// settings flags over the plan's settings (or `defaults`). Throws Error(kInvalidArgument) naming
// the flag for anything malformed.
ResolvedKv resolve_kv_flags(const KvFlags& flags, const KvGeometry& geometry,
                            const std::string& model_source, const QuantSettings& defaults);

}  // namespace kvplan::cli
