// kvplan formats: every KV format with its nominal bits, bytes per row and overhead (row_cost of
// formats/format_size.h) and the engines that store it.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// One line of the registry with what it costs at the asked head_dim and group.
struct FormatRow {
  KvFormatTraits format;
  std::vector<std::string_view> engines;  // that store it (`--engine`, `kvplan export --to`)
  std::optional<RowCost> cost;            // absent when the format cannot pack such a row
  std::string unsupported;                // why, then
};

struct FormatsResult {
  int head_dim = 0, group_size = 0;
  std::vector<FormatRow> rows;
};

FormatsResult list_formats(const FormatsOptions& o) {
  if (o.head_dim <= 0 || o.group_size <= 0) {
    fail(ErrorCode::kInvalidArgument, "--head-dim and --group-size must be > 0");
  }
  FormatsResult r{.head_dim = o.head_dim, .group_size = o.group_size, .rows = {}};
  for (const KvFormatTraits& info : format_table()) {
    const Format f(info.id);
    FormatRow row{.format = info, .engines = {}, .cost = {}, .unsupported = {}};
    for (const EngineSpec& e : all_engines()) {
      if (e.id != EngineId::kKvplan && engine_stores(e, f)) row.engines.push_back(e.name);
    }
    try {
      row.cost = row_cost(f, static_cast<size_t>(o.head_dim), static_cast<size_t>(o.group_size));
    } catch (const Error& e) {
      // Block formats say their rule in a few words; the rotated ones (head_dim a power of two)
      // and the rest give the sizing's own reason.
      row.unsupported = info.block_values() > 0 && !info.rotated()
                            ? "needs head_dim a multiple of " + std::to_string(info.block_values())
                            : std::string(e.what());
    }
    r.rows.push_back(std::move(row));
  }
  return r;
}

nlohmann::json to_json(const FormatsResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const FormatRow& f : r.rows) {
    const KvFormatTraits& info = f.format;
    nlohmann::json row = {
        {"name", info.name},       {"id", static_cast<int>(info.id)},
        {"version", info.version}, {"nominal_bits", info.bits},
        {"meaning", info.meaning}, {"searched_by_default", info.default_candidate},
        {"engines", f.engines}};
    if (f.cost) {
      row["bytes_per_row"] = f.cost->bytes;
      row["effective_bits"] = f.cost->effective_bits;
      row["overhead_bits"] = f.cost->overhead_bits;
    } else {
      row["unsupported"] = f.unsupported;
    }
    rows.push_back(row);
  }
  return {{"head_dim", r.head_dim}, {"group_size", r.group_size}, {"formats", rows}};
}

void print_text(const FormatsResult& r) {
  std::printf("head_dim %d, int group %d\n\n", r.head_dim, r.group_size);
  std::printf("%-19s %4s %4s %6s %10s %9s %9s  %s\n", "format", "id", "ver", "bits", "bytes/row",
              "eff.bits", "overhead", "meaning");
  for (const FormatRow& f : r.rows) {
    const KvFormatTraits& info = f.format;
    const std::string name = std::string(info.name) + (info.default_candidate ? "" : "*");
    if (!f.cost) {
      std::printf("%-19s %4d %4d %6d %10s %9s %9s  (%s)\n", name.c_str(), static_cast<int>(info.id),
                  static_cast<int>(info.version), info.bits, "-", "-", "-", f.unsupported.c_str());
      continue;
    }
    std::string engines;
    for (const std::string_view e : f.engines) {
      engines += (engines.empty() ? "" : ", ") + std::string(e);
    }
    std::printf("%-19s %4d %4d %6d %10.6g %9.3f %9.3f  %s%s\n", name.c_str(),
                static_cast<int>(info.id), static_cast<int>(info.version), info.bits, f.cost->bytes,
                f.cost->effective_bits, f.cost->overhead_bits, info.meaning,
                engines.empty() ? "" : (" [" + engines + "]").c_str());
  }
  std::printf("%-19s %4d %4d %6s %10s %9s %9s  %s\n", "slot:N", 64, 1, "8N/2D", "N per token", "-",
              "-", "opaque engine slot: N bytes per token per KV head for K and V together");
  std::printf(
      "\n* not a default candidate: searched when named (--formats a,b or --formats all); the\n"
      "  rotated variants model what llama.cpp stores, f32 is never searched\n");
}

void run_formats(const FormatsOptions& o) {
  const FormatsResult result = list_formats(o);
  if (o.json) {
    std::printf("%s\n", json_text(to_json(result), 2).c_str());
  } else {
    print_text(result);
  }
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
