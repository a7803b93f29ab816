// `--device auto|cpu|gpu[:N]` for the commands that can run kernels (profile, eval, bench).
//
//   std::string device = "auto";
//   kvplan::cli::add_device_option(cmd, &device);
//   ... in the callback:  const kvplan::DeviceChoice d =
//   kvplan::cli::resolve_device_option(device);
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "gpu/device_selection.h"

namespace kvplan::cli {

void add_device_option(CLI::App* cmd, std::string* value);

// Parses and selects (logging the choice in one line). Bad text or an unavailable `gpu[:N]`
// throws kvplan::Error (bad text -> exit code 2).
DeviceChoice resolve_device_option(const std::string& value);

}  // namespace kvplan::cli
