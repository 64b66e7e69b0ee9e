// Statistics of a scoring run. Per shape the speedup is the median of the
// paired ratios baseline/candidate; per regime and overall it is the geometric
// mean over shapes. 95% intervals come from a seeded bootstrap that resamples
// the trials within each shape (independently per shape) and recomputes every
// statistic from the resample, so shape, regime and aggregate intervals are
// consistent with each other.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "results.h"

namespace scorer {

double median(std::vector<double> v);          // of a copy; NaN when empty
double geomean(const std::vector<double>& v);  // NaN when empty or any value <= 0

// The median over replicates of each replicate's median of `trials`
// (replicates without such trials left out); NaN when none has any.
double median_of_medians(const ShapeResult& r, std::vector<double> ReplicateResult::*trials);

// baseline[i] / candidate[i] for paired trials (the two of the same size):
// a shape's speedup is their median.
std::vector<double> paired_ratios(const std::vector<double>& baseline, const std::vector<double>& candidate);

// A uniform index in [0, n), the same on every standard library (unlike
// std::uniform_int_distribution): each bootstrap here draws with it.
size_t draw(std::mt19937_64& rng, size_t n);

struct BootstrapOptions {
  int resamples = 2000;
  uint64_t seed = 1;
  double level = 0.95;
};

// ratios[s] are the paired ratios of shape s; regime_of[s] its regime index in
// [0, n_regimes). Shapes with no ratios are left out of every geometric mean.
struct BootstrapResult {
  std::vector<Interval> shapes;
  std::vector<Interval> regimes;
  Interval aggregate;
};
BootstrapResult bootstrap(const std::vector<std::vector<double>>& ratios,
                          const std::vector<int>& regime_of, int n_regimes,
                          const BootstrapOptions& opt = {});

// Interval of the median of one shape's ratios (used to decide when to stop
// timing a shape).
Interval median_interval(const std::vector<double>& ratios, const BootstrapOptions& opt = {});

// Fills every derived field of `run` (medians, speedups, intervals, regimes,
// aggregate, graph and recorded figures, counts) from its trials and statuses.
void compute_statistics(RunResult& run, const BootstrapOptions& opt = {});

}  // namespace scorer
