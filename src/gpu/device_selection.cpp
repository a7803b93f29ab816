#include "gpu/device_selection.h"

#include <charconv>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "core/error.h"
#include "gpu/gpu_error.h"
#include "kernels/gpu_runtime.h"

namespace kvplan {

DeviceRequest parse_device_request(std::string_view text) {
  if (text == "auto") return {DeviceRequest::Kind::kAuto, 0};
  if (text == "cpu") return {DeviceRequest::Kind::kCpu, 0};
  if (text == "gpu") return {DeviceRequest::Kind::kGpu, 0};
  if (text.starts_with("gpu:")) {
    const std::string_view digits = text.substr(4);
    int index = -1;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
    if (ec == std::errc() && end == digits.data() + digits.size() && !digits.empty() &&
        index >= 0) {
      return {DeviceRequest::Kind::kGpu, index};
    }
  }
  fail(ErrorCode::kInvalidArgument, "--device: expected auto, cpu, gpu or gpu:N, got '{}'", text);
}

std::string gpu_backend_description() {
  return gpu::compiled_in() ? gpu::backend_name() : "none (built with KVPLAN_HIP=OFF)";
}

namespace {

DeviceChoice cpu_choice(std::string why) {
  DeviceChoice c;
  c.name = "CPU";
  c.description = "CPU (" + why + ")";
  return c;
}

// The reason as a user reads it in --device's log line or error (gpu_error.h words failures of a
// call made while working; this says why no GPU is used).
std::string status_reason(const gpu::Status& s) {
  switch (s.code) {
    case gpu::StatusCode::kNotCompiled:
      return "no GPU support compiled in; build with -DKVPLAN_HIP=AMD or -DKVPLAN_HIP=NVIDIA";
    case gpu::StatusCode::kNoDevice:
      return fmt::format("{} runtime found no GPU: {}", gpu::backend_name(), s.message);
    default:
      return fmt::format("{}: {} ({})", s.call, s.message, s.api_error);
  }
}

}  // namespace

DeviceChoice select_device(const DeviceRequest& request) {
  if (request.kind == DeviceRequest::Kind::kCpu) {
    DeviceChoice c = cpu_choice("--device cpu");
    spdlog::info("device: {}", c.description);
    return c;
  }
  int count = 0;
  const gpu::Status found = gpu::device_count(&count);
  if (!found.ok()) {
    const std::string why = status_reason(found);
    if (request.kind == DeviceRequest::Kind::kGpu) {
      fail(found.code == gpu::StatusCode::kNotCompiled ? ErrorCode::kUnimplemented
                                                       : ErrorCode::kNotFound,
           "--device gpu:{}: {}", request.index, why);
    }
    DeviceChoice c = cpu_choice(why);
    spdlog::info("device: {} — falling back to the CPU", c.description);
    return c;
  }
  const int index = request.kind == DeviceRequest::Kind::kGpu ? request.index : 0;
  if (index >= count) {
    fail(ErrorCode::kInvalidArgument, "--device gpu:{}: only {} GPU(s) found (0..{})", index, count,
         count - 1);
  }
  gpu::DeviceInfo info;
  if (const gpu::Status s = gpu::device_info(index, &info); !s.ok())
    fail(gpu_error_code(s.code), "--device gpu:{}: {}", index, status_reason(s));
  if (const gpu::Status s = gpu::set_device(index); !s.ok())
    fail(gpu_error_code(s.code), "--device gpu:{}: {}", index, status_reason(s));
  DeviceChoice c;
  c.use_gpu = true;
  c.index = index;
  c.name = info.name;
  c.description = fmt::format(
      "GPU {}: {} ({}, {:.1f} GiB, {} compute units)", index, info.name, gpu::backend_name(),
      static_cast<double>(info.total_memory) / (1u << 30), info.multiprocessors);
  spdlog::info("device: {}", c.description);
  return c;
}

}  // namespace kvplan
