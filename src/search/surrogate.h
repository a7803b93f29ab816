// The error surrogate and its refit from real validations.
//
// Predicted error of an assignment = sum_l w_l * e_l  +  gamma * (sum_l e_l)^2, where e_l is
// layer l's profiled sensitivity (dKL with only that layer quantized) for the pair it takes. The
// first term is additive over layers (a multiple-choice knapsack, solved exactly by
// exact_front.h); the second models how errors of different layers compound in the real
// all-layers KL, which makes the objective non-additive (searched by NSGA-II, nsga2_search.h).
//
// After each round of real validations, (w, gamma) are refit by ridge regression towards the
// prior (w = 1, gamma = 0):
//   minimise  sum_k (sum_l w_l e_lk + gamma S_k^2 - y_k)^2 + lambda (sum_l (w_l - 1)^2 + c gamma^2)
// with S_k = sum_l e_lk, then projected onto 1/r <= w_l <= r, gamma >= 0 (a few validations
// cannot pin down one weight per layer on their own; the prior keeps the surrogate sensible where
// data are missing). The bound r is a trust region: e_l is that layer's own measured sensitivity,
// and validations that all hold a layer at high precision say little about its low-precision
// error; an unbounded fit could scale it to ~0, and the next round would then put that layer at
// its cheapest format (Gemma 3 270M at 9,792 B/token: round-2 plans with two layers at int2,
// predicted 0.000035, measured 1.63).
#pragma once

#include <cstddef>
#include <vector>

namespace kvplan::search {

struct Validation {
  std::vector<double> layer_errors;  // e_l of the validated assignment, one per layer
  double measured = 0;               // its real error (mean KL of the full quantized model)
};

struct SurrogateFitOptions {
  double ridge = 1e-2;      // lambda, relative to the mean squared feature magnitude
  bool interaction = true;  // fit gamma (false: the additive surrogate alone)
  double weight_range = 4;  // r: every w_l within [1/r, r]
};

struct SurrogateModel {
  std::vector<double> weights;  // w_l, one per layer entry
  double interaction = 0;       // gamma
};

// Refit; weights all 1 and gamma 0 when there are no validations.
SurrogateModel fit_surrogate(const std::vector<Validation>& validations, size_t n_layers,
                             const SurrogateFitOptions& options = {});

double predict(const SurrogateModel& model, const std::vector<double>& layer_errors);

// How well refits rank plans they were not fit on: each validation is predicted by a refit on all
// the others (leave-one-out), and the Spearman rank correlation of those predictions with the
// measured errors is returned. Leave-one-out rather than a split in halves: a round has 5-8
// validations, and every one of them is then both fitted and held out. NaN for fewer than 3
// validations, or when the held-out predictions or the measurements are all equal (no ranking).
double held_out_rank_correlation(const std::vector<Validation>& validations, size_t n_layers,
                                 const SurrogateFitOptions& options = {});

}  // namespace kvplan::search
