// Judgements of a shape that need all its replicates (pure functions, run by
// `scorer run` after assembling each shape; tested on the CPU). Each replicate
// judges itself in its own process (impossible times, clocks, foreign work);
// these compare figures across the replicates.
#pragma once

#include "scorer/results.h"

namespace scorer {

// The two timers should agree: the events bracket the call, so their median
// should exceed the CUPTI span's median (first kernel start to last kernel
// end) by about one empty launch. Flags the shape when the events' median
// exceeds the span's by more than `empty_launch_us` plus 10% of the span
// (time the events saw that no kernel of the call filled), or falls below it
// by more than `kEventResolutionUs` (work that ran outside the events). Uses
// the trials of the replicates that have CUPTI figures; does nothing without.
constexpr double kEventResolutionUs = 0.5;
void judge_timers(ShapeResult& r, double empty_launch_us);

// The baseline the submission never touched (timed in each replicate's
// process before any submission code ran) against the paired one: when the
// paired baseline's median is slower than the untouched one's by more than
// the replicate-to-replicate spread of the untouched medians (max - min over
// their median), kMinDisturbance and the cost of one empty launch, the shape
// fails as `baseline disturbed`. The launch-sized slack: with the default
// kernels and no foreign work in any window (CUPTI), the router baselines
// (13-15 us) ran 2-11% (up to 1.4 us) slower paired than untouched, in every
// replicate of three runs (docs/perf-log-scorer.md, F4); the guard is for
// disturbances that cost more. A shape already failed, or without untouched
// trials, is left as it is.
constexpr double kMinDisturbance = 0.03;
void judge_baseline(ShapeResult& r, double empty_launch_us);

}  // namespace scorer
