#include "stats.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>

#include "scorer/aggregate_rule.h"
#include "scorer/intervals.h"

namespace scorer {
namespace {

// Geometric means per regime and overall of per-shape values, over the shapes
// with a value (not NaN): the recorded-baseline figures, which have no
// interval.
void geomeans(const std::vector<double>& per_shape, const std::vector<int>& regime_of, std::vector<double>* regimes,
              double* aggregate) {
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
  for (size_t g = 0; g < regimes->size(); ++g) (*regimes)[g] = count[g] ? std::exp(log_sum[g] / count[g]) : NAN;
  *aggregate = all_count ? std::exp(all_sum / all_count) : NAN;
}

Interval zero_if_nan(const Interval& i) { return std::isfinite(i.point) ? i : Interval{}; }

double zero_if_nan(double x) { return std::isfinite(x) ? x : 0.0; }

bool has_values(const std::vector<std::vector<double>>& per_replicate) {
  return std::any_of(per_replicate.begin(), per_replicate.end(), [](const auto& v) { return !v.empty(); });
}

// Every figure of one kind of trials (event or graph): the shapes', the
// regimes', and both aggregates, in that order.
struct Figures {
  std::vector<FigureInterval> shapes, regimes;
  FigureInterval declared, other;
};

Figures figures_of(const std::vector<std::vector<std::vector<double>>>& ratios, const std::vector<int>& regime_of,
                   const std::vector<std::string>& regime_names, const std::vector<ShapeState>& state,
                   const ScoringRule& rule, const BootstrapOptions& opt) {
  const size_t n = ratios.size();
  const RunFigures rf = run_figures(regime_of, regime_names, state, rule);
  std::vector<LinearFigure> all;
  for (size_t s = 0; s < n; ++s) all.push_back(state[s] == ShapeState::scored ? shape_figure(s, n) : LinearFigure{});
  all.insert(all.end(), rf.regimes.begin(), rf.regimes.end());
  all.push_back(rf.declared(rule));
  all.push_back(rf.other(rule));
  for (LinearFigure& f : all) f.coef.resize(n, 0.0);
  const std::vector<FigureInterval> iv = figure_intervals(ratios, all, opt);
  Figures out;
  out.shapes.assign(iv.begin(), iv.begin() + long(n));
  out.regimes.assign(iv.begin() + long(n), iv.end() - 2);
  out.declared = iv[iv.size() - 2];
  out.other = iv.back();
  return out;
}

}  // namespace

double median_inplace(std::vector<double>& v) {
  if (v.empty()) return NAN;
  const size_t h = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + h, v.end());
  if (v.size() % 2) return v[h];
  // nth_element leaves the lower half below v[h]: its largest is the other middle.
  return 0.5 * (*std::max_element(v.begin(), v.begin() + h) + v[h]);
}

double quantile_sorted(const std::vector<double>& sorted, double q) {
  const double pos = q * double(sorted.size() - 1);
  const size_t i = size_t(pos);
  if (i + 1 >= sorted.size()) return sorted.back();
  return sorted[i] + (pos - double(i)) * (sorted[i + 1] - sorted[i]);
}

std::vector<double> paired_ratios(const std::vector<double>& baseline, const std::vector<double>& candidate) {
  std::vector<double> ratios(baseline.size());
  for (size_t i = 0; i < ratios.size(); ++i) ratios[i] = baseline[i] / candidate[i];
  return ratios;
}

// Uniform index in [0, n) from the high half of a 64x64-bit product, rather
// than std::uniform_int_distribution, whose algorithm differs between standard
// libraries: a results file recomputed anywhere gives the same intervals.
size_t draw(std::mt19937_64& rng, size_t n) { return size_t((static_cast<unsigned __int128>(rng()) * n) >> 64); }

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

std::vector<std::vector<double>> replicate_trials(const ShapeResult& r, std::vector<double> ReplicateResult::*trials) {
  std::vector<std::vector<double>> out;
  for (const ReplicateResult& p : r.replicates) out.push_back(p.*trials);
  return out;
}

std::vector<std::vector<double>> replicate_ratios(const ShapeResult& r, bool graph) {
  std::vector<std::vector<double>> out;
  for (const ReplicateResult& p : r.replicates) {
    const std::vector<double>& base = graph ? p.graph_baseline_us : p.baseline_us;
    const std::vector<double>& cand = graph ? p.graph_candidate_us : p.candidate_us;
    if (base.size() != cand.size())
      throw std::invalid_argument("shape " + r.shape.name + " replicate " + std::to_string(p.index) + ": " +
                                  std::to_string(base.size()) + " " + (graph ? "graph" : "event") +
                                  " baseline trials but " + std::to_string(cand.size()) + " candidate trials");
    out.push_back(paired_ratios(base, cand));
  }
  return out;
}

double median_of_medians(const ShapeResult& r, std::vector<double> ReplicateResult::*trials) {
  std::vector<double> m;
  for (const ReplicateResult& p : r.replicates)
    if (!(p.*trials).empty()) m.push_back(median(p.*trials));
  return median_inplace(m);
}

Interval median_interval(const std::vector<double>& ratios, const BootstrapOptions& opt) {
  return figure_intervals({{ratios}}, {shape_figure(0, 1)}, opt)[0].interval;
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

  std::vector<std::vector<std::vector<double>>> ratios(n), graph_ratios(n);
  std::vector<ShapeState> state(n, ShapeState::failed), graph_state(n, ShapeState::failed);
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
    ratios[i] = replicate_ratios(r, false);
    graph_ratios[i] = replicate_ratios(r, true);
    state[i] = has_values(ratios[i]) ? ShapeState::scored : ShapeState::untimed;
    graph_state[i] = has_values(graph_ratios[i]) ? ShapeState::scored : ShapeState::untimed;
    any_graph |= graph_state[i] == ShapeState::scored;
    r.baseline_median_us = zero_if_nan(median_of_medians(r, &ReplicateResult::baseline_us));
    r.candidate_median_us = zero_if_nan(median_of_medians(r, &ReplicateResult::candidate_us));
    r.untouched_baseline_median_us = zero_if_nan(median_of_medians(r, &ReplicateResult::untouched_baseline_us));
    if (r.candidate_median_us > 0) {
      r.pct_of_floor = r.floor_us / r.candidate_median_us;
      r.pct_of_raw = r.raw_limit_us / r.candidate_median_us;
      if (r.recorded_us > 0) recorded[i] = r.recorded_speedup = r.recorded_us / r.candidate_median_us;
    }
  }

  const ScoringRule rule = rule_of(run.meta);
  const Figures f = figures_of(ratios, regime_of, names, state, rule, opt);
  Figures g;
  if (any_graph) g = figures_of(graph_ratios, regime_of, names, graph_state, rule, opt);
  for (size_t i = 0; i < n; ++i) {
    ShapeResult& r = run.shapes[i];
    if (state[i] != ShapeState::scored) continue;
    const Interval s = zero_if_nan(f.shapes[i].interval);
    r.speedup = s.point, r.ci_lo = s.lo, r.ci_hi = s.hi;
    if (any_graph) {
      const Interval gi = zero_if_nan(g.shapes[i].interval);
      r.graph_speedup = gi.point, r.graph_ci_lo = gi.lo, r.graph_ci_hi = gi.hi;
    }
  }

  std::vector<double> recorded_regime(n_regimes);
  double recorded_all;
  geomeans(recorded, regime_of, &recorded_regime, &recorded_all);
  run.regimes.assign(n_regimes, RegimeResult{});
  for (int gi = 0; gi < n_regimes; ++gi) {
    RegimeResult& rr = run.regimes[gi];
    rr.name = names[gi];
    rr.speedup = zero_if_nan(f.regimes[gi].interval);
    if (any_graph) rr.graph_speedup = zero_if_nan(g.regimes[gi].interval);
    rr.recorded_speedup = zero_if_nan(recorded_regime[gi]);
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
  run.aggregate = zero_if_nan(f.declared.interval);
  run.other_aggregate = zero_if_nan(f.other.interval);
  run.aggregate_defined = run.aggregate.point > 0;
  run.graph_aggregate = any_graph ? zero_if_nan(g.declared.interval) : Interval{};
  run.recorded_aggregate = zero_if_nan(recorded_all);
  run.correctness_passed = run.shapes_failed == 0;
}

int interval_replicates(const RunResult& run) {
  int fewest = 0;
  for (const ShapeResult& r : run.shapes) {
    if (r.status != "ok") continue;
    int k = 0;
    for (const ReplicateResult& p : r.replicates) k += !p.candidate_us.empty();
    if (k) fewest = fewest ? std::min(fewest, k) : k;
  }
  return fewest;
}

StopDecision TrialStopper::add(double ratio, double seconds) {
  sorted_.insert(std::upper_bound(sorted_.begin(), sorted_.end(), ratio), ratio);
  const int n = trials();
  const bool last = n >= rule_.max_trials;
  if (!last && (n < rule_.min_trials || n % rule_.check_every != 0)) return StopDecision::go_on;
  if (log_median_interval_sorted(sorted_).half_width() < std::log1p(rule_.target_rel_halfwidth))
    return StopDecision::converged;
  return last || seconds > rule_.time_cap_s ? StopDecision::capped : StopDecision::go_on;
}

void compute_run_statistics(RunResult& run) {
  BootstrapOptions bo;
  bo.seed = run.meta.seed;
  compute_statistics(run, bo);
}

}  // namespace scorer
