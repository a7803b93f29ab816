// kvplan report: a plan and its profile as one self-contained HTML page (inline SVG charts) or a
// Markdown document.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/file_io.h"
#include "plan/plan.h"
#include "profile/profile_data.h"
#include "report/html_report.h"
#include "report/markdown_report.h"
#include "report/report_data.h"

namespace kvplan::cli {
namespace {

struct ReportOptions {
  std::string profile, plan, output = "report.html", format = "html";
  std::string gpu_memory = "80GiB", weights_bytes;
  std::vector<std::string> contexts = {"4096", "32768", "131072"};
  std::vector<std::string> engine_plans;
};

void run_report(const ReportOptions& o) {
  if (o.format != "html" && o.format != "md") {
    fail(ErrorCode::kInvalidArgument, "--format {}: expected html or md", o.format);
  }
  report::MemoryOptions memory;
  memory.gpu_memory_bytes = parse_byte_size(o.gpu_memory, "--gpu-memory");
  if (!o.weights_bytes.empty()) {
    memory.weights_bytes = parse_byte_size(o.weights_bytes, "--weights-bytes");
  }
  memory.contexts.clear();
  for (const std::string& c : o.contexts)
    memory.contexts.push_back(parse_token_count(c, "--context"));

  const std::filesystem::path profile_path(o.profile), plan_path(o.plan);
  const Plan plan = read_plan(plan_path);
  report::ReportData data =
      report::build_report_data({read_profile(profile_path), profile_path.filename().string()},
                                {plan, plan_path.filename().string()}, memory);
  for (const std::string& p : o.engine_plans) {
    data.engine_plans.push_back(report::engine_plan_row(
        {read_plan(p), std::filesystem::path(p).filename().string()}, plan));
  }
  for (const std::string& w : data.warnings) spdlog::warn("{}", w);
  const std::string text =
      o.format == "html" ? report::html_report(data) : report::markdown_report(data);
  write_file_atomic(o.output, text);
  spdlog::info("report written to {} ({} bytes)", o.output, text.size());
}

}  // namespace

void register_report_command(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "report", "A plan and its profile as a self-contained HTML page or a Markdown document");
  cmd->footer(
      "Examples:\n"
      "  kvplan report --profile profile.json --plan plan.json -o report.html\n"
      "  kvplan report --profile profile.json --plan plan.json --format md -o report.md \\\n"
      "      --gpu-memory 24GiB --weights-bytes 1GiB --context 8K,32K\n"
      "Shows the per-layer sensitivity heatmaps (dKL, e_o), the Pareto front with the uniform\n"
      "baselines, the plan per layer, a memory table, validation and provenance. No network.");
  cmd->add_option("--profile", o->profile, "profile.json the plan was searched on")->required();
  cmd->add_option("--plan", o->plan, "plan.json")->required();
  cmd->add_option("-o,--output", o->output, "File to write (default report.html)");
  cmd->add_option("--format", o->format, "html (default) or md");
  cmd->add_option("--gpu-memory", o->gpu_memory, "GPU memory for 'what fits' (default 80GiB)");
  cmd->add_option("--weights-bytes", o->weights_bytes, "Memory the weights take, e.g. 1GiB");
  cmd->add_option("--engine-plans", o->engine_plans,
                  "Plans searched with --engine at the same budget (comma-separated): a table of "
                  "the best plan per serving engine")
      ->delimiter(',');
  cmd->add_option("--context", o->contexts, "Context lengths (default 4096,32768,131072)")
      ->delimiter(',');
  cmd->callback([o] { run_report(*o); });
}

}  // namespace kvplan::cli
