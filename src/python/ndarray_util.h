// numpy arrays the bindings return: memory allocated here and owned by the array (a capsule frees
// it), so a packed or unpacked result is handed to Python without a copy.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include <nanobind/ndarray.h>

namespace kvplan::python {

template <typename T>
using NumpyArray = nanobind::ndarray<nanobind::numpy, T>;

// A C-contiguous CPU array of T as the bindings take it (other dtypes and layouts are converted by
// nanobind on the way in).
template <typename T>
using CpuArray = nanobind::ndarray<const T, nanobind::c_contig, nanobind::device::cpu>;

// An uninitialized array of `shape` whose storage `fill` writes.
template <typename T>
struct OwnedArray {
  std::unique_ptr<T[]> data;
  std::vector<size_t> shape;

  explicit OwnedArray(std::vector<size_t> s) : shape(std::move(s)) {
    size_t n = 1;
    for (const size_t d : shape) n *= d;
    data = std::make_unique<T[]>(n == 0 ? 1 : n);
  }
  // Hands the storage to a numpy array.
  NumpyArray<T> release() {
    T* raw = data.release();
    nanobind::capsule owner(raw, [](void* p) noexcept { delete[] static_cast<T*>(p); });
    return NumpyArray<T>(raw, shape.size(), shape.data(), owner);
  }
};

}  // namespace kvplan::python
