// Scores one shape on the GPU: prepare, correctness before timing, the graph
// probe of the run() contract, the floor, paired cold trials of baseline and
// candidate with every timed output checked, and correctness again after.
// Runs inside the shape's own child process (see run.cpp), so a crash or hang
// takes down only this shape.
#pragma once

#include <cstdint>
#include <string>

#include "scorer/op_case.h"
#include "scorer/results.h"

namespace scorer {

struct RunOptions {
  bool time = true;                    // false: correctness only (`scorer check`)
  bool graph = false;                  // also time launches replayed from a CUDA graph
  int sets = 3;                        // weight sets rotated through the trials
  uint64_t seed = 20261129;
  int checks = 3;                      // fresh-input checks before timing and again after
  int warmup = 5;                      // untimed paired calls first
  int min_trials = 50;
  int max_trials = 2000;
  double target_rel_halfwidth = 0.01;  // stop when the interval's half-width is under 1% of the speedup
  double time_cap_s = 5.0;             // ... or after this long timing the shape
  Candidate candidate;                 // the submission variant for this shape's op
};

// Fills the GPU and start-up measurements of `meta` (name, versions, clock,
// copy bandwidth, matrix rate, empty launch). Throws CudaError without a GPU.
void calibrate(RunMeta& meta);
// SM clock now, for the end of the run.
double sm_clock_now_mhz();

// `meta` carries the start-up ceilings the floors are judged against.
// Never throws: every failure becomes the result's status and reason.
ShapeResult run_shape(const Shape& shape, const RunOptions& opt, const RunMeta& meta,
                      const std::string& progress_prefix);

}  // namespace scorer
