#include "stats.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

namespace scorer {
namespace {

// Median of v, reordering it in place; NaN when empty.
double median_inplace(std::vector<double>& v) {
  if (v.empty()) return NAN;
  const size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + h, v.end());
  if (v.size() % 2) return v[h];
  // nth_element leaves the lower half below v[h]: its largest is the other middle.
  return 0.5 * (*std::max_element(v.begin(), v.begin() + h) + v[h]);
}

// Quantile q of sorted values, interpolated linearly between order statistics.
double quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * double(sorted.size() - 1);
  const size_t i = size_t(pos);
  if (i + 1 >= sorted.size()) return sorted.back();
  return sorted[i] + (pos - double(i)) * (sorted[i + 1] - sorted[i]);
}

Interval interval(double point, std::vector<double>& samples, double level) {
  if (std::isnan(point)) return {NAN, NAN, NAN};
  std::sort(samples.begin(), samples.end());
  return {point, quantile(samples, (1 - level) / 2), quantile(samples, (1 + level) / 2)};
}


// Geometric means per regime and overall of per-shape values, over the shapes
// with a value (not NaN).
void geomeans(const std::vector<double>& per_shape, const std::vector<int>& regime_of,
              std::vector<double>* regimes, double* aggregate) {
  std::vector<double> log_sum(regimes->size(), 0.0);
  std::vector<int> count(regimes->size(), 0);
  double all_sum = 0;
  int all_count = 0;
  for (size_t s = 0; s < per_shape.size(); ++s) {
    if (std::isnan(per_shape[s])) continue;
    const double l = per_shape[s] > 0 ? std::log(per_shape[s]) : NAN;
    log_sum[regime_of[s]] += l;
    ++count[regime_of[s]];
    all_sum += l;
    ++all_count;
  }
  for (size_t g = 0; g < regimes->size(); ++g)
    (*regimes)[g] = count[g] ? std::exp(log_sum[g] / count[g]) : NAN;
  *aggregate = all_count ? std::exp(all_sum / all_count) : NAN;
}

Interval zero_if_nan(const Interval& i) { return std::isfinite(i.point) ? i : Interval{}; }

double zero_if_nan(double x) { return std::isfinite(x) ? x : 0.0; }

std::vector<double> checked_ratios(const ShapeResult& r, const std::vector<double>& baseline,
                                   const std::vector<double>& candidate, const char* what) {
  if (baseline.size() != candidate.size())
    throw std::invalid_argument("shape " + r.shape.name + ": " + std::to_string(baseline.size()) +
                                " " + what + " baseline trials but " +
                                std::to_string(candidate.size()) + " candidate trials");
  return paired_ratios(baseline, candidate);
}

}  // namespace

double median_of_medians(const ShapeResult& r, std::vector<double> ReplicateResult::*trials) {
  std::vector<double> m;
  for (const ReplicateResult& p : r.replicates)
    if (!(p.*trials).empty()) m.push_back(median(p.*trials));
  return median_inplace(m);
}

std::vector<double> paired_ratios(const std::vector<double>& baseline, const std::vector<double>& candidate) {
  std::vector<double> ratios(baseline.size());
  for (size_t i = 0; i < ratios.size(); ++i) ratios[i] = baseline[i] / candidate[i];
  return ratios;
}

// Uniform index in [0, n) from the high half of a 64x64-bit product, rather
// than std::uniform_int_distribution, whose algorithm differs between standard
// libraries: a results file recomputed anywhere gives the same intervals.
size_t draw(std::mt19937_64& rng, size_t n) {
  return size_t((static_cast<unsigned __int128>(rng()) * n) >> 64);
}

double median(std::vector<double> v) { return median_inplace(v); }

double geomean(const std::vector<double>& v) {
  if (v.empty()) return NAN;
  double s = 0;
  for (double x : v) {
    if (!(x > 0)) return NAN;
    s += std::log(x);
  }
  return std::exp(s / double(v.size()));
}

BootstrapResult bootstrap(const std::vector<std::vector<double>>& ratios,
                          const std::vector<int>& regime_of, int n_regimes,
                          const BootstrapOptions& opt) {
  const size_t n_shapes = ratios.size();
  if (regime_of.size() != n_shapes) throw std::invalid_argument("bootstrap: regime_of size");
  for (int g : regime_of)
    if (g < 0 || g >= n_regimes)
      throw std::invalid_argument("bootstrap: regime index out of range");
  if (opt.resamples < 1 || !(opt.level > 0 && opt.level < 1))
    throw std::invalid_argument("bootstrap: resamples must be >= 1 and level in (0, 1)");

  // Point estimates from the data as measured.
  std::vector<double> point(n_shapes), regime_point(n_regimes);
  double aggregate_point;
  for (size_t s = 0; s < n_shapes; ++s) point[s] = median(ratios[s]);
  geomeans(point, regime_of, &regime_point, &aggregate_point);

  // Every resample redraws every shape, and the regime and aggregate figures
  // of that resample are computed from those same draws.
  const size_t R = size_t(opt.resamples);
  std::vector<std::vector<double>> shape_samples(n_shapes, std::vector<double>(R));
  std::vector<std::vector<double>> regime_samples(n_regimes, std::vector<double>(R));
  std::vector<double> aggregate_samples(R);
  std::mt19937_64 rng(opt.seed);
  std::vector<double> resample, medians(n_shapes), regimes(n_regimes);
  for (size_t r = 0; r < R; ++r) {
    for (size_t s = 0; s < n_shapes; ++s) {
      const std::vector<double>& x = ratios[s];
      resample.resize(x.size());
      for (double& v : resample) v = x[draw(rng, x.size())];
      medians[s] = shape_samples[s][r] = median_inplace(resample);
    }
    geomeans(medians, regime_of, &regimes, &aggregate_samples[r]);
    for (int g = 0; g < n_regimes; ++g) regime_samples[g][r] = regimes[g];
  }

  BootstrapResult out;
  for (size_t s = 0; s < n_shapes; ++s)
    out.shapes.push_back(interval(point[s], shape_samples[s], opt.level));
  for (int g = 0; g < n_regimes; ++g)
    out.regimes.push_back(interval(regime_point[g], regime_samples[g], opt.level));
  out.aggregate = interval(aggregate_point, aggregate_samples, opt.level);
  return out;
}

Interval median_interval(const std::vector<double>& ratios, const BootstrapOptions& opt) {
  return bootstrap({ratios}, {0}, 1, opt).shapes[0];
}

void compute_statistics(RunResult& run, const BootstrapOptions& opt) {
  const size_t n = run.shapes.size();
  std::vector<int> regime_of(n);
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) {
    const std::string& name = run.shapes[i].shape.regime;
    const auto it = std::find(names.begin(), names.end(), name);
    regime_of[i] = int(it - names.begin());
    if (it == names.end()) names.push_back(name);
  }
  const int n_regimes = int(names.size());

  std::vector<std::vector<double>> ratios(n), graph_ratios(n);
  std::vector<double> recorded(n, NAN);  // recorded speedup per shape, NaN when none
  bool any_graph = false;
  for (size_t i = 0; i < n; ++i) {
    ShapeResult& r = run.shapes[i];
    r.baseline_median_us = r.candidate_median_us = r.untouched_baseline_median_us = 0;
    r.pct_of_floor = r.pct_of_raw = 0;
    r.speedup = r.ci_lo = r.ci_hi = 0;
    r.graph_speedup = r.graph_ci_lo = r.graph_ci_hi = 0;
    r.recorded_speedup = 0;
    if (r.status != "ok") continue;
    // Pooled over the replicates for now (each replicate's trials stay paired).
    ratios[i] = checked_ratios(r, pooled(r, &ReplicateResult::baseline_us), pooled(r, &ReplicateResult::candidate_us),
                               "event");
    graph_ratios[i] = checked_ratios(r, pooled(r, &ReplicateResult::graph_baseline_us),
                                     pooled(r, &ReplicateResult::graph_candidate_us), "graph");
    any_graph |= !graph_ratios[i].empty();
    r.baseline_median_us = zero_if_nan(median_of_medians(r, &ReplicateResult::baseline_us));
    r.candidate_median_us = zero_if_nan(median_of_medians(r, &ReplicateResult::candidate_us));
    r.untouched_baseline_median_us = zero_if_nan(median_of_medians(r, &ReplicateResult::untouched_baseline_us));
    if (r.candidate_median_us > 0) {
      r.pct_of_floor = r.floor_us / r.candidate_median_us;
      r.pct_of_raw = r.raw_limit_us / r.candidate_median_us;
      if (r.recorded_us > 0)
        recorded[i] = r.recorded_speedup = r.recorded_us / r.candidate_median_us;
    }
  }

  const BootstrapResult b = bootstrap(ratios, regime_of, n_regimes, opt);
  BootstrapResult gb;
  if (any_graph) gb = bootstrap(graph_ratios, regime_of, n_regimes, opt);
  for (size_t i = 0; i < n; ++i) {
    ShapeResult& r = run.shapes[i];
    if (r.status != "ok") continue;
    const Interval s = zero_if_nan(b.shapes[i]);
    r.speedup = s.point, r.ci_lo = s.lo, r.ci_hi = s.hi;
    if (any_graph) {
      const Interval g = zero_if_nan(gb.shapes[i]);
      r.graph_speedup = g.point, r.graph_ci_lo = g.lo, r.graph_ci_hi = g.hi;
    }
  }

  std::vector<double> recorded_regime(n_regimes);
  double recorded_all;
  geomeans(recorded, regime_of, &recorded_regime, &recorded_all);
  run.regimes.assign(n_regimes, RegimeResult{});
  for (int g = 0; g < n_regimes; ++g) {
    RegimeResult& rr = run.regimes[g];
    rr.name = names[g];
    rr.speedup = zero_if_nan(b.regimes[g]);
    if (any_graph) rr.graph_speedup = zero_if_nan(gb.regimes[g]);
    rr.recorded_speedup = zero_if_nan(recorded_regime[g]);
  }
  run.shapes_failed = 0;
  run.flags = 0;
  for (size_t i = 0; i < n; ++i) {
    const ShapeResult& r = run.shapes[i];
    const bool ok = r.status == "ok";
    ++(ok ? run.regimes[regime_of[i]].shapes : run.regimes[regime_of[i]].failed);
    run.shapes_failed += !ok;
    run.flags += int(r.flags.size());
  }
  run.aggregate = zero_if_nan(b.aggregate);
  run.graph_aggregate = any_graph ? zero_if_nan(gb.aggregate) : Interval{};
  run.recorded_aggregate = zero_if_nan(recorded_all);
  run.correctness_passed = run.shapes_failed == 0;
}

}  // namespace scorer
