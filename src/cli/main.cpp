// kvplan: layer-wise mixed-precision KV-cache plans — tune, inspect, estimate, export.
#include <cstdio>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "core/build_record.h"
#include "core/error.h"
#include "core/logging.h"

int main(int argc, char** argv) {
  CLI::App app{"kvplan: find, per layer, the KV-cache precision a model can take, and use it."};
  app.require_subcommand(1);
  // The build record goes with the version: plans reproduce bit for bit only under the same one.
  const kvplan::BuildRecord build = kvplan::this_build();
  app.set_version_flag(
      "--version", fmt::format("kvplan {} (-march={}: {}; {}; Eigen {})", KVPLAN_VERSION, build.isa,
                               build.vector_extensions, build.compiler, build.eigen));
  bool verbose = false, quiet = false;
  app.add_flag("-v,--verbose", verbose, "Debug logging");
  app.add_flag("-q,--quiet", quiet, "Only warnings and errors");
  app.footer(
      "Exit codes: 0 ok, 1 runtime failure, 2 bad usage or input.\n"
      "Example: kvplan estimate --model llama-3.1-8b --context 32K,128K --kv K8V4");
  kvplan::cli::register_estimate_command(app);
  kvplan::cli::register_formats_command(app);
  kvplan::cli::register_eval_command(app);
  kvplan::cli::register_generate_command(app);
  kvplan::cli::register_inspect_command(app);
  kvplan::cli::register_bench_command(app);
  kvplan::cli::register_profile_command(app);
  kvplan::cli::register_search_command(app);
  kvplan::cli::register_tune_command(app);
  kvplan::cli::register_export_command(app);
  kvplan::cli::register_verify_command(app);
  kvplan::cli::register_report_command(app);
  kvplan::cli::register_serve_command(app);
  app.parse_complete_callback([&] {
    kvplan::init_logging(quiet     ? kvplan::LogLevel::kQuiet
                         : verbose ? kvplan::LogLevel::kVerbose
                                   : kvplan::LogLevel::kInfo);
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::fprintf(stderr, "kvplan: error: %s (see --help)\n", kvplan::one_line(e.what()).c_str());
    return 2;
  } catch (const kvplan::Error& e) {
    std::fprintf(stderr, "kvplan: error: %s\n", kvplan::one_line(e.what()).c_str());
    return kvplan::is_bad_input(e.code()) ? 2 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvplan: error: %s\n", kvplan::one_line(e.what()).c_str());
    return 1;
  }
  return 0;
}
