// Logging setup for the CLI and tests: spdlog to stderr, levels from -v/-q.
//
//   kvplan::init_logging(kvplan::LogLevel::kInfo);
//   spdlog::info("loaded {} layers", n);
#pragma once

namespace kvplan {

enum class LogLevel { kQuiet, kInfo, kVerbose };

void init_logging(LogLevel level);

}  // namespace kvplan
