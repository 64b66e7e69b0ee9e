// The human-readable summary of a run, printed by `scorer run` and `scorer
// diff`: one row per shape (correctness, median times, % of the roofline
// floor, speedup with its 95% interval, and a note: flags, "not converged" or
// why the shape failed), then one line per regime, the CUDA-graph and
// recorded-baseline figures when the run has them, and last the aggregate:
//   aggregate 1.0645x  95% [1.0485, 1.0804]  correctness passed, 0 flags
// Reads the derived fields, so compute_statistics must have filled them.
#pragma once

#include <ostream>

#include "results.h"

namespace scorer {

void print_table(std::ostream& os, const RunResult& run);

}  // namespace scorer
