#include "profile/dkl_estimate.h"

#include <cmath>

#include "profile/side_candidates.h"

namespace kvplan {

namespace {

// The same per KV head: alpha_h fitted on the side's measured cells' dkl_heads[h] against their
// o_mse_heads[h], an unmeasured cell's dkl_heads[h] = alpha_h * o_mse_heads[h].
void estimate_head_dkl(std::vector<std::optional<ProfileCell>>& row, CandidateSide side) {
  std::vector<double> dm, mm;
  for (const auto& cell : row) {
    if (!cell || !cell->metrics.dkl_measured || candidate_side(cell->pair) != side) continue;
    const CellMetrics& m = cell->metrics;
    if (m.dkl_heads.empty() || m.dkl_heads.size() != m.o_mse_heads.size()) continue;
    dm.resize(m.dkl_heads.size(), 0.0);
    mm.resize(m.dkl_heads.size(), 0.0);
    for (size_t h = 0; h < m.dkl_heads.size(); ++h) {
      dm[h] += m.dkl_heads[h] * m.o_mse_heads[h];
      mm[h] += m.o_mse_heads[h] * m.o_mse_heads[h];
    }
  }
  if (dm.empty()) return;
  for (auto& cell : row) {
    if (!cell || cell->metrics.dkl_measured || candidate_side(cell->pair) != side) continue;
    CellMetrics& m = cell->metrics;
    if (m.o_mse_heads.size() != dm.size()) continue;
    m.dkl_heads.assign(dm.size(), 0.0);
    for (size_t h = 0; h < dm.size(); ++h) {
      m.dkl_heads[h] = (mm[h] > 0 ? dm[h] / mm[h] : 0.0) * m.o_mse_heads[h];
    }
  }
}

}  // namespace

void estimate_unmeasured_dkl(Profile& profile) {
  for (size_t l = 0; l < profile.cells.size(); ++l) {
    auto& row = profile.cells[l];
    for (const CandidateSide side : {CandidateSide::kKeyOnly, CandidateSide::kValueOnly}) {
      double dm = 0, mm = 0;
      bool any = false;
      for (const auto& cell : row) {
        if (!cell || !cell->metrics.dkl_measured || candidate_side(cell->pair) != side) continue;
        dm += cell->metrics.dkl * cell->metrics.o_mse;
        mm += cell->metrics.o_mse * cell->metrics.o_mse;
        any = true;
      }
      if (!any) continue;
      const double alpha = mm > 0 ? dm / mm : 0.0;
      for (auto& cell : row) {
        if (!cell || cell->metrics.dkl_measured || candidate_side(cell->pair) != side) continue;
        cell->metrics.dkl = alpha * cell->metrics.o_mse;
      }
      estimate_head_dkl(row, side);
    }
  }
}

ModelCheck additivity_check(const Profile& profile) {
  ModelCheck check;
  double sum = 0;
  for (size_t l = 0; l < profile.cells.size(); ++l) {
    const auto& row = profile.cells[l];
    for (const auto& joint : row) {
      if (!joint || !joint->metrics.dkl_measured ||
          candidate_side(joint->pair) != CandidateSide::kJoint || !(joint->metrics.dkl > 0)) {
        continue;
      }
      const ProfileCell* key = nullptr;
      const ProfileCell* value = nullptr;
      for (const auto& cell : row) {
        if (!cell) continue;
        const CandidateSide side = candidate_side(cell->pair);
        if (side == CandidateSide::kKeyOnly && cell->pair.key == joint->pair.key) key = &*cell;
        if (side == CandidateSide::kValueOnly && cell->pair.value == joint->pair.value) {
          value = &*cell;
        }
      }
      if (key == nullptr || value == nullptr) continue;
      const double err = std::fabs(key->metrics.dkl + value->metrics.dkl - joint->metrics.dkl) /
                         joint->metrics.dkl;
      sum += err;
      ++check.cells;
      if (err > check.max_abs_rel_error) {
        check.max_abs_rel_error = err;
        check.worst_layer = static_cast<int>(l);
        check.worst_pair = joint->pair.name();
      }
    }
  }
  if (check.cells > 0) check.mean_abs_rel_error = sum / check.cells;
  return check;
}

}  // namespace kvplan
