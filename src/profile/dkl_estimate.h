// dKL for the cells whose dKL was not measured, and the checks of that model.
//
// Quantizing one layer's K or V perturbs only that layer's attention output O; to second order the
// end-to-end KL is a quadratic form in the perturbation, so within one layer and one side
// dKL ≈ alpha * o_mse (metrics.h). alpha is fitted per (layer, side) through the origin on the
// side's measured cells (the anchors): alpha = sum d*m / sum m^2. Per KV head the same: alpha_h
// from the anchors' dkl_heads[h] (one head quantized, re-run) against their o_mse_heads[h]. A joint
// pair's dKL is modelled as the sum of its sides (additivity), which the measured joint cells
// check.
//
//   estimate_unmeasured_dkl(profile);             // fills every unmeasured cell's dkl
//   ModelCheck c = additivity_check(profile);     // measured joint cells vs their sides' sum
#pragma once

#include <string>

#include "profile/profile_data.h"

namespace kvplan {

// Layers missing a side's measured cell keep their unmeasured cells as they are. Idempotent.
void estimate_unmeasured_dkl(Profile& profile);

struct ModelCheck {
  int cells = 0;                  // joint cells compared
  double mean_abs_rel_error = 0;  // mean |(d_k + d_v) - d_kv| / d_kv
  double max_abs_rel_error = 0;
  int worst_layer = -1;
  std::string worst_pair;
};

// Compares each measured joint cell's dKL with the sum of its key-only and value-only cells'
// dKL (measured or estimated) in the same layer. cells == 0 when the profile has none.
ModelCheck additivity_check(const Profile& profile);

}  // namespace kvplan
