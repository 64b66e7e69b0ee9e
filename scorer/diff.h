// Compares a run with the selected best (`scorer diff`, and the end of
// `scorer run` when results/best.json exists).
//
// What changed is the submission, so the verdict comes from the submission's
// own times: per shape the ratio of the two runs' candidate times (latest /
// selected), per regime and overall the geometric mean of those ratios (the
// aggregate by the run's scoring rule). Each has a 95% interval from the
// replicates of both runs (intervals.h: per replicate the log median time,
// the difference of the two runs' means with Welch's degrees of freedom).
// The live baselines drift between runs too, the MoE baseline most; their
// ratio is shown beside each verdict and never decides one, so a baseline
// that moved cannot make an unchanged submission better or worse.
//
// A change is `better` (faster) or `worse` when both
// - its 95% interval excludes no change, and
// - its point lies beyond min_change (above 1 + m, or below 1 / (1 + m), so
//   that swapping the runs swaps the verdict),
// else `same`. The default min_change is measured from the two runs: four
// standard errors of a typical shape's change, i.e. 4 x the median over
// shapes of the submission's replicate-to-replicate sd (pooled over both runs)
// x sqrt(1/R_latest + 1/R_selected). Several dozen verdicts are read at once,
// so each must rarely flag noise: in simulated pairs of runs of one build
// (tests/cpu_diff_simulation.cpp) every shape, regime and the aggregate all
// say `same` in at least 95% of pairs, while a true 3% change is still called.
// Runs without two replicates in both (old files) fall back to 1%.
//
// Runs are comparable only when meta.gpu_name, meta.shapes_sha256,
// meta.scorer_version and meta.mode agree; otherwise the diff is refused
// unless forced.
#pragma once

#include <cmath>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "scorer/intervals.h"
#include "scorer/results.h"

namespace scorer {

enum class Verdict { same, better, worse };
const char* verdict_name(Verdict v);  // "same", "better", "worse"

enum class FailOn { nothing, worse, any_change };

constexpr double kFallbackMinChange = 0.01;  // runs without replicates to measure it from
constexpr double kMinChangeStandardErrors = 4;

struct DiffOptions {
  bool force = false;  // compare runs that are not comparable, saying why
  FailOn fail_on = FailOn::nothing;
  double level = 0.95;      // of the change's interval
  double min_change = NAN;  // NaN: measured from the runs' replicates (above)
};

// The verdict on a change of the submission's time (latest / selected, so
// below 1 is faster) with its interval.
Verdict verdict_of(const Interval& time_change, double min_change);

// The default min_change from the shapes' replicates in both runs (summaries
// of the submission's times, shape by shape in the same order); NaN when no
// shape has two replicates in both.
double measured_min_change(const std::vector<ReplicateSummary>& latest, const std::vector<ReplicateSummary>& best);

// How a shape stands in the two runs. A shape is scored when its status is
// "ok" and it has trials.
enum class Presence { both, only_latest, only_best, failed_latest, failed_best, failed_both };

// A change between the runs and what it rests on: the fewer replicates of
// the two (1: the noise inside one run only).
struct Change {
  Interval time;  // the submission's time latest / selected
  int replicates = 0;
  double baseline_change = 1;  // the baselines' time latest / selected: shown, never a verdict
};

// The change of one figure (a shape, a regime, an aggregate) between two
// runs, from each shape's summary of the submission's times in each run
// (same order) and each shape's log ratio of the baselines' median times.
Change figure_change(const std::vector<ReplicateSummary>& latest, const std::vector<ReplicateSummary>& best,
                     const std::vector<double>& log_baseline_change, const LinearFigure& figure, double level);

struct ShapeDiff {
  std::string name, regime;
  Presence presence = Presence::both;
  const ShapeResult* latest = nullptr;  // into the runs given to compute_diff; null when absent
  const ShapeResult* best = nullptr;
  Change change;                    // when scored in both
  Verdict verdict = Verdict::same;  // failed only in latest: worse; only in best: better
};

// A regime or the aggregate with a shape that failed only in the latest run
// is worse, whatever the shapes scored in both say: a regression must not
// hide behind the shapes that still pass.
struct RegimeDiff {
  std::string name;
  int shapes = 0;         // shapes of the regime scored in both runs; no interval when 0
  int failed_latest = 0;  // shapes scored in the best but failed in the latest run
  Change change;          // geometric mean over the shapes scored in both
  Verdict verdict = Verdict::same;
};

struct Diff {
  std::vector<std::string> incomparable;  // why the runs should not be compared; empty when they can
  std::vector<ShapeDiff> shapes;          // the latest run's order, then shapes only in the best
  std::vector<RegimeDiff> regimes;        // order of first appearance
  int shapes_compared = 0;                // scored in both
  int failed_latest = 0;                  // scored in the best, failed in the latest
  Change aggregate_change;                // by the latest run's scoring rule, over those shapes
  Verdict aggregate = Verdict::same;
  double min_change = kFallbackMinChange;  // what the verdicts used
  bool min_change_measured = false;        // from the runs' replicates (not given, not the fallback)

  bool any_worse() const;   // a shape, regime or the aggregate worse, or a shape newly failed
  bool any_change() const;  // any verdict not `same`, or a shape in one run only
};

Diff compute_diff(const RunResult& latest, const RunResult& best, const DiffOptions& opt = {});

// Prints the comparison: per shape, per regime, the aggregate, a WARNING
// line for every regime that got worse and for every shape that failed in the
// latest run. Returns kExitOk, kExitIncorrect when opt.fail_on is met, or
// kExitBadInput when the runs are not comparable and not forced (then only
// the refusal is printed, on `err`, as every refusal is).
int print_diff(std::ostream& out, const RunResult& latest, const RunResult& best, const DiffOptions& opt,
               std::ostream& err = std::cerr);

}  // namespace scorer
