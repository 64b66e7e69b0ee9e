// Statistics: known answers for the building blocks (quantiles, the median's
// order-statistic interval, the stopping rule, intervals from replicates, the
// aggregate rule) and compute_statistics on a run. Coverage under realistic
// noise is tests/cpu_coverage.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <vector>

#include "scorer/aggregate_rule.h"
#include "scorer/intervals.h"
#include "scorer/stats.h"
#include "scorer/student_t.h"

using scorer::BootstrapOptions;
using scorer::Interval;
using scorer::LinearFigure;
using scorer::RunResult;
using scorer::ShapeResult;
using scorer::ShapeState;

namespace {

ShapeResult shape(const std::string& name, const std::string& regime, std::vector<double> baseline,
                  std::vector<double> candidate) {
  ShapeResult r;
  r.shape.name = name;
  r.shape.regime = regime;
  scorer::ReplicateResult& rep = r.replicates.emplace_back();
  rep.index = 1;
  rep.baseline_us = std::move(baseline);
  rep.candidate_us = std::move(candidate);
  r.converged = true;
  return r;
}

// Values spread evenly (in log) around `median`, shuffled: a replicate whose
// median and scatter are known.
std::vector<double> around(double median, double spread, int n, uint64_t seed) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(median * std::exp(spread * (double(i) / (n - 1) - 0.5)));
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  return v;
}

}  // namespace

TEST_CASE("median and geomean: known answers") {
  CHECK(scorer::median({3, 1, 2}) == 2);
  CHECK(scorer::median({4, 1, 3, 2}) == 2.5);
  CHECK(scorer::median({5, 5, 1, 9, 7, 3}) == 5);
  CHECK(scorer::median({-2}) == -2);
  CHECK(std::isnan(scorer::median({})));
  CHECK(scorer::geomean({1, 4}) == doctest::Approx(2).epsilon(1e-15));
  CHECK(scorer::geomean({2, 8, 4}) == doctest::Approx(4).epsilon(1e-15));
  CHECK(scorer::geomean({0.5, 2, 3}) == doctest::Approx(std::cbrt(3.0)).epsilon(1e-15));
  CHECK(std::isnan(scorer::geomean({})));
  CHECK(std::isnan(scorer::geomean({1, 0})));
  CHECK(std::isnan(scorer::geomean({1, -1})));
}

TEST_CASE("log_median_interval: the median and its order statistics at n/2 -+ 1.96 sqrt(n)/2") {
  // 1..100: the median 50.5; ranks 49.5 -+ 9.8 (0-based) fall between order
  // statistics, interpolated.
  std::vector<double> v;
  for (int i = 100; i >= 1; --i) v.push_back(i);
  const scorer::LogMedian m = scorer::log_median_interval(v);
  const double reach = 0.5 * 1.959963984540054 * 10;
  CHECK(std::exp(m.log_median) == doctest::Approx(50.5));
  CHECK(std::exp(m.log_lo) == doctest::Approx(50.5 - reach));
  CHECK(std::exp(m.log_hi) == doctest::Approx(50.5 + reach));
  CHECK(m.variance() == doctest::Approx(std::pow(m.half_width() / 1.959963984540054, 2)));
  // Odd counts, one value, and the interval clamped at the ends.
  CHECK(std::exp(scorer::log_median_interval({3, 1, 2}).log_median) == doctest::Approx(2));
  const scorer::LogMedian one = scorer::log_median_interval({4});
  CHECK(one.log_lo == one.log_hi);
  CHECK(one.variance() == 0);
  const scorer::LogMedian two = scorer::log_median_interval({1, 4});
  CHECK(std::exp(two.log_lo) == doctest::Approx(1));
  CHECK(std::exp(two.log_hi) == doctest::Approx(4));
  CHECK(std::isnan(scorer::log_median_interval({}).log_median));
}

TEST_CASE("the stopping rule: at least min_trials, a look every check_every, the target, the cap") {
  scorer::StoppingRule rule;
  rule.min_trials = 20, rule.check_every = 10, rule.max_trials = 95;
  rule.target_rel_halfwidth = 0.01, rule.time_cap_s = 1;
  // Identical ratios: converged at the first look, not before.
  scorer::TrialStopper flat(rule);
  for (int t = 1; t < 20; ++t) CHECK(flat.add(1.5, 0) == scorer::StopDecision::go_on);
  CHECK(flat.add(1.5, 0) == scorer::StopDecision::converged);
  // Ratios spread by +-20%: never converged; capped at the first look past
  // the time cap, or at max_trials whatever the time.
  scorer::TrialStopper noisy(rule);
  std::vector<scorer::StopDecision> seen;
  for (int t = 1; t <= 40; ++t) seen.push_back(noisy.add(t % 2 ? 1.2 : 0.8, t < 35 ? 0.5 : 2.0));
  CHECK(std::count(seen.begin(), seen.end(), scorer::StopDecision::go_on) == 39);
  CHECK(seen.back() == scorer::StopDecision::capped);
  scorer::TrialStopper slow(rule);
  scorer::StopDecision last = scorer::StopDecision::go_on;
  while (last == scorer::StopDecision::go_on) last = slow.add(slow.trials() % 2 ? 1.2 : 0.8, 0);
  CHECK(slow.trials() == 95);
  CHECK(last == scorer::StopDecision::capped);
}

TEST_CASE("intervals from replicates: t on R - 1 degrees of freedom, floored by the trials' own interval") {
  // Three replicates at log values -0.01, 0, 0.02 with no within noise.
  scorer::FigureSeries s{{-0.01, 0.0, 0.02}, {0, 0, 0}};
  scorer::LogEstimate e = scorer::replicate_estimate(s);
  const double mean = 0.01 / 3,
               sd = std::sqrt((std::pow(-0.01 - mean, 2) + mean * mean + std::pow(0.02 - mean, 2)) / 2);
  CHECK(e.replicates == 3);
  CHECK(e.df == 2);
  CHECK(e.mean == doctest::Approx(mean));
  CHECK(e.var == doctest::Approx(sd * sd / 3));
  Interval i = scorer::ratio_interval(e, 0.95);
  CHECK(std::log(i.point) == doctest::Approx(mean));
  CHECK(std::log(i.hi) - std::log(i.point) == doctest::Approx(4.302652729749464 * sd / std::sqrt(3.0)));
  // Replicates that agree exactly: the interval is the trials' own, z * sqrt(within / R).
  s = {{0.1, 0.1, 0.1}, {4e-4, 4e-4, 4e-4}};
  i = scorer::ratio_interval(scorer::replicate_estimate(s), 0.95);
  CHECK(std::log(i.hi) - 0.1 == doctest::Approx(1.959963984540054 * 0.02 / std::sqrt(3.0)));
  // One replicate: its within variance, normal quantile.
  e = scorer::replicate_estimate({{0.2}, {1e-4}});
  CHECK(e.replicates == 1);
  CHECK(e.df == scorer::kInfiniteDf);
  CHECK(e.var == doctest::Approx(1e-4));
  // The difference of two runs: variances add, Welch's degrees of freedom.
  const scorer::LogEstimate a{0.05, 1e-4, 2, 3}, b{0.01, 1e-4, 2, 3};
  const scorer::LogEstimate d = scorer::difference(a, b);
  CHECK(d.mean == doctest::Approx(0.04));
  CHECK(d.var == doctest::Approx(2e-4));
  CHECK(d.df == doctest::Approx(4));
}

TEST_CASE("figure_series: weighted sums per replicate, over the replicates every shape has") {
  const std::vector<scorer::ReplicateSummary> shapes = {
      {{0.1, 0.2, 0.3}, {1e-4, 1e-4, 1e-4}}, {{1.0, 1.1}, {4e-4, 4e-4}}, {{5.0}, {0}}};
  LinearFigure f;
  f.defined = true;
  f.coef = {0.5, 0.5, 0};
  f.constant = 0.25;
  const scorer::FigureSeries s = scorer::figure_series(shapes, f);
  REQUIRE(s.log_value.size() == 2);  // shape 1 has two replicates; shape 2 is not used
  CHECK(s.log_value[0] == doctest::Approx(0.25 + 0.55));
  CHECK(s.log_value[1] == doctest::Approx(0.25 + 0.65));
  CHECK(s.within_var[0] == doctest::Approx(0.25 * 1e-4 + 0.25 * 4e-4));
  // A figure of the constant alone (failed shapes at a fixed speedup).
  LinearFigure c;
  c.defined = true;
  c.coef = {0, 0, 0};
  c.constant = std::log(0.5);
  const Interval fixed = scorer::ratio_interval(scorer::replicate_estimate(scorer::figure_series(shapes, c)), 0.95);
  CHECK(fixed.point == doctest::Approx(0.5));
  CHECK(fixed.lo == doctest::Approx(0.5));
  CHECK(scorer::figure_series(shapes, LinearFigure{false, {1, 0, 0}, 0}).log_value.empty());
  CHECK_THROWS_AS(scorer::figure_series(shapes, LinearFigure{true, {1, 0}, 0}), std::invalid_argument);
}

TEST_CASE("the aggregate rule: over shapes or regimes, weights, failed shapes void or count") {
  // Shapes: a, b in dense; c in moe; d in router.
  const std::vector<int> regime_of = {0, 0, 1, 2};
  const std::vector<std::string> names = {"dense", "moe", "router"};
  const std::vector<double> log_speedup = {std::log(2.0), std::log(8.0), std::log(3.0), std::log(1.5)};
  auto value = [&](const LinearFigure& f) {
    REQUIRE(f.defined);
    double l = f.constant;
    for (size_t s = 0; s < f.coef.size(); ++s) l += f.coef[s] * log_speedup[s];
    return std::exp(l);
  };
  const std::vector<ShapeState> all(4, ShapeState::scored);
  scorer::ScoringRule rule;
  scorer::RunFigures f = scorer::run_figures(regime_of, names, all, rule);
  CHECK(value(f.regimes[0]) == doctest::Approx(4));
  CHECK(value(f.over_shapes) == doctest::Approx(std::pow(2.0 * 8 * 3 * 1.5, 0.25)));
  CHECK(value(f.over_regimes) == doctest::Approx(std::cbrt(4.0 * 3 * 1.5)));
  CHECK(&f.declared(rule) == &f.over_shapes);
  rule.aggregate = scorer::ScoringRule::Aggregate::regimes;
  CHECK(&f.declared(rule) == &f.over_regimes);
  CHECK(&f.other(rule) == &f.over_shapes);

  // Weights weigh regimes (the rule over shapes ignores them).
  rule.regime_weights = {{"dense", 2}, {"moe", 1}, {"router", 1}, {"unused", 7}};
  f = scorer::run_figures(regime_of, names, all, rule);
  CHECK(value(f.over_regimes) == doctest::Approx(std::pow(4.0 * 4 * 3 * 1.5, 0.25)));
  CHECK(value(f.over_shapes) == doctest::Approx(std::pow(2.0 * 8 * 3 * 1.5, 0.25)));
  rule.regime_weights = {{"dense", 1}, {"moe", 1}};
  CHECK_THROWS_AS(scorer::run_figures(regime_of, names, all, rule), std::invalid_argument);
  rule.regime_weights = {{"dense", 1}, {"moe", -1}, {"router", 1}};
  CHECK_THROWS_AS(scorer::run_figures(regime_of, names, all, rule), std::invalid_argument);
  rule.regime_weights.clear();

  // A failed shape voids both aggregates by default; its regime shows the rest.
  std::vector<ShapeState> failed = all;
  failed[1] = ShapeState::failed;
  f = scorer::run_figures(regime_of, names, failed, rule);
  CHECK_FALSE(f.over_shapes.defined);
  CHECK_FALSE(f.over_regimes.defined);
  CHECK(value(f.regimes[0]) == doctest::Approx(2));
  // Counted at a fixed speedup, it takes its place everywhere.
  rule.failed_speedup = 0.5;
  f = scorer::run_figures(regime_of, names, failed, rule);
  CHECK(value(f.regimes[0]) == doctest::Approx(1));
  CHECK(value(f.over_shapes) == doctest::Approx(std::pow(2.0 * 0.5 * 3 * 1.5, 0.25)));
  // An untimed shape (a correctness-only run) is in no figure and voids nothing.
  std::vector<ShapeState> untimed = all;
  untimed[2] = ShapeState::untimed;
  rule.failed_speedup = 0;
  f = scorer::run_figures(regime_of, names, untimed, rule);
  CHECK_FALSE(f.regimes[1].defined);
  CHECK(value(f.over_shapes) == doctest::Approx(std::cbrt(2.0 * 8 * 1.5)));
  CHECK(value(f.over_regimes) == doctest::Approx(std::sqrt(4.0 * 1.5)));
}

TEST_CASE("figure_intervals: replicates where there are two or more, else the seeded bootstrap") {
  // Shape 0: three replicates around 2.0, 2.1, 1.9; shape 1: one replicate.
  const std::vector<std::vector<std::vector<double>>> values = {
      {around(2.0, 0.02, 41, 1), around(2.1, 0.02, 41, 2), around(1.9, 0.02, 41, 3)}, {around(1.2, 0.1, 61, 4)}};
  const LinearFigure both{true, {0.5, 0.5}, 0};
  BootstrapOptions opt;
  opt.resamples = 300;
  opt.seed = 9;
  const auto iv = scorer::figure_intervals(values, {scorer::shape_figure(0, 2), scorer::shape_figure(1, 2), both}, opt);
  CHECK(iv[0].replicates == 3);
  CHECK(iv[0].interval.point == doctest::Approx(std::cbrt(2.0 * 2.1 * 1.9)));
  CHECK(iv[0].interval.lo < 1.9);
  CHECK(iv[0].interval.hi > 2.1);
  CHECK(iv[1].replicates == 1);
  CHECK(iv[1].interval.point == doctest::Approx(1.2));
  CHECK(iv[1].interval.lo < 1.2);
  CHECK(iv[1].interval.hi > 1.2);
  // The two share replicate 1 only: the bootstrap, of each shape's first replicate.
  CHECK(iv[2].replicates == 1);
  CHECK(iv[2].interval.point == doctest::Approx(std::sqrt(2.0 * 1.2)));
  // The same seed, the same intervals; another seed, others.
  const auto again = scorer::figure_intervals(values, {scorer::shape_figure(1, 2)}, opt);
  CHECK(again[0].interval.lo == iv[1].interval.lo);
  opt.seed = 10;
  const auto other = scorer::figure_intervals(values, {scorer::shape_figure(1, 2)}, opt);
  CHECK(other[0].interval.point == iv[1].interval.point);
  CHECK((other[0].interval.lo != iv[1].interval.lo || other[0].interval.hi != iv[1].interval.hi));
  // Identical ratios leave nothing to resample.
  const Interval flat = scorer::median_interval(std::vector<double>(25, 1.25), opt);
  CHECK(flat.lo == 1.25);
  CHECK(flat.hi == 1.25);
}

TEST_CASE("compute_statistics: per-shape figures, regimes, failures, graph, recorded") {
  RunResult run;
  // Ratios 2, 2.5, 2 (median 2); the medians of the times are 20 and 10.
  run.shapes.push_back(shape("a", "dense", {20, 25, 18}, {10, 10, 9}));
  run.shapes[0].floor_us = 4;
  run.shapes[0].raw_limit_us = 2;
  run.shapes[0].recorded_us = 30;
  run.shapes[0].flags = {"speedup above 10x", "clock drift"};
  run.shapes[0].replicates[0].graph_baseline_us = {8, 9};
  run.shapes[0].replicates[0].graph_candidate_us = {4, 4};
  // Ratios 0.5, 0.5, 0.6, 0.4 (median 0.5).
  run.shapes.push_back(shape("b", "moe", {5, 5, 6, 4}, {10, 10, 10, 10}));
  run.shapes.push_back(shape("c", "dense", {9, 9}, {1, 1}));
  run.shapes[2].status = "incorrect";
  run.shapes[2].reason = "output off at element 3";
  // Ratio 8 throughout.
  run.shapes.push_back(shape("d", "dense", {8, 8}, {1, 1}));
  run.shapes[3].converged = false;
  BootstrapOptions opt;
  opt.resamples = 200;
  scorer::compute_statistics(run, opt);

  const ShapeResult& a = run.shapes[0];
  CHECK(a.baseline_median_us == 20);
  CHECK(a.candidate_median_us == 10);
  CHECK(a.speedup == 2);
  CHECK(a.ci_lo >= 2);  // every resampled median is 2 or 2.5
  CHECK(a.ci_hi <= 2.5);
  CHECK(a.pct_of_floor == doctest::Approx(0.4));
  CHECK(a.pct_of_raw == doctest::Approx(0.2));
  CHECK(a.recorded_speedup == doctest::Approx(3));
  CHECK(a.graph_speedup == doctest::Approx(2.125));
  CHECK(run.shapes[1].speedup == 0.5);
  CHECK(run.shapes[1].recorded_speedup == 0);
  CHECK(run.shapes[1].graph_speedup == 0);  // no graph trials
  // A failed shape has no figures.
  const ShapeResult& c = run.shapes[2];
  CHECK(c.speedup == 0);
  CHECK(c.baseline_median_us == 0);
  CHECK(c.candidate_median_us == 0);

  REQUIRE(run.regimes.size() == 2);
  CHECK(run.regimes[0].name == "dense");
  CHECK(run.regimes[0].shapes == 2);
  CHECK(run.regimes[0].failed == 1);
  CHECK(run.regimes[0].speedup.point == doctest::Approx(4));  // sqrt(2 * 8)
  CHECK(run.regimes[0].recorded_speedup == doctest::Approx(3));
  CHECK(run.regimes[0].graph_speedup.point == doctest::Approx(2.125));
  CHECK(run.regimes[1].name == "moe");
  CHECK(run.regimes[1].shapes == 1);
  CHECK(run.regimes[1].speedup.point == 0.5);
  // The failed shape voids the aggregate (the default scoring rule).
  CHECK(run.aggregate.point == 0);
  CHECK(run.graph_aggregate.point == 0);
  CHECK(run.recorded_aggregate == doctest::Approx(3));
  CHECK(run.shapes_failed == 1);
  CHECK(run.flags == 2);
  CHECK(!run.correctness_passed);
  CHECK(scorer::interval_replicates(run) == 1);

  // Fixing the failed shape brings it into every figure; stale regimes go.
  run.shapes[2].status = "ok";
  run.regimes.push_back({});
  scorer::compute_statistics(run, opt);
  CHECK(run.correctness_passed);
  CHECK(run.shapes_failed == 0);
  REQUIRE(run.regimes.size() == 2);
  CHECK(run.regimes[0].shapes == 3);
  CHECK(run.regimes[0].speedup.point == doctest::Approx(std::cbrt(2.0 * 9 * 8)));
  CHECK(run.aggregate.point == doctest::Approx(std::pow(2.0 * 0.5 * 9 * 8, 0.25)));
  CHECK(run.aggregate.lo <= run.aggregate.point);
  CHECK(run.aggregate.hi >= run.aggregate.point);
  CHECK(run.graph_aggregate.point == doctest::Approx(2.125));

  run.shapes[1].replicates[0].candidate_us.pop_back();
  CHECK_THROWS_AS(scorer::compute_statistics(run, opt), std::invalid_argument);
}

TEST_CASE("compute_statistics: a run with every shape failed has no aggregate") {
  RunResult run;
  run.shapes.push_back(shape("a", "r", {}, {}));
  run.shapes[0].status = "crash";
  scorer::compute_statistics(run, {});
  CHECK(run.aggregate.point == 0);
  CHECK(run.aggregate.lo == 0);
  CHECK(run.regimes.size() == 1);
  CHECK(run.regimes[0].failed == 1);
  CHECK(run.shapes_failed == 1);
  CHECK(!run.correctness_passed);
  CHECK(scorer::interval_replicates(run) == 0);
}
