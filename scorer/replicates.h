// Replicates: each shape is scored R times, each time in a child process of
// its own with fresh allocations and a fresh input seed, so that what stays
// fixed inside one process (where the allocator put the buffers, which weights
// were drawn, the clock the card settled at) varies between replicates and
// shows in the interval.
//
// The scoring loop is three pieces: the work list below, a function that
// scores one item in a child (shape_child.h, called from run.cpp), and the
// assembler below that builds each shape's result from its items' results;
// score_work_list ties them together. The list is
// interleaved across shapes, every shape's replicate 1 before any shape's
// replicate 2, so that the machine's slow drift (clocks, temperature) lands
// between replicates rather than inside one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "scorer/results.h"

namespace scorer {

// One (shape, replicate) to score.
struct WorkItem {
  size_t shape = 0;   // index into the run's shapes
  int replicate = 1;  // 1..R
  uint64_t seed = 0;  // replicate_seed(run seed, shape, replicate)
  int gpu = 0;        // device ordinal to run on (the parent's numbering)
};

// The input seed of replicate `replicate` (1..R) of shape `s`: replicate 1
// keeps the shape's own seed (shape_seed), as a single-replicate run had it;
// each later one mixes in its index.
uint64_t replicate_seed(uint64_t run_seed, const Shape& s, int replicate);

// Every shape's replicate 1, in shape order, then every shape's replicate 2,
// and so on up to `replicates`.
std::vector<WorkItem> make_work_list(const std::vector<Shape>& shapes, int replicates, uint64_t run_seed);

// One scored item: what shape_child returns, a ShapeResult that holds the
// shape's facts (variant, bytes, flops, raw limit) and exactly one replicate.
// `items` are one shape's items in replicate order (possibly fewer than R:
// a shape that failed is not scored again, and an interrupted run stops
// early). The assembled result:
// - status and reason of the first replicate that failed (the reason says
//   which replicate when `replicates` > 1), else ok;
// - check: the worst over the replicates, checks summed;
// - bytes, flops, floors, raw limit: the median over the replicates that have them;
// - converged when every replicate converged;
// - flags: a flag raised by every replicate once as it is, any other once per
//   replicate that raised it, as "replicate N: flag" (no prefix when R is 1);
// - replicates: the items' replicates, in order.
// Derived fields are left for compute_statistics.
ShapeResult assemble_shape(const Shape& s, const std::vector<ShapeResult>& items, int replicates);

// Scores one item (in a child process) and returns its one-replicate result;
// `position` is the item's place in the work list, from 0.
using ScoreItem = std::function<ShapeResult(const WorkItem& item, size_t position)>;

// Scores `work` in order with `score`, skipping every later item of a shape
// whose item failed; `stopped` is asked after each item, and a true answer
// drops that item and ends the loop. Returns the assembled result of every
// shape with an item scored, in shape order.
std::vector<ShapeResult> score_work_list(const std::vector<Shape>& shapes, const std::vector<WorkItem>& work,
                                         int replicates, const ScoreItem& score, const std::function<bool()>& stopped);

}  // namespace scorer
