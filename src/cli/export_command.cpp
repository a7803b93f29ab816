// kvplan export: a plan in the form a serving engine accepts (llama.cpp flags, vLLM arguments,
// KVTuner YAML), with notes and every loss: what the engine gets differently, per layer and field.
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/json_text.h"
#include "plan/exporters.h"
#include "plan/plan.h"

namespace kvplan::cli {
namespace {

struct ExportOptions {
  std::string plan, to, output;
  bool json = false;
};

void run_export(const ExportOptions& o) {
  const Plan plan = read_plan(o.plan);
  PlanExport e;
  if (o.to == "llamacpp") {
    e = export_llamacpp(plan);
  } else if (o.to == "vllm") {
    e = export_vllm(plan);
  } else if (o.to == "kvtuner-yaml") {
    e = export_kvtuner_yaml(plan);
  } else {
    fail(ErrorCode::kInvalidArgument, "--to '{}': expected llamacpp, vllm or kvtuner-yaml", o.to);
  }
  if (!o.output.empty())
    write_file_atomic(o.output, e.text.ends_with('\n') ? e.text : e.text + "\n");
  if (o.json) {
    nlohmann::json losses = nlohmann::json::array();
    for (const ExportLoss& l : e.losses) {
      losses.push_back({{"layer", l.layer < 0 ? nlohmann::json(nullptr) : nlohmann::json(l.layer)},
                        {"field", l.field},
                        {"planned", l.planned},
                        {"exported", l.exported},
                        {"reason", l.reason}});
    }
    const nlohmann::json out{{"to", o.to},
                             {"text", e.text},
                             {"exact", e.exact()},
                             {"notes", e.notes},
                             {"losses", losses}};
    std::printf("%s\n", json_text(out, 2).c_str());
    return;
  }
  if (o.output.empty()) std::printf("%s%s", e.text.c_str(), e.text.ends_with('\n') ? "" : "\n");
  for (const std::string& note : e.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  for (const std::string& loss : describe_losses(e.losses))
    std::fprintf(stderr, "loss: %s\n", loss.c_str());
}

}  // namespace

void register_export_command(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* cmd = app.add_subcommand("export", "Export a plan to llama.cpp, vLLM or KVTuner YAML");
  cmd->footer(
      "Examples:\n"
      "  kvplan export --plan plan.json --to llamacpp       # -ctk q8_0 -ctv q4_0 -fa on\n"
      "  kvplan export --plan plan.json --to vllm\n"
      "  kvplan export --plan plan.json --to kvtuner-yaml -o kvtuner.yaml");
  cmd->add_option("--plan", o->plan, "plan.json")->required();
  cmd->add_option("--to", o->to, "llamacpp, vllm or kvtuner-yaml")->required();
  cmd->add_option("-o,--output", o->output, "Write the export to this file");
  cmd->add_flag("--json", o->json, "Print the export and its notes as JSON");
  cmd->callback([o] { run_export(*o); });
}

}  // namespace kvplan::cli
