// Each subcommand lives in its own file and registers itself on the root CLI11 app.
#pragma once

#include <CLI/CLI.hpp>

namespace kvplan::cli {

void register_estimate_command(CLI::App& app);
void register_formats_command(CLI::App& app);
void register_eval_command(CLI::App& app);
void register_generate_command(CLI::App& app);
void register_inspect_command(CLI::App& app);
void register_bench_command(CLI::App& app);
// `kvplan bench kv`, under the bench command.
void register_bench_kv_command(CLI::App* bench);
// `kvplan bench serve`, under the bench command.
void register_bench_serve_command(CLI::App* bench);
void register_profile_command(CLI::App& app);
void register_search_command(CLI::App& app);
void register_tune_command(CLI::App& app);
void register_export_command(CLI::App& app);
void register_verify_command(CLI::App& app);
void register_report_command(CLI::App& app);
void register_serve_command(CLI::App& app);

}  // namespace kvplan::cli
