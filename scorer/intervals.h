// 95% intervals from replicates: the statistics shared by a run's table
// (speedups) and `scorer diff` (the submission's own times).
//
// A shape is scored in R replicates, each a process of its own with fresh
// inputs. Replicate r gives y_r = log(median of its trials); y_r varies by the
// noise inside the replicate (autocorrelated trials) and by an offset of the
// whole replicate (the machine's state, the allocation, the inputs), which the
// trials of one replicate cannot see. So the interval comes from the spread of
// the y_r themselves: their mean, with Student's t on R - 1 degrees of
// freedom, which covers 95% whatever the two noises' sizes when the y_r are
// about normal (R = 3: t = 4.30). A percentile bootstrap over 3 replicates has
// at most 10 distinct resamples and a spread that is (R - 1)/R too small; it
// covers far less than it claims, so it is not used.
//
// The interval is never narrower than the one the replicates' trials alone
// give (their mean within-replicate variance of the median, with the normal
// quantile: the interval one replicate would print), a random-effects floor:
// Var(y_r) = (between) + (within) >= (within). With R = 3 the sample
// variance has 2 degrees of freedom, and replicates that agree by chance (or
// times so coarse that their medians tie) would otherwise print an interval
// narrower than the trials allow. The floor is on the half-width, not on
// Var(y_r) itself: flooring Var(y_r) at the within variance (truncating the
// between part at zero) binds whenever the sample variance falls short of
// it, which is exactly where the t interval misses, and it covered 97% where
// it should cover 95% in the simulations with 1% offsets, beyond 98% for some
// shapes. Floored on the half-width it binds about five times less often and
// covers 95.0-95.4% on average (tests/cpu_coverage.cpp). The within variance
// comes from the order statistics around the median as if the trials were
// independent; autocorrelated trials make it an underestimate, so the floor
// stays a lower bound.
//
// A regime or an aggregate is a weighted sum of shapes' log values (a
// LinearFigure). It is formed per replicate first (replicate r of every shape
// ran in the same pass over the shapes), then treated like one shape: a drift
// shared by every shape of one pass is in the spread of the per-replicate sums
// and so in the interval, and so is an offset of each shape of its own.
//
// With one replicate (old files, --replicates 1) nothing shows the
// between-replicate noise: the interval falls back to a seeded percentile
// bootstrap of the trials within the replicate, which covers the noise inside
// one run only, and is marked so (replicates == 1).
#pragma once

#include <vector>

#include "scorer/results.h"
#include "scorer/stats.h"

namespace scorer {

// The log median of positive values and the distribution-free 95% interval of
// that median: the order statistics (interpolated) at ranks n/2 -+ 1.96 sqrt(n)/2.
struct LogMedian {
  double log_median = 0, log_lo = 0, log_hi = 0;
  double half_width() const { return 0.5 * (log_hi - log_lo); }
  // Variance of log_median as independent trials would give it.
  double variance() const;
};
LogMedian log_median_interval(std::vector<double> values);  // NaNs when empty
LogMedian log_median_interval_sorted(const std::vector<double>& sorted);

// One shape's replicates reduced: per replicate, its log median and that
// median's within-replicate variance. Replicates without values are skipped.
struct ReplicateSummary {
  std::vector<double> log_value;
  std::vector<double> within_var;
  int replicates() const { return int(log_value.size()); }
};
ReplicateSummary summarize(const std::vector<std::vector<double>>& per_replicate);

// A figure = sum over shapes of coef[s] * (shape s's log value) + constant.
// A shape's own figure has one coefficient 1; a regime's, 1/n on its n
// shapes; a failed shape counted at a fixed speedup f adds log(f)/n to the
// constant. Not `defined`: the figure has no value (e.g. a failed shape voids
// the aggregate).
struct LinearFigure {
  bool defined = false;
  std::vector<double> coef;  // one per shape
  double constant = 0;
};
LinearFigure shape_figure(size_t shape, size_t n_shapes);

// The figure's value in each replicate that every shape it uses has (the
// first min-R), with the within-replicate variance of that value.
struct FigureSeries {
  std::vector<double> log_value, within_var;
};
FigureSeries figure_series(const std::vector<ReplicateSummary>& shapes, const LinearFigure& figure);

// The mean of a series, the variance of that mean and its degrees of freedom:
// from the spread over replicates (floored as above; df = R - 1) when R >= 2,
// else from the within variance alone (df infinite; that covers one run's
// noise only).
struct LogEstimate {
  double mean = 0, var = 0, df = 0;
  int replicates = 0;
};
LogEstimate replicate_estimate(const FigureSeries& series);
// latest - best of two independent estimates (two runs): the variances add,
// and the degrees of freedom are Welch's.
LogEstimate difference(const LogEstimate& latest, const LogEstimate& best);
// The interval exp(mean -+ t * sqrt(var)) at `level` (two-sided).
Interval ratio_interval(const LogEstimate& e, double level);

// One figure's interval in a run, and what it rests on: the number of
// replicates it was formed from (1: the within-run bootstrap; 0: no value).
struct FigureInterval {
  Interval interval;
  int replicates = 0;
};

// Intervals of `figures` over shapes whose values are values[shape][replicate]
// (e.g. each replicate's paired ratios): from the replicates where a figure's
// shapes have at least two in common, otherwise from a percentile bootstrap
// of each shape's first replicate (every resample redraws every shape once, so
// the figures of one resample are consistent with each other).
std::vector<FigureInterval> figure_intervals(const std::vector<std::vector<std::vector<double>>>& values,
                                             const std::vector<LinearFigure>& figures, const BootstrapOptions& opt);

}  // namespace scorer
