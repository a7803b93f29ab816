#include "core/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace kvplan {

void init_logging(LogLevel level) {
  auto logger = spdlog::stderr_color_mt("kvplan");
  logger->set_pattern("[%H:%M:%S] %^%l%$: %v");
  switch (level) {
    case LogLevel::kQuiet:
      logger->set_level(spdlog::level::warn);
      break;
    case LogLevel::kInfo:
      logger->set_level(spdlog::level::info);
      break;
    case LogLevel::kVerbose:
      logger->set_level(spdlog::level::debug);
      break;
  }
  spdlog::set_default_logger(logger);
}

}  // namespace kvplan
