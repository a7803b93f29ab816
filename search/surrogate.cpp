#include "search/surrogate.h"

#include <Eigen/Dense>

#include "core/error.h"

namespace kvplan::search {

std::vector<double> fit_surrogate_weights(const std::vector<Validation>& validations,
                                          size_t n_layers, const SurrogateFitOptions& options) {
  std::vector<double> w(n_layers, 1.0);
  if (validations.empty() || n_layers == 0) return w;
  const Eigen::Index n = static_cast<Eigen::Index>(n_layers);
  const Eigen::Index m = static_cast<Eigen::Index>(validations.size());
  Eigen::MatrixXd e(m, n);
  Eigen::VectorXd y(m);
  for (Eigen::Index k = 0; k < m; ++k) {
    const Validation& v = validations[static_cast<size_t>(k)];
    if (v.layer_errors.size() != n_layers) {
      fail(ErrorCode::kInvalidArgument, "validation {} has {} layer errors, expected {}", k,
           v.layer_errors.size(), n_layers);
    }
    for (Eigen::Index l = 0; l < n; ++l) e(k, l) = v.layer_errors[static_cast<size_t>(l)];
    y(k) = v.measured;
  }
  // Scale lambda to the data so the option means the same for tiny and large errors.
  const double scale = e.squaredNorm() / static_cast<double>(m * n) + 1e-300;
  const double lambda = options.ridge * scale;
  // Normal equations of the ridge problem around the prior w0 = 1, solved for d = w - 1.
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(n);
  const Eigen::MatrixXd a = e.transpose() * e + lambda * Eigen::MatrixXd::Identity(n, n);
  const Eigen::VectorXd b = e.transpose() * (y - e * ones);
  const Eigen::VectorXd d = a.ldlt().solve(b);
  for (Eigen::Index l = 0; l < n; ++l) w[static_cast<size_t>(l)] = std::max(0.0, 1.0 + d(l));
  return w;
}

double predict(const std::vector<double>& weights, const std::vector<double>& layer_errors) {
  double s = 0;
  for (size_t l = 0; l < layer_errors.size(); ++l) s += weights[l] * layer_errors[l];
  return s;
}

}  // namespace kvplan::search
