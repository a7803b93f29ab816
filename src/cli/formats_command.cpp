// kvplan formats: every KV format with its nominal bits, bytes per row and overhead. A KIVI key
// format's row is one token's share of its per-channel groups: head_dim channels x the bytes of
// group_size tokens / group_size.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/json_text.h"
#include "engines/engine.h"
#include "formats/format.h"
#include "formats/format_size.h"

namespace kvplan::cli {
namespace {

struct FormatsOptions {
  int head_dim = 128;
  int group_size = 32;
  bool json = false;
};

void run_formats(const FormatsOptions& o) {
  if (o.head_dim <= 0 || o.group_size <= 0) {
    fail(ErrorCode::kInvalidArgument, "--head-dim and --group-size must be > 0");
  }
  const size_t d = static_cast<size_t>(o.head_dim);
  nlohmann::json rows = nlohmann::json::array();
  for (const KvFormatTraits& info : format_table()) {
    const Format f(info.id);
    nlohmann::json row = {
        {"name", info.name},       {"id", static_cast<int>(info.id)},
        {"version", info.version}, {"nominal_bits", info.bits},
        {"meaning", info.meaning}, {"searched_by_default", info.default_candidate}};
    // The engines that store it (`--engine`, `kvplan export --to`).
    nlohmann::json engines = nlohmann::json::array();
    for (const EngineSpec& e : all_engines()) {
      if (e.id != EngineId::kKvplan && engine_stores(e, f)) engines.push_back(e.name);
    }
    row["engines"] = engines;
    try {
      const size_t g = static_cast<size_t>(o.group_size);
      const double bytes =
          info.per_channel_keys()
              ? static_cast<double>(channel_group_bytes(f, d, g)) / static_cast<double>(g)
              : static_cast<double>(packed_row_bytes(f, d, g));
      row["bytes_per_row"] = bytes;
      row["effective_bits"] = 8.0 * bytes / static_cast<double>(d);
      row["overhead_bits"] = row["effective_bits"].get<double>() - info.bits;
    } catch (const Error& e) {
      // Block formats say their rule in a few words; the rotated ones (head_dim a power of two)
      // and the rest give the sizing's own reason.
      row["unsupported"] =
          info.block_values() > 0 && !info.rotated()
              ? "needs head_dim a multiple of " + std::to_string(info.block_values())
              : std::string(e.what());
    }
    rows.push_back(row);
  }
  if (o.json) {
    const nlohmann::json out{
        {"head_dim", o.head_dim}, {"group_size", o.group_size}, {"formats", rows}};
    std::printf("%s\n", json_text(out, 2).c_str());
    return;
  }
  std::printf("head_dim %d, int group %d\n\n", o.head_dim, o.group_size);
  std::printf("%-19s %4s %4s %6s %10s %9s %9s  %s\n", "format", "id", "ver", "bits", "bytes/row",
              "eff.bits", "overhead", "meaning");
  for (const nlohmann::json& r : rows) {
    const std::string name =
        r["name"].get<std::string>() + (r["searched_by_default"].get<bool>() ? "" : "*");
    if (r.contains("unsupported")) {
      std::printf("%-19s %4d %4d %6d %10s %9s %9s  (%s)\n", name.c_str(), r["id"].get<int>(),
                  r["version"].get<int>(), r["nominal_bits"].get<int>(), "-", "-", "-",
                  r["unsupported"].get<std::string>().c_str());
      continue;
    }
    std::string engines;
    for (const auto& e : r["engines"])
      engines += (engines.empty() ? "" : ", ") + e.get<std::string>();
    std::printf("%-19s %4d %4d %6d %10.6g %9.3f %9.3f  %s%s\n", name.c_str(), r["id"].get<int>(),
                r["version"].get<int>(), r["nominal_bits"].get<int>(),
                r["bytes_per_row"].get<double>(), r["effective_bits"].get<double>(),
                r["overhead_bits"].get<double>(), r["meaning"].get<std::string>().c_str(),
                engines.empty() ? "" : (" [" + engines + "]").c_str());
  }
  std::printf("%-19s %4d %4d %6s %10s %9s %9s  %s\n", "slot:N", 64, 1, "8N/2D", "N per token", "-",
              "-", "opaque engine slot: N bytes per token per KV head for K and V together");
  std::printf(
      "\n* not a default candidate: searched when named (--formats a,b or --formats all); the\n"
      "  rotated variants model what llama.cpp stores, f32 is never searched\n");
}

}  // namespace

void register_formats_command(CLI::App& app) {
  auto o = std::make_shared<FormatsOptions>();
  CLI::App* cmd = app.add_subcommand("formats", "List KV formats: bits, bytes per row, overhead");
  cmd->footer("Example: kvplan formats --head-dim 64");
  cmd->add_option("--head-dim", o->head_dim, "Values per row (head_dim)");
  cmd->add_option("--group-size", o->group_size, "Group of the int formats (clamped to the row)");
  cmd->add_flag("--json", o->json, "Print JSON");
  cmd->callback([o] { run_formats(*o); });
}

}  // namespace kvplan::cli
