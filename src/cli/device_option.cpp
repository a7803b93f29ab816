#include "cli/device_option.h"

namespace kvplan::cli {

void add_device_option(CLI::App* cmd, std::string* value) {
  cmd->add_option("--device", *value,
                  "auto (a GPU if one is found, else the CPU), cpu, gpu or gpu:N (default auto)")
      ->capture_default_str();
}

DeviceChoice resolve_device_option(const std::string& value) {
  return select_device(parse_device_request(value));
}

}  // namespace kvplan::cli
