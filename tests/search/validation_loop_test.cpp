#include "search/validation_loop.h"

#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "core/error.h"
#include "search/pareto.h"
#include "search_fixtures.h"

namespace kvplan::search {
namespace {

// A hidden "real model": the true error weighs layers differently from the profile's additive
// guess, so the first surrogate misranks plans and refits must fix it.
struct HiddenModel {
  SearchSpace space;
  SurrogateModel truth;
  int calls = 0;

  double operator()(const std::vector<KvPair>& pairs) {
    ++calls;
    Assignment a;
    a.pairs = pairs;
    return predict(truth, layer_errors(space, a));
  }
};

HiddenModel make_model(uint32_t seed) {
  HiddenModel m;
  for (const LayerCandidates& l : test::int_pair_layers(12, seed)) {
    m.space.layers.push_back({l.layer, pareto_front(l.candidates, MemoryMeasure::kBits)});
  }
  for (const LayerCandidates& l : m.space.layers) {
    LayerGroup g{{l.layer}, {}};
    for (const LayerCandidate& c : l.candidates) g.choices.push_back(c.pair);
    m.space.groups.push_back(g);
  }
  m.space.measure = MemoryMeasure::kBits;
  m.space.budget = 4.0;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> w(0.1, 6.0);
  for (size_t l = 0; l < m.space.layers.size(); ++l) m.truth.weights.push_back(w(rng));
  m.truth.interaction = 0.05;  // layers' errors compound a little
  return m;
}

Nsga2Options short_search() {
  Nsga2Options search;
  search.generations = 80;
  return search;
}

// Up to 4 rounds of 3 plans, 12 evaluations in all.
ValidationLoopOptions four_rounds_of_three() {
  ValidationLoopOptions loop;
  loop.max_rounds = 4;
  loop.plans_per_round = 3;
  loop.max_evaluations = 12;
  return loop;
}

// A round's plans measured as one batch (what choose_plan does, so that HeldOutKl runs each
// prompt's exact forward once per round) give the loop one plan at a time gives: the same plans,
// in the same order, the same choice; each round's evaluations arrive together.
TEST(ValidationLoop, MeasuringARoundAsOneBatchGivesTheSameLoop) {
  HiddenModel one_by_one = make_model(15), batched = make_model(15);
  const Nsga2Options search = short_search();
  const ValidationLoopOptions loop = four_rounds_of_three();
  const ValidationLoopResult a =
      run_validation_loop(one_by_one.space, search, std::ref(one_by_one), loop);
  std::vector<size_t> batch_sizes;
  const MeasureAllFn measure_all = [&](const std::vector<std::vector<KvPair>>& plans) {
    batch_sizes.push_back(plans.size());
    std::vector<double> ys;
    for (const std::vector<KvPair>& pairs : plans) ys.push_back(batched(pairs));
    return ys;
  };
  const ValidationLoopResult b = run_validation_loop(batched.space, search, measure_all, loop);
  ASSERT_EQ(a.measured.size(), b.measured.size());
  for (size_t i = 0; i < a.measured.size(); ++i) {
    EXPECT_EQ(a.measured[i].assignment.pairs, b.measured[i].assignment.pairs) << i;
    EXPECT_EQ(a.measured[i].measured, b.measured[i].measured) << i;
    EXPECT_EQ(a.measured[i].round, b.measured[i].round) << i;
  }
  EXPECT_EQ(a.chosen.assignment.pairs, b.chosen.assignment.pairs);
  // One batch per round that measured anything, of that round's size.
  std::vector<size_t> per_round;
  for (const ValidationRound& r : b.round_log) {
    if (r.measured > 0) per_round.push_back(static_cast<size_t>(r.measured));
  }
  EXPECT_EQ(batch_sizes, per_round);
  EXPECT_EQ(batch_sizes.front(), 3u);  // round 1's three most promising plans, together
}

TEST(ValidationLoop, RefitsFindABetterPlanThanTheFirstRound) {
  // On 18 of the hidden models of seeds 1-40 (these options) a plan proposed after a refit beats
  // every first-round plan; on the rest the first round already held the best plan found. Seed 15
  // is one where the unweighted first surrogate misranks (best measured 11.73 in round 1, 9.19
  // after refits).
  HiddenModel model = make_model(15);
  const Nsga2Options search = short_search();
  const ValidationLoopOptions loop = four_rounds_of_three();
  const ValidationLoopResult r = run_validation_loop(model.space, search, std::ref(model), loop);
  EXPECT_EQ(model.calls, static_cast<int>(r.measured.size()));
  EXPECT_LE(r.measured.size(), 12u);
  double first_round_best = 1e300;
  for (const MeasuredPlan& m : r.measured) {
    if (m.round == 1) first_round_best = std::min(first_round_best, m.measured);
    EXPECT_LE(m.assignment.memory, 4.0 + 1e-9);
  }
  // The chosen plan is the lowest measured error by construction, so "no worse than round 1" would
  // hold whatever the refits did. They must do better: the first round ranks plans by the
  // profile's unweighted guess, and a plan proposed after a refit must beat all of them.
  EXPECT_GT(r.chosen.round, 1);
  EXPECT_LT(r.chosen.measured, first_round_best);
  // Refitting moved the surrogate towards the hidden weights: its prediction of the chosen plan is
  // closer to the truth than the unweighted sum is.
  const auto e = layer_errors(model.space, r.chosen.assignment);
  const double unweighted = predict({std::vector<double>(e.size(), 1.0), 0.0}, e);
  EXPECT_LE(std::abs(predict(r.surrogate, e) - r.chosen.measured),
            std::abs(unweighted - r.chosen.measured) + 1e-12);
  // Each round's exact front is non-dominated and within budget.
  ASSERT_FALSE(r.exact.points.empty());
  for (size_t i = 1; i < r.exact.points.size(); ++i) {
    EXPECT_GT(r.exact.points[i].memory, r.exact.points[i - 1].memory);
  }
  EXPECT_LE(r.exact.points.back().memory, 4.0 + 1e-9);
}

// After round 1 the loop measures only plans its refit predicts below the best measured error by
// min_improvement, and says per round why it went on or stopped.
TEST(ValidationLoop, LaterRoundsMeasureOnlyPlansPredictedToImprove) {
  for (const uint32_t seed : {3u, 9u, 15u, 21u}) {
    HiddenModel model = make_model(seed);
    Nsga2Options search;
    search.generations = 60;
    ValidationLoopOptions loop;
    loop.max_rounds = 4;
    const ValidationLoopResult r = run_validation_loop(model.space, search, std::ref(model), loop);
    ASSERT_EQ(r.round_log.size(), static_cast<size_t>(r.rounds)) << "seed " << seed;
    double best_before = 1e300;
    int round = 1;
    for (const MeasuredPlan& m : r.measured) {
      if (m.round != round) {
        best_before = r.round_log[static_cast<size_t>(round - 1)].best_measured;
        round = m.round;
      }
      if (m.round > 1) {
        EXPECT_LT(m.assignment.predicted_error, best_before * (1 - loop.min_improvement))
            << "seed " << seed << " round " << m.round;
      }
    }
    int validations = 0;
    for (size_t i = 0; i < r.round_log.size(); ++i) {
      const ValidationRound& log = r.round_log[i];
      validations += log.measured;
      EXPECT_EQ(log.round, static_cast<int>(i) + 1);
      const bool last = i + 1 == r.round_log.size();
      EXPECT_EQ(log.next.starts_with("stopped: "), last) << log.next;
      // A round that goes on has a refit that ranks, where there are enough validations to say.
      if (!last && validations >= loop.min_validations_for_rank) {
        EXPECT_GE(log.held_out_rank, loop.min_held_out_rank);
      }
    }
    EXPECT_EQ(validations, static_cast<int>(r.measured.size()));
  }
}

// Real errors unrelated to the profile's layer errors: no refit can rank them, and the loop does
// not let one choose plans.
TEST(ValidationLoop, ARefitThatDoesNotRankHeldOutPlansIsNotUsed) {
  HiddenModel model = make_model(15);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> noise(1.0, 2.0);
  int calls = 0;
  const MeasureFn measure = [&](const std::vector<KvPair>&) {
    ++calls;
    return noise(rng);
  };
  Nsga2Options search;
  search.generations = 40;
  ValidationLoopOptions loop;
  loop.plans_per_round = 6;
  loop.max_evaluations = 20;
  loop.min_improvement = 0;
  const ValidationLoopResult r = run_validation_loop(model.space, search, measure, loop);
  ASSERT_EQ(r.rounds, 1);
  ASSERT_EQ(r.round_log.size(), 1u);
  EXPECT_LT(r.round_log[0].held_out_rank, loop.min_held_out_rank);
  EXPECT_TRUE(r.round_log[0].next.starts_with("stopped: the refit ranks")) << r.round_log[0].next;
  EXPECT_EQ(calls, 6);
  // With the check off (any correlation accepted) the same loop goes on.
  rng.seed(7);
  loop.min_held_out_rank = -1;
  const ValidationLoopResult on = run_validation_loop(model.space, search, measure, loop);
  EXPECT_GT(on.rounds, 1);
}

TEST(ValidationLoop, DeterministicAndBudgetChecked) {
  HiddenModel a = make_model(4), b = make_model(4);
  Nsga2Options search;
  search.generations = 40;
  const ValidationLoopResult ra = run_validation_loop(a.space, search, std::ref(a), {});
  const ValidationLoopResult rb = run_validation_loop(b.space, search, std::ref(b), {});
  EXPECT_EQ(ra.chosen.assignment.choice, rb.chosen.assignment.choice);
  EXPECT_EQ(ra.measured.size(), rb.measured.size());

  HiddenModel impossible = make_model(4);
  impossible.space.budget = 0.5;  // below 2-bit everywhere
  EXPECT_THROW(run_validation_loop(impossible.space, search, std::ref(impossible), {}), Error);
  ValidationLoopOptions bad;
  bad.plans_per_round = 0;
  EXPECT_THROW(bad.validate(), Error);
  ValidationLoopOptions bad_rank;
  bad_rank.min_held_out_rank = 1.5;
  EXPECT_THROW(bad_rank.validate(), Error);
}

TEST(ValidationLoop, AnExtraPlanThatMeasuresBestIsChosen) {
  HiddenModel model = make_model(9);
  // A uniform plan the hidden model likes more than anything searched: the loop must pick it.
  ExtraPlan uniform{"uniform KV4",
                    std::vector<KvPair>(model.space.layers.size(), KvPair::parse("KV4")), 4.0,
                    std::vector<double>(model.space.layers.size(), 1.0)};
  int calls = 0;
  const MeasureFn measure = [&](const std::vector<KvPair>& pairs) {
    ++calls;
    return pairs == uniform.pairs ? -1.0 : model(pairs);
  };
  Nsga2Options search;
  search.generations = 30;
  const ValidationLoopResult r = run_validation_loop(model.space, search, measure, {}, {uniform});
  EXPECT_EQ(r.chosen.name, "uniform KV4");
  EXPECT_EQ(r.measured.front().name, "uniform KV4");
  EXPECT_EQ(calls, static_cast<int>(r.measured.size()));
  // An extra plan over the budget is not measured.
  uniform.memory = 5.0;
  const ValidationLoopResult over =
      run_validation_loop(model.space, search, measure, {}, {uniform});
  for (const MeasuredPlan& m : over.measured) EXPECT_TRUE(m.name.empty());
}

}  // namespace
}  // namespace kvplan::search
