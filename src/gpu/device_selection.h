// Run-time choice between the CPU and a GPU: `--device auto|cpu|gpu[:N]` (ARCHITECTURE §4).
// `auto` takes GPU 0 when this build has GPU support and the runtime finds a device, else the CPU,
// saying which in one log line; `gpu[:N]` insists and fails with a reason when it cannot.
//
//   kvplan::DeviceChoice d = kvplan::select_device(kvplan::parse_device_request("auto"));
//   if (d.use_gpu) { /* kvplan::gpu::set_device(d.index) was called */ }
#pragma once

#include <string>
#include <string_view>

namespace kvplan {

struct DeviceRequest {
  enum class Kind { kAuto, kCpu, kGpu };
  Kind kind = Kind::kAuto;
  int index = 0;  // kGpu only
};

// "auto", "cpu", "gpu" (= gpu:0) or "gpu:N". Throws Error(kInvalidArgument) naming the text.
DeviceRequest parse_device_request(std::string_view text);

struct DeviceChoice {
  bool use_gpu = false;
  int index = -1;
  std::string name;         // "NVIDIA H200" or "CPU"
  std::string description;  // one line: what was chosen and why
};

// Resolves a request; logs the choice (one info line). `gpu[:N]` without GPU support, without a
// device, or with N out of range throws Error (kUnimplemented / kNotFound / kInvalidArgument)
// with the reason.
DeviceChoice select_device(const DeviceRequest& request);

// "HIP (AMD)", "CUDA (NVIDIA)" or "none (KVPLAN_HIP=OFF)".
std::string gpu_backend_description();

}  // namespace kvplan
