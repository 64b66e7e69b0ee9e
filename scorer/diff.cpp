#include "scorer/diff.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "scorer/aggregate_rule.h"
#include "scorer/command_line.h"
#include "scorer/commands.h"
#include "scorer/exit_codes.h"
#include "scorer/results_json.h"
#include "scorer/stats.h"

namespace scorer {
namespace {

bool scored(const ShapeResult* s) {
  return s && s->status == "ok" && !pooled(*s, &ReplicateResult::candidate_us).empty();
}

}  // namespace

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::better:
      return "better";
    case Verdict::worse:
      return "worse";
    default:
      return "same";
  }
}

// Symmetric in the two runs: swapped, a change of x becomes 1/x, so the
// bound below 1 is 1/(1 + min_change), not 1 - min_change.
Verdict verdict_of(const Interval& time_change, double min_change) {
  if (time_change.hi < 1 && time_change.point < 1 / (1 + min_change)) return Verdict::better;
  if (time_change.lo > 1 && time_change.point > 1 + min_change) return Verdict::worse;
  return Verdict::same;
}

Change figure_change(const std::vector<ReplicateSummary>& latest, const std::vector<ReplicateSummary>& best,
                     const std::vector<double>& log_baseline_change, const LinearFigure& f, double level) {
  const LogEstimate a = replicate_estimate(figure_series(latest, f));
  const LogEstimate b = replicate_estimate(figure_series(best, f));
  Change c;
  c.time = ratio_interval(difference(a, b), level);
  c.replicates = std::min(a.replicates, b.replicates);
  double log_base = 0;
  for (size_t s = 0; s < f.coef.size(); ++s) log_base += f.coef[s] * log_baseline_change[s];
  c.baseline_change = std::exp(log_base);
  return c;
}

double measured_min_change(const std::vector<ReplicateSummary>& latest, const std::vector<ReplicateSummary>& best) {
  std::vector<double> standard_errors;
  for (size_t s = 0; s < latest.size() && s < best.size(); ++s) {
    const LogEstimate a = replicate_estimate({latest[s].log_value, latest[s].within_var});
    const LogEstimate b = replicate_estimate({best[s].log_value, best[s].within_var});
    if (a.replicates < 2 || b.replicates < 2) continue;
    // Each run's variance of one replicate, pooled over both runs.
    const double pooled = (a.df * a.var * a.replicates + b.df * b.var * b.replicates) / (a.df + b.df);
    standard_errors.push_back(std::sqrt(pooled * (1.0 / a.replicates + 1.0 / b.replicates)));
  }
  if (standard_errors.empty()) return NAN;
  return std::expm1(kMinChangeStandardErrors * median(standard_errors));
}

bool Diff::any_worse() const {
  if (aggregate == Verdict::worse) return true;
  for (const RegimeDiff& r : regimes)
    if (r.verdict == Verdict::worse) return true;
  for (const ShapeDiff& s : shapes)
    if (s.verdict == Verdict::worse) return true;
  return false;
}

bool Diff::any_change() const {
  if (aggregate != Verdict::same) return true;
  for (const RegimeDiff& r : regimes)
    if (r.verdict != Verdict::same) return true;
  for (const ShapeDiff& s : shapes)
    if (s.verdict != Verdict::same || s.presence == Presence::only_latest || s.presence == Presence::only_best)
      return true;
  return false;
}

Diff compute_diff(const RunResult& latest, const RunResult& best, const DiffOptions& opt) {
  Diff d;
  auto differs = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b) d.incomparable.push_back(std::string(what) + " (latest: '" + a + "', selected: '" + b + "')");
  };
  differs("different GPUs", latest.meta.gpu_name, best.meta.gpu_name);
  differs("different shapes files", latest.meta.shapes_sha256, best.meta.shapes_sha256);
  differs("different scorer versions", latest.meta.scorer_version, best.meta.scorer_version);
  differs("different timing modes", latest.meta.mode, best.meta.mode);

  std::map<std::string, const ShapeResult*> in_best;
  for (const ShapeResult& s : best.shapes) in_best[s.shape.name] = &s;
  std::set<std::string> in_latest;
  for (const ShapeResult& s : latest.shapes) {
    in_latest.insert(s.shape.name);
    auto it = in_best.find(s.shape.name);
    d.shapes.push_back({s.shape.name,
                        s.shape.regime,
                        Presence::both,
                        &s,
                        it == in_best.end() ? nullptr : it->second,
                        {},
                        Verdict::same});
  }
  for (const ShapeResult& s : best.shapes)
    if (!in_latest.count(s.shape.name))
      d.shapes.push_back({s.shape.name, s.shape.regime, Presence::only_best, nullptr, &s, {}, Verdict::same});

  // Shapes scored in both runs, each with its regime's index.
  std::vector<ShapeDiff*> both;
  std::vector<int> regime_of;
  std::vector<std::string> regime_names;
  std::map<std::string, int> regime_index;
  for (ShapeDiff& s : d.shapes) {
    if (!regime_index.count(s.regime)) {
      regime_index[s.regime] = static_cast<int>(d.regimes.size());
      regime_names.push_back(s.regime);
      d.regimes.push_back({s.regime, 0, 0, {}, Verdict::same});
    }
    const bool l = scored(s.latest), b = scored(s.best);
    if (!s.latest) continue;
    if (!s.best)
      s.presence = Presence::only_latest;
    else if (l && b)
      s.presence = Presence::both;
    else if (!l && !b)
      s.presence = Presence::failed_both;
    else
      s.presence = l ? Presence::failed_best : Presence::failed_latest;
    if (s.presence == Presence::failed_latest) {
      s.verdict = Verdict::worse;
      d.regimes[regime_index[s.regime]].failed_latest++;
      d.failed_latest++;
    }
    if (s.presence == Presence::failed_best) s.verdict = Verdict::better;
    if (s.presence == Presence::both) {
      both.push_back(&s);
      regime_of.push_back(regime_index[s.regime]);
      d.regimes[regime_of.back()].shapes++;
    }
  }
  d.shapes_compared = static_cast<int>(both.size());
  for (RegimeDiff& rd : d.regimes)
    if (rd.failed_latest) rd.verdict = Verdict::worse;
  if (d.failed_latest) d.aggregate = Verdict::worse;

  const size_t n = both.size();
  std::vector<ReplicateSummary> new_times(n), old_times(n);
  std::vector<double> log_baseline_change(n);
  for (size_t i = 0; i < n; ++i) {
    new_times[i] = summarize(replicate_trials(*both[i]->latest, &ReplicateResult::candidate_us));
    old_times[i] = summarize(replicate_trials(*both[i]->best, &ReplicateResult::candidate_us));
    log_baseline_change[i] = std::log(median_of_medians(*both[i]->latest, &ReplicateResult::baseline_us) /
                                      median_of_medians(*both[i]->best, &ReplicateResult::baseline_us));
  }
  const double measured = measured_min_change(new_times, old_times);
  d.min_change_measured = std::isnan(opt.min_change) && !std::isnan(measured);
  d.min_change = !std::isnan(opt.min_change) ? opt.min_change : d.min_change_measured ? measured : kFallbackMinChange;
  if (both.empty()) return d;

  for (size_t i = 0; i < n; ++i) {
    ShapeDiff& s = *both[i];
    s.change = figure_change(new_times, old_times, log_baseline_change, shape_figure(i, n), opt.level);
    s.verdict = verdict_of(s.change.time, d.min_change);
  }
  // Regimes and the aggregate over the shapes scored in both, by the latest
  // run's scoring rule.
  const ScoringRule rule = rule_of(latest.meta);
  const RunFigures rf = run_figures(regime_of, regime_names, std::vector<ShapeState>(n, ShapeState::scored), rule);
  for (size_t g = 0; g < d.regimes.size(); ++g) {
    RegimeDiff& rd = d.regimes[g];
    if (!rd.shapes) continue;
    rd.change = figure_change(new_times, old_times, log_baseline_change, rf.regimes[g], opt.level);
    if (!rd.failed_latest) rd.verdict = verdict_of(rd.change.time, d.min_change);
  }
  d.aggregate_change = figure_change(new_times, old_times, log_baseline_change, rf.declared(rule), opt.level);
  if (!d.failed_latest) d.aggregate = verdict_of(d.aggregate_change.time, d.min_change);
  return d;
}

int diff_main(const std::vector<std::string>& args) {
  DiffArgs a;
  if (const int rc = parse_diff_args(args, &a); rc != kGoOn) return rc;
  const std::vector<std::string>& files = a.files;
  const std::string& dir = a.results_dir;
  const DiffOptions& opt = a.diff;
  std::string latest_path = files.size() > 0 ? files[0] : dir + "/latest.json";
  std::string best_path = files.size() > 1 ? files[1] : dir + "/best.json";
  if (files.size() < 2 && !std::filesystem::exists(best_path)) {
    std::cerr << "scorer diff: no selected best (" << best_path
              << " does not exist; promote a run with `scorer select`)\n";
    return kExitBadInput;
  }
  try {
    RunResult latest = load_results(latest_path);
    RunResult best = load_results(best_path);
    std::cout << "diff of " << latest_path << " (latest) against " << best_path << " (selected)\n";
    return print_diff(std::cout, latest, best, opt);
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  }
}

}  // namespace scorer
