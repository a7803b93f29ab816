// The DeviceBackend of a GPU build: device pages in GPU memory (hipMalloc), the host tier in
// page-locked memory from the GPU runtime (hipHostMalloc, so copies are DMA without staging), and
// transfers as hipMemcpyAsync on the backend's own transfer streams, fenced after the producer's
// stream with an event. Everything goes through src/kernels/gpu_runtime.h, so this file compiles with
// the host compiler in every build; without GPU support the factory throws kUnimplemented.
//
//   std::shared_ptr<kvplan::DeviceBackend> b = kvplan::make_gpu_device_backend(0);
#pragma once

#include <memory>

#include "runtime/device_backend.h"

namespace kvplan {

// A backend on GPU `device`. Throws Error naming the failing GPU call (kUnimplemented without GPU
// support compiled in, kNotFound without a device).
std::shared_ptr<DeviceBackend> make_gpu_device_backend(int device);

}  // namespace kvplan
