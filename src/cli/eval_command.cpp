// kvplan eval: perplexity (llama-perplexity's protocol), mean KL and top-1 agreement against exact
// KV, and tokens/s of a model under a KV-cache configuration (a plan, a uniform pair, or exact).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/device_option.h"
#include "cli/eval_passkey.h"
#include "cli/kv_flags.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "core/json_fields.h"
#include "core/json_text.h"
#include "formats/kv_pair.h"
#include "model/eval.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "model/transformer.h"
#include "plan/plan.h"

namespace kvplan::cli {
namespace {

struct EvalCommandOptions {
  std::string task = "perplexity";
  std::string model, text_path, prompts_path;
  KvFlags kv;
  std::vector<int> contexts{256};
  int threads = 0;
  int max_chunks = 0;
  std::string device = "auto";
  bool exact_chunk = false;
  bool json = false;
  PasskeyOptions passkey;
  bool contexts_given = false;
  bool passkey_flags_given = false;
};

// Prompts: one per line; a line starting with '{' is JSON with a "text" or "prompt" string field
// ("text" when both are there).
std::vector<std::string> read_prompts(const std::string& path) {
  const std::string text = read_text_file(path);
  std::vector<std::string> prompts;
  size_t start = 0, line_no = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty() && line.front() == '{') {
      const std::string source = fmt::format("{}:{}", path, line_no);
      const nlohmann::json j = parse_json_text(line, source);
      const JsonFields fields(j, source);
      if (!j.contains("text") && !j.contains("prompt")) {
        fields.invalid(R"(expected a string field "text" or "prompt")");
      }
      // A present "text" is the prompt even when it is not a string (null included): refused, not
      // passed over for "prompt".
      line = fields.string(j.contains("text") ? "text" : "prompt");
    }
    if (!line.empty()) prompts.push_back(line);
    start = end + 1;
  }
  if (prompts.empty())
    fail(ErrorCode::kInvalidArgument, "{}: no prompts (the file is empty)", path);
  return prompts;
}

// The KV cache an evaluation ran with, as its result records it.
struct KvCacheDescription {
  std::optional<std::string> plan;        // --plan's path
  std::optional<std::string> fp8_scales;  // when a layer stores FP8: "plan" or "1 (uncalibrated)"
  std::string kv;                         // KvCacheOptions::describe(): "K8V4", "mixed (30 layers)"
  QuantSettings settings;
  bool any_kivi = false;  // a layer runs KIVI: its residual length is recorded
  bool chunk_attends_quantized = true;
};

KvCacheOptions kv_options(const EvalCommandOptions& o, const ModelConfig& config,
                          KvCacheDescription& described) {
  const ResolvedKv resolved = resolve_kv_flags(o.kv, kv_geometry(config), config.source, {});
  if (resolved.choices.size() > 1) {
    fail(ErrorCode::kInvalidArgument, "--plan, --kv and --k-format/--v-format are alternatives");
  }
  if (resolved.plan) described.plan = resolved.plan_path;
  const QuantSettings& settings = resolved.settings;
  std::vector<KvPair> pairs =
      resolved.choices.empty() ? std::vector<KvPair>{} : resolved.choices.front().pairs;
  KvCacheOptions kv = pairs.empty()
                          ? KvCacheOptions::exact_kv()
                          : KvCacheOptions::of_config(pairs, kv_geometry(config), settings);
  kv.chunk_attends_quantized = !o.exact_chunk;
  // A plan carries its FP8 layers' calibrated per-head scales; --kv/--k-format have none (1).
  if (resolved.plan && !kv.exact) kv.fp8_scales = resolved.plan->fp8_scales();
  const bool any_fp8 = std::any_of(kv.pairs.begin(), kv.pairs.end(), [](const KvPair& p) {
    return p.key.has_tensor_scale() || p.value.has_tensor_scale();
  });
  if (any_fp8) described.fp8_scales = kv.fp8_scales.empty() ? "1 (uncalibrated)" : "plan";
  described.kv = kv.describe();
  described.settings = settings;
  described.any_kivi = std::any_of(kv.pairs.begin(), kv.pairs.end(),
                                   [&](const KvPair& p) { return layer_runs_kivi(p, settings); });
  described.chunk_attends_quantized = kv.chunk_attends_quantized;
  return kv;
}

nlohmann::json to_json(const KvCacheDescription& d) {
  nlohmann::json j;
  if (d.plan) j["plan"] = *d.plan;
  if (d.fp8_scales) j["fp8_scales"] = *d.fp8_scales;
  j["kv"] = d.kv;
  j["mode"] = quant_mode_name(d.settings.mode);
  j["group_size"] = d.settings.group_size;
  if (d.any_kivi) j["residual_length"] = d.settings.residual_length;
  j["chunk_attends_quantized"] = d.chunk_attends_quantized;
  return j;
}

// The requested context lengths the model and the text can take, in the order given; the others
// are left out with a log line, and none left is an error.
std::vector<int> usable_contexts(const std::vector<int>& requested, int64_t model_context,
                                 size_t n_tokens, const std::string& text_path) {
  std::vector<int> usable;
  for (const int ctx : requested) {
    if (ctx < 4) fail(ErrorCode::kInvalidArgument, "--ctx {}: expected at least 4 tokens", ctx);
    if (model_context > 0 && ctx > model_context) {
      spdlog::warn("--ctx {}: left out, longer than the model's context of {} tokens", ctx,
                   model_context);
    } else if (static_cast<size_t>(ctx) > n_tokens) {
      spdlog::warn("--ctx {}: left out, {} has only {} tokens", ctx, text_path, n_tokens);
    } else {
      usable.push_back(ctx);
    }
  }
  if (usable.empty()) {
    fail(ErrorCode::kInvalidArgument,
         "--ctx: no length fits both the model's context ({} tokens) and {} ({} tokens)",
         model_context, text_path, n_tokens);
  }
  return usable;
}

// What an evaluation scored: a text with llama-perplexity's protocol, or prompts each whole.
struct EvalData {
  std::string path;
  bool prompts = false;
  size_t count = 0;        // the text's tokens, or the prompts
  uint64_t text_hash = 0;  // a text's
  [[nodiscard]] const char* protocol() const {
    return prompts ? "each prompt from an empty cache, every next token scored"
                   : "llama-perplexity: chunks of ctx tokens, BOS first, second half scored";
  }
};

struct EvalReport {
  std::string model_path, model_name;
  uint64_t fingerprint = 0;
  KvCacheDescription kv_cache;
  bool compared = false;  // a quantized cache against exact KV: KL and top-1 were measured
  int threads = 0;
  std::string device_selected;
  EvalData data;
  std::vector<std::pair<int, EvalResult>> results;  // (ctx, result); one with ctx 0 for prompts
};

EvalReport evaluate(const EvalCommandOptions& o) {
  if (o.text_path.empty() == o.prompts_path.empty()) {
    fail(ErrorCode::kInvalidArgument, "give exactly one of --text FILE and --prompts FILE");
  }
  const DeviceChoice device = resolve_device_option(o.device);
  if (device.use_gpu) {
    spdlog::info("eval: the embedded forward pass has no GPU path yet; it runs on the CPU");
  }
  set_compute_threads(o.threads);
  const auto load_start = std::chrono::steady_clock::now();
  const ModelWeights weights = load_model_weights(o.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_model_tokenizer(o.model);
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
  spdlog::info("loaded {} ({} layers, {:.1f}M parameters) in {:.2f} s", weights.config.name,
               weights.config.n_layers, static_cast<double>(weights.n_parameters()) / 1e6, load_s);
  const Transformer model(weights);

  EvalReport report;
  report.model_path = o.model;
  report.model_name = weights.config.name;
  report.fingerprint = weights.fingerprint;
  EvalOptions eval;
  eval.kv = kv_options(o, weights.config, report.kv_cache);
  eval.max_chunks = o.max_chunks;
  eval.progress = [](int done, int total) {
    if (done == total || done % 8 == 0) spdlog::info("evaluated {}/{}", done, total);
  };
  report.compared = !eval.kv.exact;
  report.threads = compute_threads();
  report.device_selected = device.description;

  if (!o.text_path.empty()) {
    const std::string text = read_text_file(o.text_path);
    if (text.empty()) fail(ErrorCode::kInvalidArgument, "{}: the text file is empty", o.text_path);
    const std::vector<int32_t> tokens = tokenizer->encode(text, {.add_bos = true});
    const std::optional<int32_t> bos = tokenizer->bos_id();
    if (!bos)
      fail(ErrorCode::kInvalidArgument,
           "{}: the model has no BOS token, which llama-perplexity's protocol needs", o.model);
    const std::vector<int> contexts =
        usable_contexts(o.contexts, weights.config.context_length, tokens.size(), o.text_path);
    for (const int ctx : contexts) {
      eval.n_ctx = ctx;
      report.results.emplace_back(ctx, evaluate_perplexity(model, tokens, *bos, eval));
    }
    report.data = {
        .path = o.text_path, .prompts = false, .count = tokens.size(), .text_hash = hash64(text)};
  } else {
    if (o.contexts.size() > 1) {
      fail(ErrorCode::kInvalidArgument,
           "--ctx with several lengths needs --text: --prompts scores each prompt whole");
    }
    std::vector<std::vector<int32_t>> prompts;
    for (const std::string& p : read_prompts(o.prompts_path)) {
      prompts.push_back(tokenizer->encode(p, {.add_bos = true}));
    }
    report.results.emplace_back(0, evaluate_prompts(model, prompts, eval));
    report.data = {
        .path = o.prompts_path, .prompts = true, .count = prompts.size(), .text_hash = 0};
  }
  return report;
}

nlohmann::json to_json(const EvalResult& r, bool compared) {
  nlohmann::json j = {{"ppl", r.ppl},
                      {"ppl_stderr", r.ppl_stderr},
                      {"ppl_exact_kv", r.ppl_exact},
                      {"chunks", r.n_chunks},
                      {"scored_tokens", r.n_scored},
                      {"tokens_per_second", r.tokens_per_second}};
  if (compared) {
    j["mean_kl"] = r.mean_kl;
    j["max_kl"] = r.max_kl;
    j["top1_agreement"] = r.top1_agreement;
  }
  return j;
}

nlohmann::json to_json(const EvalReport& r) {
  nlohmann::json out;
  out["model"] = {
      {"path", r.model_path}, {"name", r.model_name}, {"fingerprint", hash_hex(r.fingerprint)}};
  out["kv_cache"] = to_json(r.kv_cache);
  out["threads"] = r.threads;
  // The embedded forward pass and its KV quantization have no GPU path yet: whatever --device
  // selected, say where each part really ran.
  out["device"] = {{"selected", r.device_selected},
                   {"forward", "cpu"},
                   {"kv_quantization", "cpu"},
                   {"gpu_used", false}};
  if (r.data.prompts) {
    out["data"] = {
        {"prompts", r.data.path}, {"count", r.data.count}, {"protocol", r.data.protocol()}};
    out["result"] = to_json(r.results.front().second, r.compared);
    return out;
  }
  out["data"] = {{"text", r.data.path},
                 {"tokens", r.data.count},
                 {"hash", hash_hex(r.data.text_hash)},
                 {"protocol", r.data.protocol()}};
  out["results"] = nlohmann::json::array();
  for (const auto& [ctx, result] : r.results) {
    nlohmann::json j = to_json(result, r.compared);
    j["ctx"] = ctx;
    out["results"].push_back(std::move(j));
  }
  if (r.results.size() == 1) out["result"] = out["results"][0];
  return out;
}

void print_context_table(const std::vector<std::pair<int, EvalResult>>& results, bool compared) {
  std::printf("%7s %7s %8s %9s %9s %10s %8s %7s %9s\n", "ctx", "chunks", "scored", "PPL",
              "PPL exact", "mean KL", "max KL", "top-1", "tokens/s");
  for (const auto& [ctx, r] : results) {
    std::printf("%7d %7d %8lld %9.4f", ctx, r.n_chunks, static_cast<long long>(r.n_scored), r.ppl);
    if (compared) {
      std::printf(" %9.4f %10.6f %8.4f %6.2f%%", r.ppl_exact, r.mean_kl, r.max_kl,
                  100.0 * r.top1_agreement);
    } else {
      std::printf(" %9s %10s %8s %7s", "-", "-", "-", "-");
    }
    std::printf(" %9.0f\n", r.tokens_per_second);
  }
}

void print_text(const EvalReport& report) {
  std::printf("model        %s (%s)\n", report.model_name.c_str(), report.model_path.c_str());
  std::printf("kv cache     %s, mode %s, group %zu\n", report.kv_cache.kv.c_str(),
              std::string(quant_mode_name(report.kv_cache.settings.mode)).c_str(),
              report.kv_cache.settings.group_size);
  std::printf("data         %s\n", report.data.protocol());
  if (report.results.size() > 1) {
    print_context_table(report.results, report.compared);
    return;
  }
  const auto& [ctx, r] = report.results.front();
  if (ctx > 0) std::printf("ctx          %d tokens, %d chunks\n", ctx, r.n_chunks);
  std::printf("PPL          %.4f +/- %.4f  (%lld scored tokens)\n", r.ppl, r.ppl_stderr,
              static_cast<long long>(r.n_scored));
  if (report.compared) {
    std::printf("PPL exact KV %.4f\n", r.ppl_exact);
    std::printf("mean KL      %.6f nats (max %.4f)\n", r.mean_kl, r.max_kl);
    std::printf("top-1 agree  %.2f %%\n", 100.0 * r.top1_agreement);
  }
  std::printf("speed        %.0f tokens/s (%d threads)\n", r.tokens_per_second, report.threads);
}

void run_eval(const EvalCommandOptions& o) {
  if (o.task == "passkey") {
    if (!o.prompts_path.empty()) {
      fail(ErrorCode::kInvalidArgument, "--task passkey builds its prompts: --prompts is not used");
    }
    if (o.max_chunks != 0)
      fail(ErrorCode::kInvalidArgument, "--task passkey: --chunks is not used");
    PasskeyRequest r{.model = o.model,
                     .text_path = o.text_path,
                     .kv = o.kv,
                     .task = o.passkey,
                     .threads = o.threads,
                     .exact_chunk = o.exact_chunk,
                     .json = o.json};
    if (o.contexts_given) r.task.contexts.assign(o.contexts.begin(), o.contexts.end());
    run_passkey_eval(r);
    return;
  }
  if (o.passkey_flags_given) {
    fail(ErrorCode::kInvalidArgument,
         "--depths, --haystacks, --keys, --seed and --chat need --task passkey");
  }
  const EvalReport report = evaluate(o);
  if (o.json) {
    std::printf("%s\n", json_text(to_json(report), 2).c_str());
  } else {
    print_text(report);
  }
}

}  // namespace

void register_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalCommandOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Perplexity, KL and top-1 agreement vs exact KV of a model under a KV-cache config");
  cmd->footer(
      "Example: kvplan eval --model stories260K.gguf --text tinystories-valid-sample.txt --kv "
      "K8V4\n"
      "       kvplan eval --model SmolLM2-135M-Instruct.Q4_1.gguf --text long.txt --plan plan.json "
      "--ctx 256,2048,8192\n"
      "With --text, PPL follows llama-perplexity (-c CTX): chunks of CTX tokens, BOS first, only\n"
      "the second half of each chunk scored, so numbers compare with llama.cpp's.\n"
      "       kvplan eval --task passkey --model SmolLM2-135M-Instruct.Q4_1.gguf --text "
      "tinystories-valid-sample.txt --plan plan.json --kv int4_kivi/tq_mse3 --ctx 1024,4096");
  cmd->add_option("--task", o->task,
                  "perplexity (default: PPL, KL, top-1) or passkey (pass-key retrieval at long "
                  "context; --plan and --kv together compare both with exact KV)")
      ->check(CLI::IsMember({"perplexity", "passkey"}));
  cmd->add_option("--model", o->model, "A .gguf file or an HF model directory")->required();
  cmd->add_option("--text", o->text_path,
                  "Plain text evaluated with llama-perplexity's protocol (passkey: the filler)");
  cmd->add_option("--prompts", o->prompts_path, "One prompt per line (or JSONL with \"text\")");
  add_kv_flags(cmd, o->kv, /*several_pairs=*/false);
  cmd->add_option("--ctx", o->contexts,
                  "Chunk length in tokens with --text (default 256); several, e.g. 256,2048,8192, "
                  "give one result per length (lengths above the model's context are left out)")
      ->delimiter(',');
  cmd->add_option("--chunks", o->max_chunks, "Evaluate at most this many chunks (0 = all)");
  cmd->add_option("--threads", o->threads, "Compute threads (default: all cores)");
  cmd->add_flag("--exact-chunk", o->exact_chunk,
                "A chunk's own attention reads its exact K/V (default: the quantized cache, as "
                "llama.cpp and vLLM do)");
  auto* depths = cmd->add_option("--depths", o->passkey.depths,
                                 "passkey: where the asked key sits, 0 (start) to 1 (end) "
                                 "(default 0,0.25,0.5,0.75,1)")
                     ->delimiter(',');
  auto* haystacks = cmd->add_option("--haystacks", o->passkey.haystacks,
                                    "passkey: haystacks per context and depth (default 2)");
  auto* keys = cmd->add_option("--keys", o->passkey.keys,
                               "passkey: labelled keys per haystack, one asked (default 1)");
  auto* seed = cmd->add_option("--seed", o->passkey.seed, "passkey: haystack seed (default 1)");
  auto* chat = cmd->add_flag("--chat", o->passkey.chat,
                             "passkey: the haystack as a user turn of the model's chat template");
  add_device_option(cmd, &o->device);
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  auto* contexts = cmd->get_option("--ctx");
  cmd->callback([o, contexts, depths, haystacks, keys, seed, chat] {
    o->contexts_given = contexts->count() > 0;
    o->passkey_flags_given =
        depths->count() + haystacks->count() + keys->count() + seed->count() + chat->count() > 0;
    run_eval(*o);
  });
}

}  // namespace kvplan::cli
