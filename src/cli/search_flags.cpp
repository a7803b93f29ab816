#include "cli/search_flags.h"

#include <chrono>
#include <ctime>
#include <filesystem>

#include "cli/cli_util.h"
#include "core/error.h"
#include "engines/engine.h"

namespace kvplan::cli {

void add_search_flags(CLI::App* cmd, SearchFlags& f) {
  cmd->add_option("--max-bits", f.max_bits,
                  "Budget: effective bits per K/V value, scales and zero points included (real "
                  "bytes), e.g. 4.5 (= q4_0) or 3");
  cmd->add_option("--max-nominal-bits", f.max_nominal_bits,
                  "Budget in KVTuner's nominal (equivalent) bits, for comparison with the paper");
  cmd->add_option("--max-bytes-per-token", f.max_bytes_per_token,
                  "Budget: KV bytes per token over all layers");
  cmd->add_option("--gpu-memory", f.gpu_memory,
                  "Budget from memory: GPU memory (with --context, --sequences, --weights-bytes)");
  cmd->add_option("--weights-bytes", f.weights_bytes, "Memory the weights take, e.g. 16GB");
  cmd->add_option("--context", f.context, "Tokens per sequence the budget must hold, e.g. 32K");
  cmd->add_option("--sequences", f.sequences, "Concurrent sequences the budget must hold");
  cmd->add_option("--metric", f.metric, "Sensitivity the surrogate adds up: dkl or e_o");
  cmd->add_option("--memory", f.memory,
                  "Memory objective without a budget: bytes (default) or bits (nominal)");
  cmd->add_option("--engine", f.engine,
                  "Search only what this serving engine can run, its formats and its per-layer "
                  "structure: " +
                      engine_names() + " (default kvplan: any format on any layer)");
  cmd->add_option("--cluster", f.cluster,
                  "DBSCAN layer groups: auto (used only when they cost < 1 % against the exact "
                  "front), on or off");
  cmd->add_option("--eps", f.eps, "DBSCAN radius for grouping layers (KVTuner: 0.05)");
  cmd->add_option("--min-samples", f.min_samples, "DBSCAN min_samples (KVTuner: 2)");
  cmd->add_option("--population", f.population, "NSGA-II population per island (multiple of 4)");
  cmd->add_option("--generations", f.generations, "NSGA-II generations");
  cmd->add_option("--seed", f.seed, "Random seed: same inputs and seed give the same plan");
  cmd->add_option("--islands", f.islands, "Independent NSGA-II islands, evolved in parallel");
  cmd->add_option("--rounds", f.max_rounds, "Validation rounds at most");
  cmd->add_option("--plans-per-round", f.plans_per_round, "Plans measured on the model per round");
  cmd->add_option("--max-evaluations", f.max_evaluations, "Real evaluations of plans at most");
  cmd->add_option("--uniform-validations", f.uniform_validations,
                  "Best-predicted uniform configurations measured on the selection text");
  cmd->add_option("--report-baselines", f.report_baselines,
                  "Best-predicted uniform configurations within the budget measured on the "
                  "report text (0 = all), besides each format-family pairing's best, those "
                  "within 3 % of the budget among the top 20 predicted and the engines' defaults");
  cmd->add_option("--selection,--validation", f.selection,
                  "Selection text (text or JSONL): chooses among the validated plans");
  cmd->add_option("--report", f.report,
                  "Report text: measures the chosen plan and the baselines, never chooses");
  cmd->add_option("--ctx", f.ctx,
                  "Tokens per window of the selection and report texts (default 1024)");
  cmd->add_option("--windows-per-sample", f.windows_per_sample,
                  "Windows of --ctx tokens taken from each selection/report sample (default 1: "
                  "the first; 0: the whole sample)");
  cmd->add_option("--long-context", f.long_contexts,
                  "Contexts at which the plan and the best uniform baseline are also measured "
                  "on the report text read as one stream (default 256,2048,8192; longer than "
                  "the model's context: left out)")
      ->delimiter(',');
  cmd->add_option("--long-context-tokens", f.long_context_tokens,
                  "Tokens run per long context and configuration (default 8192; 0: no "
                  "long-context measurement)");
  cmd->add_flag("--per-head", f.per_head,
                "Give each KV head of a layer its own key and value formats (a per-KV-head plan, "
                "schema kvplan.plan/v3; needs a profile with per-head o_mse)");
  cmd->add_option("--compare-plan", f.compare_plans,
                  "A plan.json of the same model and settings measured on the report text beside "
                  "the chosen plan, with a paired interval (repeatable; e.g. the per-layer plan "
                  "of the same budget)");
  cmd->add_option("--measurements", f.measurements,
                  "A file that keeps every configuration measured on a prompt (JSON lines, "
                  "created if missing): a search stopped and run again, or one at another "
                  "budget of the same model, texts and settings, reads those back instead of "
                  "measuring them again (the same bits)");
  cmd->add_flag("--allow-overlap", f.allow_overlap,
                "Accept calibration, selection and report texts that share samples or runs of "
                "64 bytes");
}

namespace {

BudgetRequest budget_request(const SearchFlags& f) {
  if (f.memory != "bits" && f.memory != "bytes") {
    fail(ErrorCode::kInvalidArgument, "--memory '{}': expected bits or bytes", f.memory);
  }
  const int budgets = (f.max_bits > 0) + (f.max_nominal_bits > 0) + (f.max_bytes_per_token > 0) +
                      !f.gpu_memory.empty();
  if (budgets > 1) {
    fail(ErrorCode::kInvalidArgument,
         "--max-bits, --max-nominal-bits, --max-bytes-per-token and --gpu-memory are alternative "
         "budgets");
  }
  if (f.max_bits < 0 || f.max_nominal_bits < 0 || f.max_bytes_per_token < 0) {
    fail(ErrorCode::kInvalidArgument, "budgets must be positive");
  }
  if (f.max_bits > 0) return BudgetRequest::effective_bits(f.max_bits);
  if (f.max_nominal_bits > 0) return BudgetRequest::nominal_bits(f.max_nominal_bits);
  if (f.max_bytes_per_token > 0) return BudgetRequest::bytes_per_token(f.max_bytes_per_token);
  if (!f.gpu_memory.empty()) {
    if (f.context.empty()) fail(ErrorCode::kInvalidArgument, "--gpu-memory needs --context");
    return BudgetRequest::gpu_memory(
        parse_byte_size(f.gpu_memory, "--gpu-memory"),
        f.weights_bytes.empty() ? 0 : parse_byte_size(f.weights_bytes, "--weights-bytes"),
        parse_token_count(f.context, "--context"), f.sequences, f.gpu_memory, f.weights_bytes,
        f.context);
  }
  return BudgetRequest::none(f.memory == "bits" ? MemoryMeasure::kBits : MemoryMeasure::kBytes);
}

search::SearchOptions search_options(const SearchFlags& f) {
  search::SearchOptions o;
  if (f.metric == "dkl") {
    o.metric = SensitivityMetric::kDkl;
  } else if (f.metric == "e_o") {
    o.metric = SensitivityMetric::kEo;
  } else {
    fail(ErrorCode::kInvalidArgument, "--metric '{}': expected dkl or e_o", f.metric);
  }
  o.engine = parse_engine(f.engine);
  require_packable(engine_spec(o.engine));
  if (f.cluster == "auto") {
    o.cluster = search::ClusterMode::kAuto;
  } else if (f.cluster == "on") {
    o.cluster = search::ClusterMode::kOn;
  } else if (f.cluster == "off") {
    o.cluster = search::ClusterMode::kOff;
  } else {
    fail(ErrorCode::kInvalidArgument, "--cluster '{}': expected auto, on or off", f.cluster);
  }
  if (f.uniform_validations < 0 || f.report_baselines < 0) {
    fail(ErrorCode::kInvalidArgument, "--uniform-validations and --report-baselines must be >= 0");
  }
  o.uniform_validations = f.uniform_validations;
  o.report_baselines.top = f.report_baselines;
  o.dbscan = {.eps = f.eps, .min_samples = f.min_samples};
  o.nsga2.population = f.population;
  o.nsga2.generations = f.generations;
  o.nsga2.seed = f.seed;
  o.nsga2.islands = f.islands;
  o.nsga2.validate();
  o.loop.max_rounds = f.max_rounds;
  o.loop.plans_per_round = f.plans_per_round;
  o.loop.max_evaluations = f.max_evaluations;
  o.loop.validate();
  if (f.per_head) {
    if (o.metric != SensitivityMetric::kDkl) {
      fail(ErrorCode::kInvalidArgument,
           "--per-head takes --metric dkl (a head's share of o_mse apportions dKL; e_o has none)");
    }
    o.granularity = KvGranularity::kHead;
  }
  return o;
}

}  // namespace

pipeline::SearchRequest search_request_from_flags(const SearchFlags& f) {
  pipeline::SearchRequest r;
  r.budget = budget_request(f);
  r.options = search_options(f);
  if (f.ctx < 16) fail(ErrorCode::kInvalidArgument, "--ctx {}: expected at least 16", f.ctx);
  if (f.windows_per_sample < 0) {
    fail(ErrorCode::kInvalidArgument, "--windows-per-sample {}: expected >= 0",
         f.windows_per_sample);
  }
  if (f.long_context_tokens < 0) {
    fail(ErrorCode::kInvalidArgument, "--long-context-tokens {}: expected >= 0",
         f.long_context_tokens);
  }
  for (const int ctx : f.long_contexts) {
    if (ctx < 4) fail(ErrorCode::kInvalidArgument, "--long-context {}: expected >= 4", ctx);
  }
  r.texts = {.selection = f.selection.empty() ? config_dir() / "calibration" / "selection.jsonl"
                                              : std::filesystem::path(f.selection),
             .report = f.report.empty() ? config_dir() / "calibration" / "report.jsonl"
                                        : std::filesystem::path(f.report),
             .ctx = f.ctx,
             .windows_per_sample = f.windows_per_sample,
             .allow_overlap = f.allow_overlap};
  r.long_context = {.contexts = f.long_contexts, .tokens_per_context = f.long_context_tokens};
  for (const std::string& p : f.compare_plans) r.compare_plans.emplace_back(p);
  r.measurements = f.measurements;
  r.stamp = {.tool_version = KVPLAN_VERSION, .created = utc_timestamp()};
  return r;
}

std::string utc_timestamp() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace kvplan::cli
