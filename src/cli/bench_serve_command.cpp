// kvplan bench serve: one seeded multi-user, multi-turn workload served by the harness over each KV
// configuration (a pair for every layer, or a plan.json) at each KV memory, all in one invocation
// on the identical requests: completed requests, TTFT percentiles, inter-token latency, decode
// throughput, the prefill work prefix reuse saved (per runtime tier), and the quality of what was
// served (KL against exact KV on sampled requests).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "cli/cli_util.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/file_io.h"
#include "core/format_bytes.h"
#include "core/json_text.h"
#include "formats/kv_pair.h"
#include "model/load_tokenizer.h"
#include "model/model_weights.h"
#include "model/transformer.h"
#include "plan/plan.h"
#include "profile/calibration.h"
#include "report/serving_report.h"
#include "serve/prefix_cache.h"
#include "serve/serving_loop.h"
#include "serve/workload.h"
#include "server/http_workload.h"

namespace kvplan::cli {
namespace {

struct BenchServeOptions {
  std::string model, text, disk, html, url;
  std::vector<std::string> kv;         // default bf16/bf16
  std::vector<std::string> kv_memory;  // default 64MiB
  // One for every KV memory, or one each (paired in order): a sweep of the server's whole memory.
  std::vector<std::string> host_memory{"1GiB"};
  serve::WorkloadOptions workload;
  size_t chunk_tokens = 256;
  double duration_s = 0;
  int quality_samples = 4;
  int threads = 0;
  bool json = false;
};

struct Config {
  std::string label;
  Plan plan;
};

// Each --kv: a plan.json, or a pair for every layer (default settings).
std::vector<Config> configs_of(const std::vector<std::string>& kv, const ModelWeights& weights) {
  std::vector<Config> out;
  const KvModel model = kv_model(weights);
  for (const std::string& item : kv) {
    if (item.ends_with(".json")) {
      Plan plan = read_plan(item);
      check_plan_matches(plan, model.geometry, weights.config.source);
      out.push_back({"plan:" + std::filesystem::path(item).filename().string(), std::move(plan)});
      continue;
    }
    // Labelled as typed: a pair's canonical name can be a shorthand (bf16/bf16 is KV16).
    const KvPair pair = KvPair::parse(item);
    out.push_back(
        {item, plan_of_pairs(model, std::vector<KvPair>(model.geometry.layers.size(), pair),
                             QuantSettings{})});
  }
  return out;
}

std::filesystem::path text_path(const BenchServeOptions& o) {
  return o.text.empty() ? config_dir() / "calibration" / "report.jsonl"
                        : std::filesystem::path(o.text);
}

std::vector<int32_t> text_tokens(const std::filesystem::path& file, const Tokenizer& tokenizer) {
  std::string text;
  for (const CalibrationItem& item : read_calibration_file(file)) {
    text += item.text;
    for (const ChatMessage& m : item.messages) text += m.content + "\n";
    text += "\n\n";
  }
  return tokenizer.encode(text, {.add_bos = false});
}

struct Row {
  uint64_t kv_memory = 0;
  uint64_t host_memory = 0;  // 0 over HTTP (the server's own)
  serve::ServeResult result;
  serve::ServeSummary summary;
};

nlohmann::ordered_json workload_json(const serve::WorkloadOptions& w, const BenchServeOptions& o) {
  return {
      {"users", w.users},
      {"rounds", w.rounds},
      {"system_tokens", w.system_tokens},
      {"document_tokens", w.document_tokens},
      {"question_tokens", w.question_tokens},
      {"answer_tokens", w.answer_tokens},
      {"user_interval_s", w.user_interval_s},
      {"think_time_s", w.think_time_s},
      {"document_reuse", w.document_reuse},
      {"seed", w.seed},
      {"chunk_tokens", o.chunk_tokens},
      {"host_memory", fmt::format("{}", fmt::join(o.host_memory, ","))},
      {"disk", o.disk.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(o.disk)},
      {"duration_s", o.duration_s}};
}

nlohmann::ordered_json row_json(const Row& row) {
  const serve::ServeResult& r = row.result;
  const serve::ServeSummary& s = row.summary;
  return {{"kv", r.label},
          {"kv_memory_bytes", row.kv_memory},
          {"host_memory_bytes", row.host_memory},
          {"bytes_per_token", r.bytes_per_token},
          {"requests", s.requests},
          {"completed", s.completed},
          {"rejected", s.rejected},
          {"without_first_token", s.without_first_token},
          {"most_running", r.most_running},
          {"ttft_p50_s", s.ttft_p50_s},
          {"ttft_p95_s", s.ttft_p95_s},
          {"ttft_p99_s", s.ttft_p99_s},
          {"itl_mean_s", s.itl_mean_s},
          {"itl_p95_s", s.itl_p95_s},
          {"decode_tokens_per_s", s.decode_tokens_per_s},
          {"computed_tokens", s.computed_tokens},
          {"restored_tokens", s.restored_tokens},
          {"hits",
           {{"device", r.runtime.hits_device},
            {"host", r.runtime.hits_host},
            {"disk", r.runtime.hits_disk}}},
          {"bytes",
           {{"device_to_host", r.runtime.bytes_device_to_host},
            {"host_to_device", r.runtime.bytes_host_to_device},
            {"to_disk", r.runtime.bytes_to_disk},
            {"from_disk", r.runtime.bytes_from_disk}}},
          {"served_mean_kl", r.served_mean_kl},
          {"served_top1", r.served_top1},
          {"quality_positions", r.quality_positions},
          {"end_s", r.end_s},
          {"ttft_s", serve::ttft_samples(r)}};
}

std::string workload_line(const serve::Workload& workload, const BenchServeOptions& o) {
  const serve::WorkloadOptions& w = workload.options;
  return fmt::format(
      "workload: {} users x {} rounds, system {} + document {} + question {} tokens, answers {} "
      "tokens, a user every {:.3g} s, think {:.3g} s, document reuse {:.2f}, seed {}; {}{}",
      w.users, w.rounds, w.system_tokens, w.document_tokens, w.question_tokens, w.answer_tokens,
      w.user_interval_s, w.think_time_s, w.document_reuse, w.seed,
      // Over HTTP the chunks and tiers are the server's own.
      // The device tier stages the longest prompt (kvplan serve --staging-tokens sets the same).
      o.url.empty()
          ? fmt::format("chunks of {} tokens, device tier staging {} tokens, host tier "
                        "{}{}",
                        o.chunk_tokens, serve::longest_prompt_tokens(workload),
                        fmt::join(o.host_memory, ","), o.disk.empty() ? "" : ", disk " + o.disk)
          : "over HTTP to " + o.url,
      o.duration_s > 0 ? fmt::format(", {:.3g} s of serving", o.duration_s) : "");
}

void write_html(const std::string& path, const std::string& model, const std::string& workload,
                const std::vector<Row>& rows) {
  report::ServingReport r{.model = model, .workload = workload, .runs = {}};
  for (const Row& row : rows) {
    const serve::ServeSummary& s = row.summary;
    report::ServingRun run{.kv = row.result.label,
                           .kv_memory_bytes = row.kv_memory,
                           .host_memory_bytes = row.host_memory,
                           .bytes_per_token = row.result.bytes_per_token,
                           .requests = s.requests,
                           .completed = s.completed,
                           .ttft_p50_s = s.ttft_p50_s,
                           .ttft_p95_s = s.ttft_p95_s,
                           .ttft_p99_s = s.ttft_p99_s,
                           .itl_mean_s = s.itl_mean_s,
                           .decode_tokens_per_s = s.decode_tokens_per_s,
                           .computed_tokens = s.computed_tokens,
                           .restored_tokens = s.restored_tokens,
                           .served_mean_kl = row.result.served_mean_kl,
                           .served_top1 = row.result.served_top1,
                           .without_first_token = s.without_first_token,
                           .ttft_s = serve::ttft_samples(row.result)};
    r.runs.push_back(std::move(run));
  }
  write_file_atomic(path, report::serving_html(r));
}

void print_text(const std::string& model, const std::string& workload, const BenchServeOptions& o,
                const std::vector<Row>& rows) {
  std::printf("model %s; %s\n\n", model.c_str(), workload.c_str());
  // The host tier's size gets a column when the sweep changes it.
  const bool host_column = o.host_memory.size() > 1;
  std::printf("%-22s %10s%s %9s %7s %4s %9s %9s %9s %8s %9s %10s %10s %6s %6s %9s %7s\n", "kv",
              "kv memory", host_column ? fmt::format(" {:>10}", "host tier").c_str() : "",
              "B/token", "done", "wait", "TTFT p50", "TTFT p95", "TTFT p99", "ITL ms", "tok/s",
              "computed", "restored", "host", "disk", "served KL", "top-1");
  for (const Row& row : rows) {
    const serve::ServeSummary& s = row.summary;
    const serve::ServeResult& r = row.result;
    // Served quality is measured in process only (over HTTP: "-").
    const std::string kl = r.quality_positions > 0 ? fmt::format("{:.5f}", r.served_mean_kl) : "-";
    const std::string top1 =
        r.quality_positions > 0 ? fmt::format("{:.1f}%", 100 * r.served_top1) : "-";
    const std::string host =
        host_column ? fmt::format(" {:>10}", format_bytes(static_cast<double>(row.host_memory), 2))
                    : "";
    std::printf(
        "%-22s %10s%s %9.0f %3d/%-3d %4d %8.2fs %8.2fs %8.2fs %8.1f %9.2f %10lld %10lld %6llu "
        "%6llu %9s %7s\n",
        r.label.c_str(), format_bytes(static_cast<double>(row.kv_memory), 2).c_str(), host.c_str(),
        r.bytes_per_token, s.completed, s.requests, s.without_first_token, s.ttft_p50_s,
        s.ttft_p95_s, s.ttft_p99_s, 1000 * s.itl_mean_s, s.decode_tokens_per_s,
        static_cast<long long>(s.computed_tokens), static_cast<long long>(s.restored_tokens),
        static_cast<unsigned long long>(r.runtime.hits_host + r.runtime.hits_device),
        static_cast<unsigned long long>(r.runtime.hits_disk), kl.c_str(), top1.c_str());
  }
  std::printf(
      "\ndone: completed / requests issued; wait: requests issued and not refused with no token "
      "yet at the end; TTFT from arrival to the first token over every request issued and not "
      "refused, a waiting one counting its wait so far (a lower bound); computed / "
      "restored: prompt tokens prefilled / restored from stored prefixes; host, disk: chunks "
      "restored from each tier; served KL: KL(exact || served) of the answers' next-token "
      "distributions on the first %d requests (in process only).\n",
      o.url.empty() ? o.quality_samples : 0);
}

// The result as the flags ask: HTML page, JSON, or the text table.
void print_rows(const std::string& model, const serve::Workload& workload,
                const BenchServeOptions& o, const std::vector<Row>& rows) {
  const std::string workload_text = workload_line(workload, o);
  if (!o.html.empty()) write_html(o.html, model, workload_text, rows);
  if (o.json) {
    nlohmann::ordered_json runs = nlohmann::ordered_json::array();
    for (const Row& row : rows) runs.push_back(row_json(row));
    std::printf("%s\n",
                json_text(nlohmann::ordered_json{{"model", model},
                                                 {"workload", workload_json(workload.options, o)},
                                                 {"runs", runs}},
                          2)
                    .c_str());
    return;
  }
  print_text(model, workload_text, o, rows);
}

// --url: the workload over HTTP to a running `kvplan serve`, whose KV configuration it is.
std::vector<Row> run_over_http(const BenchServeOptions& o, const serve::Workload& workload) {
  if (!o.kv.empty() || !o.kv_memory.empty()) {
    fail(ErrorCode::kInvalidArgument,
         "--url: the server's --kv/--plan and --kv-memory are its own; do not give them here");
  }
  const server::HttpServerInfo info = server::http_server_info(o.url);
  spdlog::info("bench serve: over HTTP to {} ({}, {:.0f} B/token, {} of KV memory)", o.url,
               info.model, info.bytes_per_token,
               format_bytes(static_cast<double>(info.kv_memory_bytes), 2));
  Row row{
      info.kv_memory_bytes, 0, server::drive_workload_over_http(o.url, workload, o.duration_s), {}};
  row.summary = serve::summarize(row.result);
  return {row};
}

void run_bench_serve(BenchServeOptions o) {
  if (!o.url.empty()) {
    set_compute_threads(o.threads);
    const std::unique_ptr<Tokenizer> tokenizer = load_model_tokenizer(o.model);
    const serve::Workload workload = serve::make_workload(
        o.workload, text_tokens(text_path(o), *tokenizer), tokenizer->bos_id());
    const std::vector<Row> rows = run_over_http(o, workload);
    print_rows(std::filesystem::path(o.model).stem().string(), workload, o, rows);
    return;
  }
  if (o.kv.empty()) o.kv = {"bf16/bf16"};
  if (o.kv_memory.empty()) o.kv_memory = {"64MiB"};
  const ModelWeights weights = load_model_weights(o.model);
  set_compute_threads(o.threads);
  const std::vector<Config> configs = configs_of(o.kv, weights);
  // A configuration the model's rows cannot take is refused before anything runs.
  for (const Config& c : configs) (void)KvCache(weights.config, serve::cache_options(c.plan));
  std::vector<uint64_t> memories, hosts;
  for (const std::string& m : o.kv_memory) memories.push_back(parse_byte_size(m, "--kv-memory"));
  for (const std::string& m : o.host_memory) hosts.push_back(parse_byte_size(m, "--host-memory"));
  if (hosts.size() != 1 && hosts.size() != memories.size()) {
    fail(ErrorCode::kInvalidArgument,
         "--host-memory: expected one size, or one for each of the {} --kv-memory sizes; got {}",
         memories.size(), hosts.size());
  }
  const std::unique_ptr<Tokenizer> tokenizer = load_model_tokenizer(o.model);
  const serve::Workload workload =
      serve::make_workload(o.workload, text_tokens(text_path(o), *tokenizer), tokenizer->bos_id());
  serve::ServeOptions serving;
  serving.chunk_tokens = o.chunk_tokens;
  serving.duration_s = o.duration_s;
  serving.quality_samples = o.quality_samples;
  const Transformer model(weights);
  std::vector<Row> rows;
  for (size_t m = 0; m < memories.size(); ++m) {
    const uint64_t memory = memories[m];
    serving.host_memory_bytes = hosts.size() == 1 ? hosts[0] : hosts[m];
    for (const Config& c : configs) {
      spdlog::info("bench serve: {} at {} of KV memory, {} of host tier", c.label,
                   format_bytes(static_cast<double>(memory), 2),
                   format_bytes(static_cast<double>(serving.host_memory_bytes), 2));
      serving.kv_memory_bytes = memory;
      // A fresh disk directory per run: no run starts from another's stored chunks.
      if (!o.disk.empty()) {
        serving.disk_dir = std::filesystem::path(o.disk) / ("run-" + std::to_string(rows.size()));
        std::filesystem::remove_all(serving.disk_dir);
      }
      Row row{memory,
              serving.host_memory_bytes,
              serve::run_serving(model, c.plan, c.label, workload, serving),
              {}};
      row.summary = serve::summarize(row.result);
      if (!serving.disk_dir.empty()) std::filesystem::remove_all(serving.disk_dir);
      rows.push_back(std::move(row));
    }
  }
  print_rows(weights.config.name, workload, o, rows);
}

}  // namespace

void register_bench_serve_command(CLI::App* bench) {
  auto o = std::make_shared<BenchServeOptions>();
  CLI::App* cmd = bench->add_subcommand(
      "serve", "A seeded multi-user, multi-turn workload served over each KV configuration");
  cmd->footer(
      "Example: kvplan bench serve --model SmolLM2-135M-Instruct.Q4_1.gguf --kv bf16/bf16,"
      "q8_0/q8_0,plan.json --kv-memory 32MiB,128MiB --users 8 --rounds 4\n"
      "Every configuration serves the identical requests; --kv-memory is what the running "
      "requests' KV may take (admission by real bytes), --host-memory and --disk hold stored "
      "prefixes.");
  cmd->add_option("--model", o->model, "A .gguf file or an HF model directory")->required();
  cmd->add_option("--kv", o->kv, "KV configurations: pairs (bf16/bf16, q4_0/q4_0) or plan.json")
      ->delimiter(',');
  cmd->add_option("--kv-memory", o->kv_memory,
                  "KV memory of the running requests, several for a sweep (default 64MiB)")
      ->delimiter(',');
  cmd->add_option("--host-memory", o->host_memory,
                  "Host tier for stored prefixes: one size, or one per --kv-memory, paired in "
                  "order (default 1GiB)")
      ->delimiter(',');
  cmd->add_option("--disk", o->disk, "Disk tier directory (default: none)");
  cmd->add_option("--chunk-tokens", o->chunk_tokens, "Tokens per stored chunk (default 256)");
  cmd->add_option(
      "--duration", o->duration_s,
      "Stop after this many seconds of the loop's clock (default: serve every request)");
  cmd->add_option("--users", o->workload.users, "Users (default 8)");
  cmd->add_option("--rounds", o->workload.rounds, "Questions per user (default 4)");
  cmd->add_option("--system-tokens", o->workload.system_tokens,
                  "Shared system prompt tokens (default 256)");
  cmd->add_option("--document-tokens", o->workload.document_tokens,
                  "Each user's document tokens before the first question (default 1024)");
  cmd->add_option("--question-tokens", o->workload.question_tokens, "Tokens per question (32)");
  cmd->add_option("--answer-tokens", o->workload.answer_tokens, "Tokens per answer (32)");
  cmd->add_option("--user-interval", o->workload.user_interval_s,
                  "Mean seconds between new users (default 2)");
  cmd->add_option("--think-time", o->workload.think_time_s,
                  "Seconds between an answer and the user's next question (default 5)");
  cmd->add_option("--document-reuse", o->workload.document_reuse,
                  "Fraction of users whose document is an earlier user's (default 0)");
  cmd->add_option("--seed", o->workload.seed, "Workload seed (default 1)");
  cmd->add_option("--text", o->text,
                  "Text the prompts are cut from (default configs/calibration/report.jsonl)");
  cmd->add_option("--quality-samples", o->quality_samples,
                  "Requests whose served distributions are compared with exact KV (default 4)");
  cmd->add_option("--threads", o->threads, "Compute threads (default: all cores)");
  cmd->add_flag("--json", o->json, "Print the result as JSON");
  cmd->add_option("--html", o->html,
                  "Also write an HTML page: the table, TTFT CDFs and the KV memory sweep");
  cmd->add_option("--url", o->url,
                  "Send the workload over HTTP to a running kvplan serve (its KV configuration and "
                  "memory) instead of serving it in process");
  cmd->callback([o] { run_bench_serve(*o); });
}

}  // namespace kvplan::cli
