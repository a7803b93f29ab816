#include "cli/kv_flags.h"

#include <filesystem>

#include "core/error.h"

namespace kvplan::cli {

void add_kv_flags(CLI::App* cmd, KvFlags& flags, bool several_pairs, bool with_block_size) {
  cmd->add_option("--plan", flags.plan_path, "A plan.json: per-layer formats and settings");
  auto* kv = cmd->add_option(
      "--kv", flags.kv,
      several_pairs
          ? "KV pair(s) for every layer (KV8, K8V4, K4V2, q8_0/q4_0, slot:134), or a plan.json"
          : "One KV pair for every layer (KV8, K8V4, K4V2, q8_0/q4_0, ...) or a plan.json");
  if (several_pairs) {
    kv->delimiter(',');
  } else {
    kv->expected(1);
  }
  cmd->add_option("--k-format", flags.k_format, "Key format for every layer (with --v-format)");
  cmd->add_option("--v-format", flags.v_format, "Value format for every layer (with --k-format)");
  cmd->add_option("--mode", flags.mode, "Quantization mode: per-token or kivi");
  cmd->add_option("--group-size", flags.group_size,
                  "Quantization group (default 32; clamped to the row)");
  cmd->add_option("--residual-length", flags.residual_length,
                  "kivi: newest tokens kept in full precision (a multiple of the group)");
  if (with_block_size) {
    cmd->add_option("--block-size", flags.block_size, "Tokens per page: memory rounds up to pages");
  }
}

ResolvedKv resolve_kv_flags(const KvFlags& flags, const KvGeometry& geometry,
                            const std::string& model_source, const QuantSettings& defaults) {
  if (flags.group_size < 0 || flags.residual_length < 0 || flags.block_size < 0) {
    fail(ErrorCode::kInvalidArgument,
         "--group-size, --residual-length and --block-size must be positive");
  }
  ResolvedKv out;
  out.settings = defaults;
  const size_t n = static_cast<size_t>(geometry.n_layers());
  // A plan.json given to --kv is a --plan (as `bench serve --kv` takes one): one plan at most,
  // whose settings the command runs with.
  std::string plan_path = flags.plan_path;
  for (const std::string& item : flags.kv) {
    if (!item.ends_with(".json")) continue;
    if (!plan_path.empty()) {
      fail(ErrorCode::kInvalidArgument, "--kv {}: a plan is already given ({}); one plan at most",
           item, plan_path);
    }
    plan_path = item;
  }
  if (!plan_path.empty()) {
    out.plan = read_plan(plan_path);
    out.plan_path = plan_path;
    check_plan_matches(*out.plan, geometry, model_source);
    out.settings = out.plan->quantization;
    out.choices.push_back(
        {"plan:" + std::filesystem::path(plan_path).filename().string(), out.plan->kv_config()});
  }
  if (!flags.k_format.empty() || !flags.v_format.empty()) {
    if (flags.k_format.empty() || flags.v_format.empty()) {
      fail(ErrorCode::kInvalidArgument, "--k-format and --v-format must be given together");
    }
    const KvPair pair{Format::parse(flags.k_format), Format::parse(flags.v_format)};
    if (pair.key.is_slot() || pair.value.is_slot()) {
      fail(ErrorCode::kInvalidArgument, "a slot covers K and V together: use --kv slot:N");
    }
    out.choices.push_back({pair.name(), std::vector<KvPair>(n, pair)});
  }
  for (const std::string& name : flags.kv) {
    if (name.ends_with(".json")) continue;  // the plan, above
    const KvPair pair = KvPair::parse(name);
    out.choices.push_back({pair.name(), std::vector<KvPair>(n, pair)});
  }
  if (!flags.mode.empty()) out.settings.mode = parse_quant_mode(flags.mode);
  if (flags.group_size > 0) out.settings.group_size = static_cast<size_t>(flags.group_size);
  // Unless given (or a plan's), the page and KIVI's residual window follow --group-size to their
  // smallest valid values (multiples of it), which any layer running KIVI needs.
  const size_t group = out.settings.group_size;
  if (flags.block_size > 0) {
    out.settings.block_size = static_cast<size_t>(flags.block_size);
  } else if (!out.plan && out.settings.block_size > 1) {
    out.settings.round_block_to_group();
  }
  if (flags.residual_length > 0) {
    out.settings.residual_length = static_cast<size_t>(flags.residual_length);
  } else if (out.settings.residual_length % group != 0) {
    out.settings.residual_length = group;
  }
  out.settings.validate();
  return out;
}

}  // namespace kvplan::cli
