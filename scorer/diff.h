// Compares a run with the selected best (`scorer diff`, and the end of
// `scorer run` when results/best.json exists).
//
// Each run's speedups carry their own intervals, but two intervals that
// overlap do not make a change insignificant, nor does disjointness make it
// significant. So the verdict comes from the ratio of the two runs itself: a
// bootstrap that resamples each run's paired ratios (baseline/candidate) within
// each shape, independently per run and per shape, and recomputes
// speedup_latest / speedup_best per shape, and the ratio of geometric means per
// regime and over all shapes scored in both runs. The verdict is `better` when
// the interval of that ratio lies entirely above 1 + min_change, `worse`
// entirely below 1 - min_change, `same` otherwise.
//
// Runs are comparable only when meta.gpu_name, meta.shapes_sha256,
// meta.scorer_version and meta.mode agree; otherwise the diff is refused
// unless forced.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "results.h"
#include "stats.h"

namespace scorer {

enum class Verdict { same, better, worse };
const char* verdict_name(Verdict v);  // "same", "better", "worse"

enum class FailOn { nothing, worse, any_change };

struct DiffOptions {
  bool force = false;              // compare runs that are not comparable, saying why
  FailOn fail_on = FailOn::nothing;
  BootstrapOptions bootstrap;      // resamples, seed and level of the ratio's interval
  // A change counts only when its whole interval lies beyond this fraction:
  // the intervals cover one run's noise, while two runs (above all on two
  // machines) also differ by a drift of about a percent.
  double min_change = 0.01;
};

// Median time latest / best of each side over shapes scored in both runs
// (geometric means for regimes and the aggregate). The live baseline drifts
// too (the MoE baseline's host round trip most): a verdict whose baseline
// moved more than the submission did is the baseline's doing.
struct TimeDrift {
  double baseline_change = 1, candidate_change = 1;
  // A better/worse verdict with |baseline change| > |submission change|,
  // where the submission's change alone (within min_change) would not have
  // reached it.
  bool moved(Verdict v, double min_change) const;
};

// How a shape stands in the two runs. A shape is scored when its status is
// "ok" and it has trials.
enum class Presence { both, only_latest, only_best, failed_latest, failed_best, failed_both };

struct ShapeDiff {
  std::string name, regime;
  Presence presence = Presence::both;
  const ShapeResult* latest = nullptr;  // into the runs given to compute_diff; null when absent
  const ShapeResult* best = nullptr;
  Interval change;                      // speedup_latest / speedup_best, when scored in both
  Verdict verdict = Verdict::same;      // failed only in latest: worse; only in best: better
  TimeDrift drift;                      // when scored in both; 1 and 1 otherwise
};

// A regime or the aggregate with a shape that failed only in the latest run
// is worse, whatever the shapes scored in both say: a regression must not
// hide behind the shapes that still pass.
struct RegimeDiff {
  std::string name;
  int shapes = 0;         // shapes of the regime scored in both runs; no interval when 0
  int failed_latest = 0;  // shapes scored in the best but failed in the latest run
  Interval change;        // ratio of the geometric means over the shapes scored in both
  Verdict verdict = Verdict::same;
  TimeDrift drift;
};

struct Diff {
  std::vector<std::string> incomparable;  // why the runs should not be compared; empty when they can
  std::vector<ShapeDiff> shapes;          // the latest run's order, then shapes only in the best
  std::vector<RegimeDiff> regimes;        // order of first appearance
  int shapes_compared = 0;                // scored in both
  int failed_latest = 0;                  // scored in the best, failed in the latest
  Interval aggregate_change;              // ratio of the geometric means over those shapes
  Verdict aggregate = Verdict::same;
  TimeDrift aggregate_drift;

  bool any_worse() const;   // a shape, regime or the aggregate worse, or a shape newly failed
  bool any_change() const;  // any verdict not `same`, or a shape in one run only
};

Diff compute_diff(const RunResult& latest, const RunResult& best, const BootstrapOptions& opt = {},
                  double min_change = 0.0);

// Prints the comparison: per shape, per regime, the aggregate, a WARNING
// line for every regime that got worse, and a NOTE naming the shapes whose
// verdict came from the baseline's own time moving. Returns kExitOk, kExitIncorrect when
// opt.fail_on is met, or kExitBadInput when the runs are not comparable and
// not forced (then only the reasons are printed).
int print_diff(std::ostream& out, const RunResult& latest, const RunResult& best,
               const DiffOptions& opt);

}  // namespace scorer
