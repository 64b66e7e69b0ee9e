// Scheduling the work list (replicates.h) over one or more GPUs: which item
// goes first, how items run side by side (one lane per GPU, each item in a
// child process of its own), and how the scored items become the run's
// shapes. A run on one GPU is one lane and scores items in list order.
//
// Order: rounds stay interleaved (every shape's replicate r is handed out
// before any shape's replicate r + 1, so that slow drift lands between
// replicates); within a round the longest shapes go first, so that several
// lanes do not wait on one long shape at the end.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "scorer/replicates.h"

namespace scorer {

// Runs fn(0) ... fn(n - 1) each on a thread of its own and waits for all.
// (The scorer forks its GPU children from these threads: the parent holds no
// CUDA context, and its other threads only wait on pipes and children.)
void run_in_parallel(size_t n, const std::function<void(size_t)>& fn);

// A replicate's expected length in seconds, for ordering only: the floor
// model's time of one call (bytes at 3 TB/s or FLOPs at 700 TFLOP/s, plus a
// launch) times the calls of a replicate of the default trials, plus the
// child's fixed start-up. `run_seed` draws a moe shape's routings.
double estimated_seconds(const Shape& s, uint64_t run_seed);

// Reorders `work` (make_work_list's order) longest first within each round,
// by `seconds` per shape; ties keep the shapes' order. Deterministic.
void longest_first(std::vector<WorkItem>& work, const std::vector<double>& seconds);

// Scores one item in a child on lane `lane`; `position` is its place in the work list.
using ScoreOnLane = std::function<ShapeResult(const WorkItem& item, size_t position, size_t lane)>;

// Scores `work` on `lanes` lanes at once: each lane takes the next item of
// the list as it frees up, skipping items of a shape that has failed (a
// shape is not scored again). `stopped` is asked after each item; a true
// answer drops that item and every lane stops taking more. Returns each
// shape's scored items (one replicate each), trimmed (trim_after_failure).
std::vector<std::vector<ShapeResult>> score_on_lanes(size_t shapes, const std::vector<WorkItem>& work, size_t lanes,
                                                     const ScoreOnLane& score, const std::function<bool()>& stopped);

// Sorts one shape's items by replicate and drops those after the first that
// failed, as a run that scored them one by one would not have scored them
// (lanes, or shards, may have scored them before the failure was known).
void trim_after_failure(std::vector<ShapeResult>& items);

// The run's shapes from each shape's items (assemble_shape), in shape order,
// then the judgements across replicates (shape_judges.h) when `timed`: the
// timers' agreement by the largest empty-launch cost of the GPUs the shape
// ran on (meta.gpus, else meta.empty_launch_us), and the disturbed baseline.
// Sets run.shapes; the statistics are left to compute_statistics.
void assemble_run(RunResult& run, const std::vector<Shape>& shapes, const std::vector<std::vector<ShapeResult>>& items,
                  int replicates, bool timed);

}  // namespace scorer
