// A scoring run's results: what `scorer run` writes as JSON (results/latest.json)
// and what diff, select, report and package read back. Every trial's times are
// kept so that later tools can recompute every statistic.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "shapes.h"

namespace scorer {

constexpr int kResultsSchemaVersion = 1;

// Where and how the run was made. Runs are only comparable when gpu_name,
// shapes_sha256, scorer_version and mode agree (diff refuses otherwise).
struct RunMeta {
  int schema_version = kResultsSchemaVersion;
  std::string scorer_version;    // version of the scorer's own code (git describe of scorer/ + reference/)
  std::string git_commit;        // HEAD at run time, "" outside a checkout
  bool git_dirty = false;
  std::string submission_sha256; // hash of submission/ as compiled into the binary
  std::string command_line;
  std::string started_at;        // ISO 8601 UTC
  std::string shapes_path;
  std::string shapes_sha256;
  uint64_t seed = 0;
  std::string mode;              // "events" or "graph" (what the primary times are)
  bool interrupted = false;      // stopped by SIGINT/SIGTERM: the shapes are those scored before (read as
                                 // false when absent, from files written before the field)
  std::map<std::string, std::string> variants;  // op -> variant, "default" when not forced
  // the GPU
  std::string gpu_name;
  int sm_count = 0;
  int l2_bytes = 0;
  int driver_version = 0;        // cudaDriverGetVersion
  int runtime_version = 0;       // cudaRuntimeGetVersion
  double sm_clock_mhz_start = 0; // measured by a kernel (clock64 over globaltimer)
  double sm_clock_mhz_end = 0;
  // measured at start-up
  double copy_gbps = 0;          // device-to-device copy, bytes read + written
  double matrix_tflops = 0;      // bf16 cuBLAS GEMM 8192^3
  double empty_launch_us = 0;    // one empty kernel, timed like a shape
};

struct CheckSummary {  // worst over every check of the shape (before, during, after timing)
  int checks = 0;
  double rel_l2 = 0;
  double max_abs_err = 0;
  double worst_elem = 0;
};

struct ShapeResult {
  Shape shape;
  // "ok"; or why the shape has no score: "incorrect", "crash", "timeout",
  // "impossible" (faster than the raw limit), "error" (CUDA or contract error)
  std::string status = "ok";
  std::string reason;            // one line, empty when ok
  std::string variant;           // the submission kernel that ran
  CheckSummary check;
  double bytes = 0;              // minimal bytes moved (each input once, outputs once)
  double flops = 0;
  double floor_us = 0;           // max(streaming read of `bytes`, flops at the matrix rate)
  double floor_read_us = 0;
  double floor_compute_us = 0;
  double raw_limit_us = 0;       // bytes / copy bandwidth
  // paired trials: baseline_us[i] and candidate_us[i] were timed together
  std::vector<double> baseline_us;
  std::vector<double> candidate_us;
  bool converged = false;        // interval reached the target width before the cap
  std::vector<std::string> flags;  // e.g. "speedup above 10x"
  // the same with launches amortised in a CUDA graph (--graph), else empty
  std::vector<double> graph_baseline_us;
  std::vector<double> graph_candidate_us;
  // derived (recomputed by compute_statistics from the trials)
  double baseline_median_us = 0, candidate_median_us = 0;
  double pct_of_floor = 0;       // floor_us / candidate_median_us
  double pct_of_raw = 0;         // raw_limit_us / candidate_median_us
  double speedup = 0, ci_lo = 0, ci_hi = 0;
  double graph_speedup = 0, graph_ci_lo = 0, graph_ci_hi = 0;
  // recorded baseline (--recorded): a time measured elsewhere, not in this run
  double recorded_us = 0;        // 0 when none
  double recorded_speedup = 0;   // recorded_us / candidate_median_us
};

struct Interval {
  double point = 0, lo = 0, hi = 0;
};

struct RegimeResult {
  std::string name;
  int shapes = 0;        // scored shapes in the regime
  int failed = 0;        // shapes of the regime with no score
  Interval speedup;      // geometric mean over scored shapes
  Interval graph_speedup;
  double recorded_speedup = 0;
};

struct RunResult {
  RunMeta meta;
  std::vector<ShapeResult> shapes;
  std::vector<RegimeResult> regimes;  // in order of first appearance
  Interval aggregate;                 // geometric mean over every scored shape
  Interval graph_aggregate;
  double recorded_aggregate = 0;
  std::string recorded_source;        // provenance line of the recorded file, if any
  int shapes_failed = 0;
  int flags = 0;
  bool correctness_passed = true;     // every shape checked correct
};

}  // namespace scorer
