#include "cli/eval_passkey.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_io.h"
#include "core/hash.h"
#include "core/json_text.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "model/transformer.h"

namespace kvplan::cli {
namespace {

struct Config {
  std::string label;
  KvCacheOptions kv;
};

// Exact KV first (the gate), then the flags' configurations in flag order.
std::vector<Config> configs_of(const PasskeyRequest& r, const ModelConfig& config) {
  const ResolvedKv resolved = resolve_kv_flags(r.kv, kv_geometry(config), config.source, {});
  std::vector<Config> out{{"exact", KvCacheOptions::exact_kv()}};
  for (const KvChoice& choice : resolved.choices) {
    KvCacheOptions kv =
        KvCacheOptions::of_config(choice.pairs, kv_geometry(config), resolved.settings);
    kv.chunk_attends_quantized = !r.exact_chunk;
    if (resolved.plan && choice.label.starts_with("plan:"))
      kv.fp8_scales = resolved.plan->fp8_scales();
    (void)KvCache(config, kv);  // refused here, before any case runs, if the rows cannot take it
    out.push_back({choice.label, std::move(kv)});
  }
  return out;
}

struct CaseResult {
  const PasskeyCase* c = nullptr;
  std::vector<std::optional<PasskeyAnswer>> answers;  // per config; none where exact failed
};

struct Tally {
  int correct = 0, asked = 0;
};

void print_text(const PasskeyRequest& r, const std::string& model_name,
                const std::vector<Config>& configs, const std::vector<CaseResult>& results) {
  std::printf("passkey: %s; %d key(s) of 5 digits, depths", model_name.c_str(), r.task.keys);
  for (const double d : r.task.depths) std::printf(" %.2g", d);
  std::printf(", %d haystack(s) each, filler from %s, seed %llu%s\n\n", r.task.haystacks,
              r.text_path.c_str(), static_cast<unsigned long long>(r.task.seed),
              r.task.chat ? ", in the chat template" : "");
  std::printf("%8s %8s", "context", "tokens");
  for (const Config& c : configs) std::printf(" %22s", c.label.c_str());
  std::printf("\n");
  std::vector<Tally> all(configs.size());
  for (const int64_t context : r.task.contexts) {
    std::vector<Tally> row(configs.size());
    size_t longest = 0;
    for (const CaseResult& cr : results) {
      if (cr.c->context != context) continue;
      longest = std::max(longest, cr.c->prompt.size());
      for (size_t k = 0; k < configs.size(); ++k) {
        if (!cr.answers[k]) continue;
        ++row[k].asked;
        row[k].correct += cr.answers[k]->correct ? 1 : 0;
      }
    }
    std::printf("%8lld %8zu", static_cast<long long>(context), longest);
    for (size_t k = 0; k < configs.size(); ++k) {
      all[k].asked += row[k].asked;
      all[k].correct += row[k].correct;
      std::printf(" %22s", fmt::format("{}/{}", row[k].correct, row[k].asked).c_str());
    }
    std::printf("\n");
  }
  std::printf("%8s %8s", "all", "");
  for (const Tally& t : all) std::printf(" %22s", fmt::format("{}/{}", t.correct, t.asked).c_str());
  std::printf(
      "\n\ntokens: the longest prompt of the row. exact: keys exact KV retrieves of every case; "
      "the other configurations are asked only the cases exact KV answers (correct / asked).\n");
}

nlohmann::ordered_json to_json(const PasskeyRequest& r, const ModelWeights& weights,
                               uint64_t text_hash, const std::vector<Config>& configs,
                               const std::vector<CaseResult>& results) {
  nlohmann::ordered_json labels = nlohmann::ordered_json::array();
  for (const Config& c : configs) labels.push_back(c.label);
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const CaseResult& cr : results) {
    nlohmann::ordered_json answers = nlohmann::ordered_json::object();
    for (size_t k = 0; k < configs.size(); ++k) {
      if (!cr.answers[k]) continue;
      answers[configs[k].label] = {{"generated", cr.answers[k]->generated},
                                   {"correct", cr.answers[k]->correct}};
    }
    cases.push_back({{"context", cr.c->context},
                     {"depth", cr.c->depth},
                     {"haystack", cr.c->haystack},
                     {"prompt_tokens", cr.c->prompt.size()},
                     {"key", cr.c->key},
                     {"label", cr.c->label},
                     {"answers", std::move(answers)}});
  }
  return {{"task", "passkey"},
          {"model",
           {{"path", r.model},
            {"name", weights.config.name},
            {"fingerprint", hash_hex(weights.fingerprint)}}},
          {"filler", {{"text", r.text_path}, {"hash", hash_hex(text_hash)}}},
          {"keys", r.task.keys},
          {"depths", r.task.depths},
          {"contexts", r.task.contexts},
          {"haystacks", r.task.haystacks},
          {"seed", r.task.seed},
          {"chat", r.task.chat},
          {"chunk_attends_quantized", !r.exact_chunk},
          {"configs", std::move(labels)},
          {"cases", std::move(cases)}};
}

}  // namespace

void run_passkey_eval(const PasskeyRequest& r) {
  if (r.text_path.empty()) {
    fail(ErrorCode::kInvalidArgument, "--task passkey: --text FILE gives the filler sentences");
  }
  set_compute_threads(r.threads);
  const std::string text = read_text_file(r.text_path);
  const std::vector<std::string> filler = filler_sentences(text, r.text_path);
  const ModelWeights weights = load_model_weights(r.model);
  const std::unique_ptr<Tokenizer> tokenizer = load_model_tokenizer(r.model);
  for (const int64_t context : r.task.contexts) {
    if (weights.config.context_length > 0 && context > weights.config.context_length) {
      fail(ErrorCode::kInvalidArgument, "--ctx {}: longer than {}'s context of {} tokens", context,
           r.model, weights.config.context_length);
    }
  }
  const std::vector<Config> configs = configs_of(r, weights.config);
  const PasskeyCases cases = make_passkey_cases(*tokenizer, filler, r.task);
  const Transformer model(weights);
  std::vector<CaseResult> results;
  for (const PasskeyCase& c : cases.cases) {
    CaseResult cr{&c, std::vector<std::optional<PasskeyAnswer>>(configs.size())};
    for (size_t k = 0; k < configs.size(); ++k) {
      // Only where exact KV retrieves the key can a configuration lose it.
      if (k > 0 && !cr.answers[0]->correct) break;
      cr.answers[k] = answer_passkey(model, configs[k].kv, c, *tokenizer);
    }
    spdlog::info("passkey: ctx {} depth {:.2f} haystack {}: key {}, exact KV says {:?}", c.context,
                 c.depth, c.haystack, c.key, cr.answers[0]->generated);
    results.push_back(std::move(cr));
  }
  if (r.json) {
    std::printf("%s\n", json_text(to_json(r, weights, hash64(text), configs, results), 2).c_str());
  } else {
    print_text(r, weights.config.name, configs, results);
  }
}

}  // namespace kvplan::cli
