// kvplan export: a plan in the form a serving engine accepts (llama.cpp and ik_llama.cpp flags,
// vLLM arguments, TensorRT-LLM dtype ranges, ModelOpt's per-layer KV config, KVTuner YAML), with
// notes and every loss: what the engine gets differently, per layer and field.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/search_flags.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "core/json_text.h"
#include "engines/engine.h"
#include "engines/exporters.h"
#include "formats/kv_bytes.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "model/transformer.h"
#include "plan/plan.h"
#include "profile/profile_data.h"
#include "search/held_out_kl.h"
#include "search/held_out_texts.h"
#include "search/paired_stats.h"

namespace kvplan::cli {
namespace {

struct ExportOptions {
  std::string plan, to, output;
  bool json = false;
  // --measure: what the engine runs against the plan, on the report text, with the profile's
  // cache rules (the protocol plan.json's own report numbers were measured with).
  bool measure = false;
  std::string profile, model;
  SearchFlags texts;
};

struct ExportMeasure {
  search::HeldOutKl::Result plan, engine;
  search::PairedInterval difference;  // engine - plan
  double plan_bytes = 0, engine_bytes = 0;
  std::string report;
};

ExportMeasure measure_export(const ExportOptions& o, const Plan& plan, const PlanExport& e) {
  const Profile profile = read_profile(o.profile);
  const ModelWeights weights = load_model_weights(o.model);
  if (profile.model.fingerprint != hash_hex(weights.fingerprint) ||
      plan.model.fingerprint != profile.model.fingerprint) {
    fail(ErrorCode::kInvalidArgument,
         "--measure: the plan ({}), the profile ({}) and the model ({}) must be of one model",
         plan.model.fingerprint, profile.model.fingerprint, hash_hex(weights.fingerprint));
  }
  const std::unique_ptr<Tokenizer> tokenizer = load_model_tokenizer(o.model);
  const search::HeldOutTexts texts = search::load_held_out_texts(
      search_request_from_flags(o.texts).texts, *tokenizer, weights.config, nullptr);
  const Transformer model(weights);
  const search::HeldOutKl kl(
      model, texts.report.prompts,
      {profile.quantization, profile.chunk_attends_quantized, profile.kv_absmax});
  ExportMeasure m;
  std::vector<KvPair> planned;
  for (const PlanLayer& l : plan.layers) planned.push_back(l.pair);
  std::vector<search::HeldOutKl::Result> measured = kl.measure_all({planned, e.runs});
  m.plan = std::move(measured[0]);
  m.engine = std::move(measured[1]);
  m.difference = search::paired_bootstrap(m.engine.kl_sums, m.plan.kl_sums,
                                          m.plan.scored_per_prompt, 2000, 42);
  QuantSettings per_token = plan.quantization;
  m.plan_bytes = kv_bytes_per_token(plan.model.geometry, planned, plan.quantization);
  per_token.mode = QuantMode::kPerToken;
  m.engine_bytes = kv_bytes_per_token(plan.model.geometry, e.runs, per_token);
  m.report = std::filesystem::path(texts.report.source).filename().string();
  return m;
}

void run_export(const ExportOptions& o) {
  const Plan plan = read_plan(o.plan);
  // kvtuner-yaml: the name this export had before every engine had one.
  const std::string to = o.to == "kvtuner-yaml" ? "hf" : o.to;
  EngineId engine{};
  try {
    engine = parse_engine(to);
  } catch (const Error&) {
    fail(ErrorCode::kInvalidArgument, "--to '{}': expected one of {} (or kvtuner-yaml = hf)", o.to,
         engine_names());
  }
  const PlanExport e = export_plan(plan, engine);
  std::optional<ExportMeasure> m;
  if (o.measure) {
    if (o.profile.empty() || o.model.empty()) {
      fail(ErrorCode::kInvalidArgument, "--measure needs --profile and --model");
    }
    m = measure_export(o, plan, e);
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
    nlohmann::json out{{"to", o.to},
                       {"text", e.text},
                       {"exact", e.exact()},
                       {"notes", e.notes},
                       {"losses", losses}};
    if (m) {
      out["measured"] = {{"report", m->report},
                         {"plan_mean_kl", m->plan.mean_kl},
                         {"engine_mean_kl", m->engine.mean_kl},
                         {"engine_minus_plan", m->difference.mean_difference},
                         {"engine_minus_plan_low", m->difference.low},
                         {"engine_minus_plan_high", m->difference.high},
                         {"plan_bytes_per_token", m->plan_bytes},
                         {"engine_bytes_per_token", m->engine_bytes}};
    }
    std::printf("%s\n", json_text(out, 2).c_str());
    return;
  }
  if (o.output.empty()) std::printf("%s%s", e.text.c_str(), e.text.ends_with('\n') ? "" : "\n");
  for (const std::string& note : e.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  for (const std::string& loss : describe_losses(e.losses))
    std::fprintf(stderr, "loss: %s\n", loss.c_str());
  if (m) {
    std::fprintf(stderr,
                 "measured: what %s runs has mean KL %.6f at %.0f B/token, the plan %.6f at %.0f "
                 "B/token on %s; engine - plan %+.6f [%+.6f, %+.6f]\n",
                 std::string(engine_spec(engine).display).c_str(), m->engine.mean_kl,
                 m->engine_bytes, m->plan.mean_kl, m->plan_bytes, m->report.c_str(),
                 m->difference.mean_difference, m->difference.low, m->difference.high);
  }
}

}  // namespace

void register_export_command(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Export a plan to a serving engine's flags or config (llama.cpp, vLLM, ...)");
  cmd->footer(
      "Examples:\n"
      "  kvplan export --plan plan.json --to llamacpp       # -ctk q8_0 -ctv q4_0 -fa on\n"
      "  kvplan export --plan plan.json --to ik-llamacpp    # ... -ctk-first q8_0,2\n"
      "  kvplan export --plan plan.json --to vllm\n"
      "  kvplan export --plan plan.json --to trtllm -o extra-llm-api-options.yaml\n"
      "  kvplan export --plan plan.json --to modelopt -o hf_quant_config.json\n"
      "  kvplan export --plan plan.json --to hf -o kvtuner.yaml\n"
      "A plan searched with --engine E exports to E exactly; to another engine it is mapped to "
      "the\n"
      "nearest configuration that engine runs, every loss listed.");
  cmd->add_option("--plan", o->plan, "plan.json")->required();
  cmd->add_option("--to", o->to,
                  "llamacpp, ik-llamacpp, vllm, trtllm, modelopt or hf (KVTuner YAML)")
      ->required();
  cmd->add_option("-o,--output", o->output, "Write the export to this file");
  cmd->add_flag("--json", o->json, "Print the export and its notes as JSON");
  cmd->add_flag("--measure", o->measure,
                "Measure what the engine runs against the plan on the report text (mean KL, "
                "paired interval); needs --profile and --model");
  cmd->add_option("--profile", o->profile, "With --measure: the profile the plan was searched on");
  cmd->add_option("--model", o->model, "With --measure: the model");
  cmd->add_option("--report", o->texts.report,
                  "With --measure: the report text (default configs/calibration/report.jsonl)");
  cmd->add_option("--ctx", o->texts.ctx, "With --measure: tokens per report window (1024)");
  cmd->callback([o] { run_export(*o); });
}

}  // namespace kvplan::cli
