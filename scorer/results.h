// A scoring run's results: what `scorer run` writes as JSON (results/latest.json)
// and what diff, select, report and package read back. Every trial's times are
// kept, per replicate, so that later tools can recompute every statistic.
//
// Schema version 2: each shape is scored in R replicates (one child process
// each, fresh allocations and inputs), and the trials live in the replicates.
// A version-1 file (trials on the shape) reads as one replicate per shape.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "shapes.h"

namespace scorer {

constexpr int kResultsSchemaVersion = 2;

// One GPU a run scored on; a replicate names it by its place in RunMeta::gpus.
struct GpuInfo {
  std::string uuid;  // "GPU-...", as CUDA_VISIBLE_DEVICES takes it; "" when CUDA could not say
  std::string name;
  std::string host;                            // the host it is in (runs merged from shards span several)
  int device = 0;                              // its CUDA ordinal on that host, as the scorer was started
  double sm_clock_mhz = 0, mem_clock_mhz = 0;  // at the run's start (NVML's memory clock; 0 unknown)
  double copy_gbps = 0, empty_launch_us = 0, matrix_tflops = 0;  // measured at start-up, on this GPU
};

// One (shape, replicate) of a shard (scorer run --shard I/N), with the facts
// its replicate was scored with, so that a merge assembles the shape as one
// run would have.
struct ShardUnit {
  std::string shape;
  int replicate = 1;
  bool scored = false;  // false: skipped, an earlier replicate of the shape failed in this shard
  double bytes = 0, flops = 0, raw_limit_us = 0;
};

// A share of a run's work; index 0: a whole run (no shard).
struct ShardInfo {
  int index = 0, count = 0;         // shard index of count, 1-based
  std::vector<std::string> shapes;  // every shape of the whole run, in order: the shards must agree
  std::vector<ShardUnit> units;     // the units assigned to this shard, in its scheduling order
};

// Where and how the run was made. Runs are only comparable when gpu_name,
// shapes_sha256, scorer_version and mode agree (diff refuses otherwise).
struct RunMeta {
  int schema_version = kResultsSchemaVersion;
  std::string scorer_version;  // version of the scorer's own code (git describe of scorer/ + reference/)
  std::string git_commit;      // HEAD at run time, "" outside a checkout
  bool git_dirty = false;
  std::string submission_sha256;  // hash of submission/ as compiled into the binary
  std::string command_line;
  std::string started_at;  // ISO 8601 UTC
  std::string shapes_path;
  std::string shapes_sha256;
  uint64_t seed = 0;
  std::string mode;              // "events" or "graph" (what the primary times are)
  int replicates = 1;            // replicates per shape (--replicates; 1 in version-1 files)
  std::string timer = "events";  // "events", or "events+cupti" when CUPTI timed each candidate call too
  bool interrupted = false;      // stopped by SIGINT/SIGTERM: the shapes are those scored before (read as
                                 // false when absent, from files written before the field)
  std::map<std::string, std::string> variants;   // op -> variant, "default" when not forced
  std::map<std::string, std::string> baselines;  // op -> the baseline its speedups are over (reference/baselines.h)
  ScoringRule scoring;                           // the shapes file's [scoring] table: how shapes make the aggregate
  std::vector<GpuInfo> gpus;                     // every GPU scored on (empty in files written before the field)
  ShardInfo shard;  // a shard's share of the work (scorer merge joins them); index 0 otherwise
  // the GPU (with several, the first of `gpus`)
  std::string gpu_name;
  int sm_count = 0;
  int l2_bytes = 0;
  int driver_version = 0;         // cudaDriverGetVersion
  int runtime_version = 0;        // cudaRuntimeGetVersion
  double sm_clock_mhz_start = 0;  // measured by a kernel (clock64 over globaltimer)
  double sm_clock_mhz_end = 0;
  double mem_clock_mhz_start = 0;  // NVML at the run's start and end; 0 unknown
  double mem_clock_mhz_end = 0;
  uint64_t throttle_reasons = 0;  // NVML's clock event reasons at the start, OR the end
  std::string nvml;               // "" when NVML read the clocks, else why it could not
  // measured at start-up
  double copy_gbps = 0;        // device-to-device copy, bytes read + written
  double matrix_tflops = 0;    // bf16 cuBLAS GEMM 8192^3
  double empty_launch_us = 0;  // one empty kernel, timed like a shape
};

struct CheckSummary {  // worst over every check of the shape (before, during, after timing)
  int checks = 0;
  double rel_l2 = 0;
  double max_abs_err = 0;
  double worst_elem = 0;
};

// One replicate: one child process that scored one shape (prepare, checks,
// floor, paired trials) with allocations and inputs of its own.
struct ReplicateResult {
  int index = 0;              // 1..R
  uint64_t seed = 0;          // this replicate's input seed, from (run seed, shape, index)
  int gpu = 0;                // its GPU: index into RunMeta::gpus (the device ordinal in older files)
  std::string status = "ok";  // as ShapeResult::status
  std::string reason;
  CheckSummary check;
  double floor_us = 0, floor_read_us = 0, floor_compute_us = 0;
  // paired trials: baseline_us[i] and candidate_us[i] were timed together
  std::vector<double> baseline_us, candidate_us;
  // the same with launches amortised in a CUDA graph (--graph), else empty
  std::vector<double> graph_baseline_us, graph_candidate_us;
  // the baseline timed before any submission code ran in this process (not
  // even prepare): what the paired baseline is compared with
  std::vector<double> untouched_baseline_us;
  // CUPTI, per candidate trial: the sum of the call's kernel durations and
  // its first start to last end; empty when the run timed with events alone
  std::vector<double> candidate_kernel_us, candidate_span_us;
  bool converged = false;  // interval reached the target width before the cap
  std::vector<std::string> flags;
  double sm_clock_mhz_start = 0, sm_clock_mhz_end = 0;    // clock kernel at start and end
  double mem_clock_mhz_start = 0, mem_clock_mhz_end = 0;  // NVML; 0 unknown
  uint64_t throttle_reasons = 0;                          // NVML's clock event reasons, OR over the replicate
  double seconds = 0;                                     // wall time of the child
};

struct ShapeResult {
  Shape shape;
  // "ok"; or why the shape has no score: "incorrect", "crash", "timeout",
  // "impossible" (faster than its floor allows), "error" (CUDA or contract
  // error), "escaped work" (the submission's work still ran when the device
  // should have been quiet), "foreign work" (work that was not the timed
  // call's ran in a timed window), "changed device state" (a device-wide
  // setting differed after prepare or timing), "baseline disturbed" (the
  // paired baseline ran slower than the untouched one). The first replicate
  // that failed gives the shape its status and reason; later replicates of a
  // failed shape are not run.
  std::string status = "ok";
  std::string reason;   // one line, empty when ok
  std::string variant;  // the submission kernel that ran
  CheckSummary check;   // worst over the replicates
  double bytes = 0;     // minimal bytes moved (each input once, outputs once)
  double flops = 0;
  double floor_us = 0;  // max(streaming read of `bytes`, flops at the matrix rate): median over replicates
  double floor_read_us = 0;
  double floor_compute_us = 0;
  double raw_limit_us = 0;  // bytes / copy bandwidth
  bool converged = false;   // every replicate converged
  // e.g. "speedup above 10x: look at it"; a flag raised by one replicate
  // reads "replicate N: ..."
  std::vector<std::string> flags;
  std::vector<ReplicateResult> replicates;  // in index order
  // derived (recomputed by compute_statistics from the replicates' trials);
  // a median is the median over replicates of each replicate's median
  double baseline_median_us = 0, candidate_median_us = 0;
  double untouched_baseline_median_us = 0;  // 0 when no replicate timed it
  double pct_of_floor = 0;                  // floor_us / candidate_median_us
  double pct_of_raw = 0;                    // raw_limit_us / candidate_median_us
  double speedup = 0, ci_lo = 0, ci_hi = 0;
  double graph_speedup = 0, graph_ci_lo = 0, graph_ci_hi = 0;
  // recorded baseline (--recorded): a time measured elsewhere, not in this run
  double recorded_us = 0;       // 0 when none
  double recorded_speedup = 0;  // recorded_us / candidate_median_us
};

// The trials of one kind over every replicate, in replicate order: pooled,
// they stay paired (each replicate's baseline_us and candidate_us have equal
// sizes).
inline std::vector<double> pooled(const ShapeResult& r, std::vector<double> ReplicateResult::*trials) {
  std::vector<double> out;
  for (const ReplicateResult& p : r.replicates) out.insert(out.end(), (p.*trials).begin(), (p.*trials).end());
  return out;
}

struct Interval {
  double point = 0, lo = 0, hi = 0;
};

struct RegimeResult {
  std::string name;
  int shapes = 0;    // scored shapes in the regime
  int failed = 0;    // shapes of the regime with no score
  Interval speedup;  // geometric mean over scored shapes
  Interval graph_speedup;
  double recorded_speedup = 0;
};

struct RunResult {
  RunMeta meta;
  std::vector<ShapeResult> shapes;
  std::vector<RegimeResult> regimes;  // in order of first appearance
  Interval aggregate;                 // by the scoring rule; zero when !aggregate_defined
  Interval other_aggregate;           // the other rule's value (over regimes for a rule over shapes, and back)
  bool aggregate_defined = true;      // false when a failed shape voids the aggregate (the default rule)
  Interval graph_aggregate;
  double recorded_aggregate = 0;
  std::string recorded_source;  // provenance line of the recorded file, if any
  int shapes_failed = 0;
  int flags = 0;
  bool correctness_passed = true;  // every shape checked correct
};

}  // namespace scorer
