// KVPLAN_HD marks functions compiled for both host and device. Under HIP or CUDA it expands to
// `__host__ __device__`; in plain C++ builds it is empty, so the same header serves the CPU path.
#pragma once

#if defined(__HIPCC__) || defined(__CUDACC__)
#define KVPLAN_HD __host__ __device__
#else
#define KVPLAN_HD
#endif
