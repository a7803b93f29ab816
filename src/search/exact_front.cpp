#include "search/exact_front.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>

#include "core/error.h"

namespace kvplan::search {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Integer memory of every group x choice, in units of `unit`.
struct IntegerMemory {
  std::vector<std::vector<uint64_t>> units;  // [group][choice]
  double unit = 1;
};

IntegerMemory integer_memory(const SearchTable& table) {
  IntegerMemory m;
  const auto whole_in = [&](double unit) {
    for (const auto& group : table.cost) {
      for (const GroupChoiceCost& c : group) {
        const double u = c.memory / unit;
        if (std::fabs(u - std::round(u)) > 1e-6 * std::max(1.0, u)) return false;
      }
    }
    return true;
  };
  int k = 0;
  while (k < 6 && !whole_in(std::ldexp(1.0, -k))) ++k;
  const double unit = std::ldexp(1.0, -k);
  const bool exact = whole_in(unit);
  uint64_t gcd = 0;
  m.units.resize(table.cost.size());
  for (size_t g = 0; g < table.cost.size(); ++g) {
    for (const GroupChoiceCost& c : table.cost[g]) {
      const double u = c.memory / unit;
      const uint64_t v = static_cast<uint64_t>(exact ? std::round(u) : std::ceil(u - 1e-9));
      m.units[g].push_back(v);
      gcd = std::gcd(gcd, v);
    }
  }
  if (gcd == 0) gcd = 1;
  for (auto& group : m.units) {
    for (uint64_t& v : group) v /= gcd;
  }
  m.unit = unit * static_cast<double>(gcd);
  return m;
}

}  // namespace

double minimum_memory(const SearchSpace& space, const SearchTable& table) {
  double total = 0;
  for (const auto& group : table.cost) {
    double least = kInf;
    for (const GroupChoiceCost& c : group) least = std::min(least, c.memory);
    total += least;
  }
  if (space.measure == MemoryMeasure::kBits && !space.layers.empty()) {
    total /= static_cast<double>(space.layers.size());
  }
  return total;
}

ExactFront exact_front(const SearchSpace& space, const SearchTable& table, size_t max_states) {
  const auto start = std::chrono::steady_clock::now();
  if (space.groups.empty()) fail(ErrorCode::kInvalidArgument, "the search space has no groups");
  const IntegerMemory im = integer_memory(table);
  const size_t G = space.groups.size();
  const double budget_sum = summed_budget(space);
  uint64_t total_max = 0;
  for (const auto& group : im.units) total_max += *std::max_element(group.begin(), group.end());
  uint64_t cap = total_max;
  if (std::isfinite(budget_sum)) {
    cap = std::min<uint64_t>(
        cap, static_cast<uint64_t>(std::floor(budget_ceiling(budget_sum / im.unit) + 1e-9)));
  }
  const size_t S = static_cast<size_t>(cap) + 1;
  if (S > max_states) {
    fail(ErrorCode::kResourceExhausted,
         "exact front: {} memory states of {} each exceed the limit of {}", S, im.unit, max_states);
  }
  if (G > 0 && S * G > (size_t{1} << 31)) {
    fail(ErrorCode::kResourceExhausted, "exact front: {} groups x {} states is too large", G, S);
  }
  // best[s]: least additive error of groups 0..g with total memory exactly s units.
  std::vector<double> best(S, kInf), next(S);
  std::vector<uint16_t> argmin(G * S);
  best[0] = 0;
  for (size_t g = 0; g < G; ++g) {
    std::fill(next.begin(), next.end(), kInf);
    uint16_t* arg = argmin.data() + g * S;
    for (size_t c = 0; c < im.units[g].size(); ++c) {
      const size_t w = static_cast<size_t>(im.units[g][c]);
      const double e = table.cost[g][c].weighted_error;
      if (w >= S) continue;
      for (size_t s = 0; s + w < S; ++s) {
        const double v = best[s] + e;
        // Strict '<': ties keep the earlier (cheaper-listed) choice, so the result is
        // deterministic.
        if (v < next[s + w]) {
          next[s + w] = v;
          arg[s + w] = static_cast<uint16_t>(c);
        }
      }
    }
    best.swap(next);
  }
  ExactFront front;
  front.unit = im.unit;
  front.states = S;
  double running = kInf;
  for (size_t s = 0; s < S; ++s) {
    if (!(best[s] < running)) continue;
    running = best[s];
    std::vector<int> choice(G);
    size_t at = s;
    for (size_t g = G; g-- > 0;) {
      const uint16_t c = argmin[g * S + at];
      choice[g] = c;
      at -= static_cast<size_t>(im.units[g][c]);
    }
    Assignment a = evaluate_assignment(space, table, choice);
    if (a.feasible) front.points.push_back(std::move(a));
  }
  front.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return front;
}

}  // namespace kvplan::search
