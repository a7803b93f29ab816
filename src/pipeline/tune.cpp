#include "pipeline/tune.h"

#include <memory>

#include <spdlog/spdlog.h>

#include "core/build_record.h"
#include "core/error.h"
#include "core/hash.h"
#include "engines/engine.h"
#include "model/load_tokenizer.h"
#include "model/transformer.h"
#include "profile/side_candidates.h"

namespace kvplan::pipeline {
namespace {

std::string file_name(const std::filesystem::path& path) {
  return path.filename().string();
}

// An engine search profiles what the engine stores (f32 is the exact side of every profile),
// unless the formats or pairs were named.
ProfileOptions profile_options_for(const ProfileOptions& given, const EngineSpec& engine) {
  ProfileOptions options = given;
  if (engine.id == EngineId::kKvplan || !options.formats.empty() || !options.candidates.empty()) {
    return options;
  }
  for (const Format& f : engine_formats(engine)) {
    if (f.id() != FormatId::kF32) options.formats.push_back(f);
  }
  spdlog::info("--engine {}: profiling its formats {}", engine.name, format_list(options.formats));
  return options;
}

// A byte budget no plan can meet is refused from the formats' sizes, before the profile.
void refuse_budget_below_smallest_plan(const Budget& budget, const ModelConfig& config,
                                       const ProfileOptions& profile, const EngineSpec& engine) {
  if (budget.measure != MemoryMeasure::kBytes) return;
  const std::vector<KvPair> candidates =
      profile.candidates.empty()
          ? catalog_side_candidates(config, profile.settings,
                                    {.formats = profile.formats, .all_dkl = false})
                .candidates
          : profile.candidates;
  const std::vector<int> boundary = engine_boundary_layers(engine, config.n_layers);
  budget.require_at_least(
      smallest_plan_bytes(config, profile.settings, candidates, budget.layer_token_share, boundary),
      boundary.empty() ? "" : boundary_layers_note(engine, config.n_layers));
}

// The --measurements file, opened (and checked) before anything long runs.
std::unique_ptr<search::MeasurementStore> open_measurements(const SearchRequest& request) {
  if (request.measurements.empty()) return nullptr;
  const BuildRecord build = this_build();
  auto store = std::make_unique<search::MeasurementStore>(
      request.measurements,
      fmt::format("kvplan {}; {}; {}; {}; Eigen {}", request.stamp.tool_version, build.isa,
                  build.vector_extensions, build.compiler, build.eigen));
  spdlog::info("measurements {}: {} cells", request.measurements.string(), store->size());
  return store;
}

// The search half on a loaded model and texts.
TunedPlan search_loaded(Profile profile, const Transformer& model,
                        const search::HeldOutTexts& texts, const Budget& budget,
                        const SearchRequest& request, search::MeasurementStore* store) {
  const CalibrationSet& selection_set = texts.selection;
  const CalibrationSet& report_set = texts.report;
  spdlog::info("selection {}: {} windows, {} tokens; report {}: {} windows, {} tokens",
               selection_set.source, selection_set.prompts.size(), selection_set.n_tokens,
               report_set.source, report_set.prompts.size(), report_set.n_tokens);
  const search::HeldOutKl::CacheRules rules{profile.quantization, profile.chunk_attends_quantized,
                                            profile.kv_absmax};
  const search::HeldOutKl selection(model, selection_set.prompts, rules, std::nullopt, store);
  const search::HeldOutKl report(model, report_set.prompts, rules, std::nullopt, store);
  std::optional<search::LongContextKl> long_context;
  if (request.long_context.tokens_per_context > 0 && !request.long_context.contexts.empty()) {
    if (texts.bos_id) {
      long_context.emplace(model, texts.report_stream, *texts.bos_id, rules, request.long_context);
    } else {
      spdlog::warn("long-context KL left out: the model has no BOS token for the chunks");
    }
  }
  search::SearchOptions options = request.options;
  for (const std::filesystem::path& path : request.compare_plans) {
    const Plan other = read_plan(path);
    const KvModel validated = kv_model(model.weights());
    check_plan_matches(other, validated.geometry, validated.name);
    if (other.model.fingerprint != validated.fingerprint) {
      fail(ErrorCode::kInvalidArgument,
           "--compare-plan {}: made for model fingerprint {}, the model given has {}",
           path.string(), other.model.fingerprint, validated.fingerprint);
    }
    if (other.quantization != profile.quantization) {
      const auto text = [](const QuantSettings& q) {
        return fmt::format("{}, group {}, residual {}, block {}", quant_mode_name(q.mode),
                           q.group_size, q.residual_length, q.block_size);
      };
      fail(ErrorCode::kInvalidArgument,
           "--compare-plan {}: its quantization ({}) is not the profile's ({}): both plans are "
           "measured under one set of rules",
           path.string(), text(other.quantization), text(profile.quantization));
    }
    options.compare_plans.push_back({file_name(path.string()), other.kv_config(), other.per_head(),
                                     summarize_plan(other).bytes_per_token});
  }
  TunedPlan t;
  t.profile = std::move(profile);
  t.budget = budget;
  t.selection_file = selection_set.source;
  t.report_file = report_set.source;
  const search::SearchInputs inputs{
      .profile = &t.profile,
      .model = kv_model(model.weights()),
      .budget = budget,
      .options = options,
      .selection = {&selection, nullptr, file_name(selection_set.source), selection_set.hash},
      .report = {&report, long_context ? &*long_context : nullptr, file_name(report_set.source),
                 report_set.hash}};
  t.outcome = search::choose_plan(inputs);
  t.plan = search::record_plan(inputs, t.outcome, request.stamp);
  return t;
}

// The profile of loaded inputs, stamped with the time their loading took.
Profile profile_loaded(const ProfileInputs& in, const Transformer& model,
                       const ProfileOptions& options) {
  Profile profile = run_profile(model, in.calibration, options);
  profile.timings.load_s = in.load_s;
  return profile;
}

}  // namespace

Profile profile_model(const std::filesystem::path& model, const ProfileRequest& request) {
  const ProfileInputs in = load_profile_inputs(model, request.calibration);
  return profile_loaded(in, Transformer(in.weights), request.options);
}

TunedPlan tune(const TuneRequest& request) {
  const EngineSpec& engine = engine_spec(request.search.options.engine);
  ProfileOptions options = profile_options_for(request.profile.options, engine);
  const ProfileInputs in = load_profile_inputs(request.model, request.profile.calibration);
  const ModelConfig& config = in.weights.config;
  // Every input is checked before the long profile: the budget, the texts and their overlap.
  const Budget budget = resolve_budget(request.search.budget, kv_geometry(config));
  refuse_budget_below_smallest_plan(budget, config, options, engine);
  const search::HeldOutTexts texts = search::load_held_out_texts(
      request.search.texts, *in.tokenizer, config, &request.profile.calibration.file);
  const std::unique_ptr<search::MeasurementStore> store = open_measurements(request.search);
  const Transformer model(in.weights);
  Profile profile = profile_loaded(in, model, options);
  if (request.profile.on_profile) request.profile.on_profile(profile);
  return search_loaded(std::move(profile), model, texts, budget, request.search, store.get());
}

TunedPlan search_profile(Profile profile, const std::filesystem::path& model_path,
                         const SearchRequest& request,
                         const std::optional<std::filesystem::path>& calibration,
                         const std::filesystem::path& default_calibration) {
  const ModelWeights weights = load_model_weights(model_path);
  const std::unique_ptr<Tokenizer> tokenizer = load_model_tokenizer(model_path);
  if (profile.model.fingerprint != hash_hex(weights.fingerprint)) {
    fail(ErrorCode::kInvalidArgument,
         "the profile was made for model fingerprint {} ({}), the model given has {}",
         profile.model.fingerprint, profile.model.name, hash_hex(weights.fingerprint));
  }
  // The calibration text, for the overlap check: the one given, or the default when the profile
  // was made on it (same token hash).
  const std::filesystem::path prompts = calibration.value_or(default_calibration);
  std::optional<std::filesystem::path> checked;
  if (std::filesystem::exists(prompts)) {
    const CalibrationSet c = load_calibration(prompts, *tokenizer, weights.config,
                                              {.max_tokens = profile.calibration.max_tokens});
    if (hash_hex(c.hash) == profile.calibration.hash) {
      checked = prompts;
    } else if (calibration) {
      fail(ErrorCode::kInvalidArgument,
           "--prompts {}: its tokens hash to {}, the profile was made on {} ({})",
           calibration->string(), hash_hex(c.hash), profile.calibration.source,
           profile.calibration.hash);
    }
  }
  const Budget budget = resolve_budget(request.budget, kv_geometry(weights.config));
  const search::HeldOutTexts texts = search::load_held_out_texts(
      request.texts, *tokenizer, weights.config, checked ? &*checked : nullptr);
  const std::unique_ptr<search::MeasurementStore> store = open_measurements(request);
  const Transformer model(weights);
  return search_loaded(std::move(profile), model, texts, budget, request, store.get());
}

}  // namespace kvplan::pipeline
