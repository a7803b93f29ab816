// The additive error surrogate and its refit from real validations.
//
// Predicted error of an assignment = sum over layers of w_l * e_l(pair_l), where e_l is the
// layer's profiled sensitivity (dKL when only that layer is quantized). Layers interact, so the
// real all-layers KL differs; after each round of real validations the weights are refit by ridge
// regression towards the prior w = 1:
//   minimise  sum_k (sum_l w_l e_lk - y_k)^2  +  lambda * sum_l (w_l - 1)^2
// then projected onto w_l >= 0
// (a few validations cannot pin down one weight per layer on their own; the prior keeps the
// surrogate sensible where data are missing).
#pragma once

#include <cstddef>
#include <vector>

namespace kvplan::search {

struct Validation {
  std::vector<double> layer_errors;  // e_l of the validated assignment, one per layer
  double measured = 0;               // its real error (mean KL of the full quantized model)
};

struct SurrogateFitOptions {
  double ridge = 1e-2;  // lambda, relative to the mean squared feature magnitude
};

// Refit weights; returns one weight per layer (all 1 when there are no validations).
std::vector<double> fit_surrogate_weights(const std::vector<Validation>& validations,
                                          size_t n_layers, const SurrogateFitOptions& options = {});

double predict(const std::vector<double>& weights, const std::vector<double>& layer_errors);

}  // namespace kvplan::search
