#include "search/surrogate.h"

#include <algorithm>
#include <limits>

#include <Eigen/Dense>

#include "core/error.h"
#include "plan/plan_results.h"
#include "search/paired_stats.h"

namespace kvplan::search {

SurrogateModel fit_surrogate(const std::vector<Validation>& validations, size_t n_layers,
                             const SurrogateFitOptions& options) {
  if (!(options.weight_range >= 1)) {
    fail(ErrorCode::kInvalidArgument, "surrogate weight range {} must be >= 1",
         options.weight_range);
  }
  SurrogateModel model{std::vector<double>(n_layers, 1.0), 0.0};
  if (validations.empty() || n_layers == 0) return model;
  const Eigen::Index n = static_cast<Eigen::Index>(n_layers);
  const Eigen::Index m = static_cast<Eigen::Index>(validations.size());
  const Eigen::Index cols = options.interaction ? n + 1 : n;
  Eigen::MatrixXd e(m, cols);
  Eigen::VectorXd y(m);
  for (Eigen::Index k = 0; k < m; ++k) {
    const Validation& v = validations[static_cast<size_t>(k)];
    if (v.layer_errors.size() != n_layers) {
      fail(ErrorCode::kInvalidArgument, "validation {} has {} layer errors, expected {}", k,
           v.layer_errors.size(), n_layers);
    }
    double sum = 0;
    for (Eigen::Index l = 0; l < n; ++l) {
      e(k, l) = v.layer_errors[static_cast<size_t>(l)];
      sum += e(k, l);
    }
    if (options.interaction) e(k, n) = sum * sum;
    y(k) = v.measured;
  }
  // Scale lambda to the data so the option means the same for tiny and large errors; gamma's
  // feature has its own magnitude, so its penalty is scaled by its own column.
  const double scale = e.leftCols(n).squaredNorm() / static_cast<double>(m * n) + 1e-300;
  const double lambda = options.ridge * scale;
  Eigen::VectorXd prior = Eigen::VectorXd::Zero(cols);
  prior.head(n).setOnes();
  Eigen::VectorXd penalty = Eigen::VectorXd::Constant(cols, lambda);
  if (options.interaction) {
    const double s2 = e.col(n).squaredNorm() / static_cast<double>(m) + 1e-300;
    penalty(n) = options.ridge * s2;
  }
  // Normal equations of the ridge problem around the prior, solved for d = theta - prior.
  const Eigen::MatrixXd a = e.transpose() * e + Eigen::MatrixXd(penalty.asDiagonal());
  const Eigen::VectorXd b = e.transpose() * (y - e * prior);
  const Eigen::VectorXd d = a.ldlt().solve(b);
  for (Eigen::Index l = 0; l < n; ++l) {
    model.weights[static_cast<size_t>(l)] =
        std::clamp(1.0 + d(l), 1.0 / options.weight_range, options.weight_range);
  }
  if (options.interaction) model.interaction = std::max(0.0, d(n));
  return model;
}

double predict(const SurrogateModel& model, const std::vector<double>& layer_errors) {
  return surrogate_prediction(model.weights, model.interaction, layer_errors);
}

double held_out_rank_correlation(const std::vector<Validation>& validations, size_t n_layers,
                                 const SurrogateFitOptions& options) {
  if (validations.size() < 3) return std::numeric_limits<double>::quiet_NaN();
  std::vector<double> predicted, measured;
  std::vector<Validation> others;
  for (size_t k = 0; k < validations.size(); ++k) {
    others.assign(validations.begin(), validations.end());
    others.erase(others.begin() + static_cast<std::ptrdiff_t>(k));
    const SurrogateModel fit = fit_surrogate(others, n_layers, options);
    predicted.push_back(predict(fit, validations[k].layer_errors));
    measured.push_back(validations[k].measured);
  }
  return spearman_rank_correlation(predicted, measured);
}

}  // namespace kvplan::search
