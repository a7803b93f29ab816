// The search alone on a large model: 80 layers x (20 key formats x 20 value formats), an additive
// side model of random per-layer sensitivities. Times the per-layer Pareto pruning, the exact
// front (multiple-choice knapsack DP) and NSGA-II seeded with it on one island, against a budget
// in the middle of the range. Issue target: under 5 s on one core. The physical reference printed
// beside it is the DP's work rate: cells (groups x states x choices) per second.
//
//   kvplan_bench_search [--layers 80] [--formats 20] [--seed 1]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "formats/format.h"
#include "search/exact_front.h"
#include "search/nsga2_search.h"
#include "search/pareto.h"

namespace {

using namespace kvplan;
using namespace kvplan::search;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  int layers = 80, formats = 20;
  unsigned seed = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--layers")) layers = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--formats")) formats = std::stoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--seed")) seed = static_cast<unsigned>(std::stoul(argv[i + 1]));
  }
  if (formats < 2 || static_cast<size_t>(formats) > format_table().size()) {
    std::fprintf(stderr, "--formats %d: expected 2..%zu\n", formats, format_table().size());
    return 2;
  }
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> scale(0.1, 5.0), noise(0.8, 1.25);
  // Row bytes of 8 KV heads x head_dim 128 for `formats` formats from 2.25 to 16 bits per value.
  const auto infos = format_table();
  std::vector<double> row_bytes;
  for (int f = 0; f < formats; ++f) row_bytes.push_back(36.0 + 4.0 * f * 220.0 / formats);
  std::vector<LayerCandidates> all;
  for (int l = 0; l < layers; ++l) {
    const double ks = scale(rng), vs = scale(rng);
    LayerCandidates lc{l, {}};
    for (int k = 0; k < formats; ++k) {
      for (int v = 0; v < formats; ++v) {
        const double kb = 8 * row_bytes[static_cast<size_t>(k)];
        const double vb = 8 * row_bytes[static_cast<size_t>(v)];
        // Distinct pairs per layer (the search keys a layer's choices by pair).
        const KvPair pair{Format(infos[static_cast<size_t>(k)].id),
                          Format(infos[static_cast<size_t>(v)].id)};
        lc.candidates.push_back(
            {pair, 0, kb + vb,
             ks * noise(rng) * std::exp2(-kb / 256) + vs * noise(rng) * std::exp2(-vb / 256)});
      }
    }
    all.push_back(std::move(lc));
  }
  const auto t0 = Clock::now();
  SearchSpace space;
  double lo = 0, hi = 0;
  for (const LayerCandidates& l : all) {
    LayerCandidates pruned{l.layer, pareto_front(l.candidates, MemoryMeasure::kBytes)};
    LayerGroup g{{l.layer}, {}};
    for (const LayerCandidate& c : pruned.candidates) g.choices.push_back(c.pair);
    lo += pruned.candidates.front().bytes_per_token;
    hi += pruned.candidates.back().bytes_per_token;
    space.layers.push_back(std::move(pruned));
    space.groups.push_back(std::move(g));
  }
  space.measure = MemoryMeasure::kBytes;
  space.budget = lo + 0.4 * (hi - lo);
  const double prune_s = since(t0);
  size_t choices = 0;
  for (const LayerGroup& g : space.groups) choices += g.choices.size();

  const auto t1 = Clock::now();
  const SearchTable table = SearchTable::build(space);
  const ExactFront exact = exact_front(space, table);
  const double exact_s = since(t1);

  space.interaction = 1e-3;  // the corrected, non-additive objective NSGA-II searches
  Nsga2Options opt;
  opt.islands = 1;
  std::vector<std::vector<int>> seeds;
  for (const Assignment& a : exact.points) seeds.push_back(a.choice);
  const auto t2 = Clock::now();
  const SearchResult nsga = nsga2_front(space, opt, seeds);
  const double nsga_s = since(t2);

  const double cells = static_cast<double>(exact.states) * static_cast<double>(choices);
  std::printf("search: %d layers x %d key x %d value formats (%d pairs per layer)\n", layers,
              formats, formats, formats * formats);
  std::printf("prune     %.3f s  (%zu Pareto choices left over %d layers)\n", prune_s, choices,
              layers);
  std::printf(
      "exact     %.3f s  (%zu states x %zu choices = %.3g DP cells, %.3g cells/s; %zu "
      "front points)\n",
      exact_s, exact.states, choices, cells, cells / exact_s, exact.points.size());
  std::printf("nsga2     %.3f s  (population %u x %u generations, 1 island; %zu front points)\n",
              nsga_s, opt.population, opt.generations, nsga.front.size());
  std::printf("total     %.3f s  (target < 5 s on one core)\n", prune_s + exact_s + nsga_s);
  return 0;
}
