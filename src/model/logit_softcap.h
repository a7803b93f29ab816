// Gemma 2's soft cap on attention scores and on the final logits: cap * tanh(x / cap), which
// keeps every value inside (-cap, cap). One definition for the forward and the profiler's
// attention metrics.
#pragma once

#include <cmath>

namespace kvplan {

// `cap` > 0; callers skip the call when the model has no cap.
inline float soft_cap(float x, float cap) {
  return cap * std::tanh(x / cap);
}

}  // namespace kvplan
