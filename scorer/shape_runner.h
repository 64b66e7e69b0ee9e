// Scores one replicate of one shape on the GPU: prepare, correctness before
// timing, the graph probe of the run() contract, the floor, paired cold trials
// of baseline and candidate with every timed output checked, and correctness
// again after. Runs inside the replicate's own child process (see run.cpp and
// replicates.h), so a crash or hang takes down only this replicate's shape.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "scorer/cold_timer.h"
#include "scorer/op_case.h"
#include "scorer/results.h"
#include "scorer/stats.h"

namespace scorer {

struct RunOptions {
  bool time = true;          // false: correctness only (`scorer check`)
  bool graph = false;        // also time launches replayed from a CUDA graph
  int sets = 3;              // weight sets rotated through the trials
  uint64_t seed = 20261129;  // the run's seed; each replicate's is derived from it
  int checks = 3;            // fresh-input checks before timing and again after
  int warmup = 5;            // untimed paired calls first
  StoppingRule stop;         // when a replicate has trials enough (stats.h: its defaults and why)
  Candidate candidate;       // the submission variant for this shape's op
  // CUPTI's kernel trace in every replicate: the second timer (each candidate
  // call's kernel sum and span) and the foreign-work guards (call_windows.h)
  bool trace = true;
  FlushMode flush = FlushMode::read;
  // false only in the scorer's own tests, to prove that a timing judge
  // catches a bad kernel alone: the submission's outputs go unchecked
  bool judge_outputs = true;
  // op name -> baseline name (reference/baselines.h); an op not named: its default
  std::map<std::string, std::string> baselines;
};

// Fills the GPU and start-up measurements of `meta` (name, versions, clock,
// copy bandwidth, matrix rate, empty launch). Throws CudaError without a GPU.
void calibrate(RunMeta& meta);
// The SM clock by the clock kernel, and NVML's clocks read while that
// kernel keeps the card busy (so that they are the clocks it times at).
struct ClockReading {
  double sm_mhz = 0;     // clock kernel
  double mem_mhz = 0;    // NVML; 0 unknown
  uint64_t reasons = 0;  // NVML's clock event reasons
  std::string nvml;      // "" when NVML answered, else why not
};
ClockReading read_clocks_now(cudaStream_t stream);
ClockReading read_clocks_now();  // on a stream of its own, for the run's start and end

// Which replicate to score, with what seed, on which device.
struct ReplicateSpec {
  int index = 1;      // 1..R
  uint64_t seed = 0;  // seeds the weights, the activations and the routing
  int gpu = 0;        // CUDA device ordinal
};

// `meta` carries the start-up ceilings the floors are judged against. The
// result holds the shape's facts (variant, bytes, flops, raw limit) and the
// one replicate scored; its status and reason are the replicate's. Progress
// lines start with `label` (e.g. "[3/72] dense_m32_o replicate 1/3").
// Never throws: every failure becomes the result's status and reason.
ShapeResult run_shape(const Shape& shape, const RunOptions& opt, const RunMeta& meta, const ReplicateSpec& spec,
                      const std::string& label);

}  // namespace scorer
