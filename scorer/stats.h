// Statistics of a scoring run. Per shape the speedup is the geometric mean
// over replicates of each replicate's median paired ratio baseline/candidate;
// per regime the geometric mean over its shapes; the aggregate by the run's
// scoring rule (aggregate_rule.h), with the other rule's value beside it.
// Every 95% interval comes from the replicates (intervals.h), each regime's
// and the aggregate's formed replicate by replicate, so that a drift of one
// whole pass over the shapes is covered too; a run of one replicate falls
// back to a bootstrap of the trials, which covers that run's own noise only.
// Also here: the small helpers every statistic uses, and the rule that stops
// a replicate's trials.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "results.h"

namespace scorer {

double median(std::vector<double> v);           // of a copy; NaN when empty
double median_inplace(std::vector<double>& v);  // reorders v; NaN when empty
double geomean(const std::vector<double>& v);   // NaN when empty or any value <= 0
// Quantile q in [0, 1] of sorted values, interpolated between order statistics.
double quantile_sorted(const std::vector<double>& sorted, double q);

// baseline[i] / candidate[i] for paired trials (the two of the same size):
// a replicate's speedup is their median.
std::vector<double> paired_ratios(const std::vector<double>& baseline, const std::vector<double>& candidate);

// A uniform index in [0, n), the same on every standard library (unlike
// std::uniform_int_distribution): each bootstrap here draws with it.
size_t draw(std::mt19937_64& rng, size_t n);

// Seed and size of the bootstraps (runs of one replicate), and the level of
// every interval.
struct BootstrapOptions {
  int resamples = 2000;
  uint64_t seed = 1;
  double level = 0.95;
};

// A shape's trials of one kind (e.g. &ReplicateResult::candidate_us), per
// replicate in index order.
std::vector<std::vector<double>> replicate_trials(const ShapeResult& r, std::vector<double> ReplicateResult::*trials);
// Per replicate, the paired ratios baseline/candidate (of the graph trials
// when `graph`). Throws std::invalid_argument when a replicate's two sides
// differ in size.
std::vector<std::vector<double>> replicate_ratios(const ShapeResult& r, bool graph);
// The median over replicates of each replicate's median of `trials`
// (replicates without such trials left out); NaN when none has any.
double median_of_medians(const ShapeResult& r, std::vector<double> ReplicateResult::*trials);

// Percentile-bootstrap interval of the median of one replicate's ratios.
Interval median_interval(const std::vector<double>& ratios, const BootstrapOptions& opt = {});

// Fills every derived field of `run` (medians, speedups, intervals, regimes,
// aggregate, graph and recorded figures, counts) from its trials and statuses.
void compute_statistics(RunResult& run, const BootstrapOptions& opt = {});

// compute_statistics as every command runs it: default options, the bootstrap
// seeded by the run's own seed, so that a file read back (or merged) gives the
// numbers its run printed.
void compute_run_statistics(RunResult& run);

// The fewest replicates any scored shape's interval rests on (0: no shape
// scored). 1 means the run's intervals cover the noise within one run only.
int interval_replicates(const RunResult& run);

// When one replicate of a shape has been timed enough. The runner asks after
// every paired trial, and the coverage simulations ask the same code.
//
// The defaults are for replicates: the interval a user reads comes from the
// spread between replicates, so a replicate's own median needs only to be
// well inside the between-replicate offsets (about 1% sd on an H200), not
// tight by itself. A 1% half-width (median sd about 0.5%) adds at most a
// quarter of a 1% offset's variance; 30 trials are enough for the median's
// order-statistic interval to mean something; and 2 s caps a noisy shape's
// replicate (3 replicates: 6 s, against 5 s for the single replicate
// before). A full default run is then about 26 shapes x 3 replicates at
// today's ~0.8 s per shape and replicate (24 shapes took 18.7 s on an H100
// with 50 trials), about a minute, under the two minutes asked of it; the
// simulations in tests/cpu_coverage.cpp time with exactly these values.
struct StoppingRule {
  int min_trials = 30;
  int check_every = 10;  // look at the interval every this many trials (and at max_trials)
  int max_trials = 2000;
  double target_rel_halfwidth = 0.01;  // converged: the median's 95% half-width under this fraction
  double time_cap_s = 2.0;             // seconds spent timing this replicate
};
enum class StopDecision { go_on, converged, capped };
// The rule applied to one replicate's trials as they come: add() each paired
// trial's ratio baseline/candidate with the seconds spent timing so far. The
// half-width is that of the median's distribution-free interval (the order
// statistics of log_median_interval; no resampling, so it is cheap and the
// same on every machine). The ratios are kept sorted, one insertion a trial.
class TrialStopper {
 public:
  explicit TrialStopper(const StoppingRule& rule = {}) : rule_(rule) {}
  StopDecision add(double ratio, double seconds);
  int trials() const { return int(sorted_.size()); }

 private:
  StoppingRule rule_;
  std::vector<double> sorted_;
};

}  // namespace scorer
