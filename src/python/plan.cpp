// kvplan.Plan (plan.json, validated exactly as the CLI validates it), its layers, its quantization
// settings, and estimate(): what the plan costs at any context and sequence count.
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/kv_memory_estimate.h"
#include "model/model_weights.h"
#include "plan/plan.h"
#include "plan/plan_fingerprint.h"
#include "python/bindings.h"

namespace nb = nanobind;

namespace kvplan::python {
namespace {

// The KV geometry of a model as Python gives it: per layer (n_kv_heads, head_dim, sliding_window).
KvGeometry geometry_of(const std::string& name,
                       const std::vector<std::tuple<int, int, int64_t>>& layers) {
  KvGeometry g{name, {}};
  for (const auto& [heads, head_dim, window] : layers)
    g.layers.push_back({heads, head_dim, window});
  return g;
}

std::vector<std::tuple<int, int, int64_t>> geometry_rows(const KvGeometry& g) {
  std::vector<std::tuple<int, int, int64_t>> rows;
  for (const KvLayerGeometry& l : g.layers)
    rows.emplace_back(l.n_kv_heads, l.head_dim, l.sliding_window);
  return rows;
}

Plan uniform_plan(const Plan& like, const std::string& pair_text) {
  const KvPair pair = KvPair::parse(pair_text);
  return plan_of_pairs(like.model, std::vector<KvPair>(like.layers.size(), pair),
                       like.quantization);
}

// A plan with `pair` on every layer of the model at `model_path` (the settings validated as the
// CLI's --mode/--group-size/--residual-length are).
Plan model_plan(const std::filesystem::path& model_path, const std::string& pair_text,
                const std::string& mode, size_t group_size, size_t residual_length) {
  const KvPair pair = KvPair::parse(pair_text);
  QuantSettings settings;
  settings.mode = parse_quant_mode(mode);
  settings.group_size = group_size;
  settings.residual_length = residual_length;
  settings.round_block_to_group();
  settings.validate();
  const KvModel model = kv_model(load_model_weights(model_path));
  return plan_of_pairs(model, std::vector<KvPair>(model.geometry.layers.size(), pair), settings);
}

KvMemoryEstimate estimate(const Plan& plan, const std::vector<int64_t>& contexts, int64_t sequences,
                          std::optional<uint64_t> available_bytes) {
  if (sequences <= 0)
    fail(ErrorCode::kInvalidArgument, "sequences: expected > 0, got {}", sequences);
  for (const int64_t c : contexts) {
    if (c <= 0) fail(ErrorCode::kInvalidArgument, "contexts: expected > 0 tokens, got {}", c);
  }
  const std::vector<KvPair> pairs = plan.kv_config();  // per layer, or per KV head
  return estimate_kv_memory(
      plan.model.geometry, pairs, plan.quantization,
      {.contexts = contexts, .sequences = sequences, .available_bytes = available_bytes});
}

}  // namespace

void bind_plan(nb::module_& m) {
  nb::class_<QuantSettings>(m, "QuantSettings", "How a plan quantizes: mode, groups, pages.")
      .def_prop_ro("mode",
                   [](const QuantSettings& s) { return std::string(quant_mode_name(s.mode)); })
      .def_ro("group_size", &QuantSettings::group_size)
      .def_ro("residual_length", &QuantSettings::residual_length)
      .def_ro("block_size", &QuantSettings::block_size)
      .def("__repr__", [](const QuantSettings& s) {
        return "kvplan.QuantSettings(mode='" + std::string(quant_mode_name(s.mode)) +
               "', group_size=" + std::to_string(s.group_size) +
               ", residual_length=" + std::to_string(s.residual_length) +
               ", block_size=" + std::to_string(s.block_size) + ")";
      });

  nb::class_<PlanLayer>(m, "PlanLayer", "One layer of a plan: its key and value formats.")
      .def_ro("index", &PlanLayer::index)
      .def_prop_ro("key", [](const PlanLayer& l) { return l.pair.key.name(); })
      .def_prop_ro("value", [](const PlanLayer& l) { return l.pair.value.name(); })
      .def_prop_ro("pair", [](const PlanLayer& l) { return l.pair.name(); })
      .def_prop_ro("key_fp8_scales", [](const PlanLayer& l) { return l.fp8_scales.key; })
      .def_prop_ro("value_fp8_scales", [](const PlanLayer& l) { return l.fp8_scales.value; })
      .def("__repr__", [](const PlanLayer& l) {
        return "kvplan.PlanLayer(" + std::to_string(l.index) + ", key='" + l.pair.key.name() +
               "', value='" + l.pair.value.name() + "')";
      });

  nb::class_<KvContextBytes>(m, "ContextBytes")
      .def_ro("context", &KvContextBytes::context)
      .def_ro("bytes", &KvContextBytes::bytes)
      .def_ro("bf16_bytes", &KvContextBytes::bf16_bytes)
      .def_prop_ro("compression_vs_bf16", &KvContextBytes::compression_vs_bf16);
  nb::class_<KvMemoryEstimate>(m, "MemoryEstimate",
                               "What a plan's KV cache costs (`kvplan estimate`).")
      .def_ro("bytes_per_token", &KvMemoryEstimate::bytes_per_token)
      .def_ro("equivalent_bits", &KvMemoryEstimate::equivalent_bits)
      .def_ro("contexts", &KvMemoryEstimate::contexts)
      .def_ro("max_context_per_sequence", &KvMemoryEstimate::max_context_per_sequence);

  nb::class_<KlDifference>(m, "KlDifference",
                           "Plan minus baseline mean KL with its paired bootstrap interval.")
      .def_ro("plan_minus_baseline", &KlDifference::plan_minus_baseline)
      .def_ro("low", &KlDifference::low)
      .def_ro("high", &KlDifference::high)
      .def_ro("verdict", &KlDifference::verdict);
  nb::class_<BestUniform>(m, "BestUniform", "The best measured uniform pair beside the plan.")
      .def_ro("kv", &BestUniform::kv)
      .def_ro("mean_kl", &BestUniform::mean_kl)
      .def_ro("difference", &BestUniform::difference)
      .def_ro("ratio", &BestUniform::ratio, "plan / best uniform mean KL");
  nb::class_<AllocationHeadroom>(
      m, "AllocationHeadroom",
      "What allocation alone can gain by the profile's additive surrogate: its best plan within "
      "the budget against the best predicted uniform pair.")
      .def_ro("best_plan_predicted", &AllocationHeadroom::best_plan_predicted)
      .def_ro("best_uniform", &AllocationHeadroom::best_uniform)
      .def_ro("best_uniform_predicted", &AllocationHeadroom::best_uniform_predicted)
      .def_ro("ratio", &AllocationHeadroom::ratio, "best plan / best uniform, predicted");
  nb::class_<PlanQuality>(m, "PlanQuality", "What the search measured about the plan.")
      .def_ro("metric", &PlanQuality::metric)
      .def_ro("mean_kl", &PlanQuality::mean_kl, "On the report text; None when not validated.")
      .def_ro("top1_agreement", &PlanQuality::top1_agreement)
      .def_ro("ppl", &PlanQuality::ppl)
      .def_ro("ppl_exact_kv", &PlanQuality::ppl_exact_kv)
      .def_ro("validated", &PlanQuality::validated)
      .def_ro("chosen_as", &PlanQuality::chosen_as)
      .def_ro("selection_mean_kl", &PlanQuality::selection_mean_kl)
      .def_ro("rank_correlation", &PlanQuality::rank_correlation)
      .def_ro("rank_correlation_on_report", &PlanQuality::rank_correlation_on_report,
              "The surrogate's ranking of the plan and the measured baselines on the report text "
              "(Spearman); None in plans written before it was recorded.")
      .def_ro("best_uniform", &PlanQuality::best_uniform)
      .def_ro("headroom", &PlanQuality::headroom,
              "AllocationHeadroom; None in plans written before it was recorded.");
  nb::class_<UniformBaseline>(m, "UniformBaseline", "A uniform K/V pair beside the plan.")
      .def_ro("kv", &UniformBaseline::kv)
      .def_ro("bytes_per_token", &UniformBaseline::bytes_per_token)
      .def_ro("effective_bits", &UniformBaseline::effective_bits)
      .def_ro("within_budget", &UniformBaseline::within_budget)
      .def_ro("mean_kl", &UniformBaseline::mean_kl, "On the report text; None when not measured.")
      .def_ro("kl_difference", &UniformBaseline::kl_difference)
      .def_ro("measured_because", &UniformBaseline::measured_because,
              "Why the report text measured it ('top 4 predicted', 'best of ggml/turboquant', "
              "...); empty in plans written before the reasons were recorded.");

  nb::class_<Plan>(m, "Plan", "A precision plan (plan.json): per layer the key and value format.")
      .def_static(
          "load", &read_plan, nb::arg("path"),
          "Reads and validates plan.json; raises kvplan.InputError naming the file and field.")
      .def_static(
          "loads",
          [](const std::string& text, const std::string& source) {
            return plan_from_text(text, source);
          },
          nb::arg("text"), nb::arg("source") = "<string>", "Parses plan.json text.")
      .def_static("uniform", &uniform_plan, nb::arg("like"), nb::arg("pair"),
                  "A plan with `pair` (e.g. 'q4_0/q4_0', 'K8V4') on every layer of `like`'s model.")
      .def_static("for_model", &model_plan, nb::arg("model"), nb::arg("pair"),
                  nb::arg("mode") = "per-token", nb::arg("group_size") = 32,
                  nb::arg("residual_length") = 32,
                  "A plan with `pair` on every layer of a model (a .gguf file or an HF directory).")
      .def(
          "save", [](const Plan& p, const std::filesystem::path& path) { write_plan(path, p); },
          nb::arg("path"), "Writes plan.json atomically (temp file + rename).")
      .def("to_json", [](const Plan& p) { return plan_to_json(p).dump(2); })
      .def_prop_ro("model_name", [](const Plan& p) { return p.model.name; })
      .def_prop_ro("architecture", [](const Plan& p) { return p.model.architecture; })
      .def_prop_ro("n_layers", [](const Plan& p) { return static_cast<int>(p.layers.size()); })
      .def_prop_ro(
          "geometry", [](const Plan& p) { return geometry_rows(p.model.geometry); },
          "Per layer (n_kv_heads, head_dim, sliding_window).")
      .def_ro("layers", &Plan::layers)
      .def_ro("quantization", &Plan::quantization)
      .def_prop_ro(
          "quality", [](const Plan& p) { return p.results.quality; },
          "What the search measured (report-text KL, best uniform pair, ...).")
      .def_prop_ro(
          "baselines", [](const Plan& p) { return p.results.baselines; },
          "The uniform pairs beside the plan, measured ones with their KL.")
      .def_prop_ro("bytes_per_token",
                   [](const Plan& p) { return summarize_plan(p).bytes_per_token; })
      .def_prop_ro("effective_bits", [](const Plan& p) { return summarize_plan(p).effective_bits; })
      .def_prop_ro("equivalent_bits",
                   [](const Plan& p) { return summarize_plan(p).equivalent_bits; })
      .def_prop_ro("compression_ratio",
                   [](const Plan& p) { return summarize_plan(p).compression_ratio; })
      .def_prop_ro("fingerprint",
                   [](const Plan& p) { return fmt::format("{:016x}", plan_fingerprint(p)); })
      .def(
          "check_model",
          [](const Plan& p, const std::string& name,
             const std::vector<std::tuple<int, int, int64_t>>& layers, const std::string& source) {
            check_plan_matches(p, geometry_of(name, layers), source);
          },
          nb::arg("name"), nb::arg("layers"), nb::arg("source"),
          "Raises kvplan.InputError when the model (per layer (n_kv_heads, head_dim, "
          "sliding_window)) is not the one the plan is for, saying what differs.")
      .def("__repr__", [](const Plan& p) {
        return fmt::format("kvplan.Plan('{}', {} layers, {:.0f} B/token)", p.model.name,
                           p.layers.size(), summarize_plan(p).bytes_per_token);
      });

  m.def("estimate", &estimate, nb::arg("plan"), nb::arg("contexts"), nb::arg("sequences") = 1,
        nb::arg("available_bytes") = nb::none(),
        "The plan's KV bytes at each context (tokens per sequence) and the longest context that "
        "fits `available_bytes`, as `kvplan estimate` computes them.");
}

}  // namespace kvplan::python
