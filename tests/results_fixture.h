// What the results-file tests share: a run in which no field keeps its
// default, a field-by-field comparison, and file helpers.
#pragma once

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "scorer/results_json.h"
#include "scorer/stats.h"

namespace results_test {

using nlohmann::json;
using scorer::InputError;
using scorer::Interval;
using scorer::RunResult;
using scorer::ShapeResult;
namespace fs = std::filesystem;

// A fresh directory under the system's temporary directory, removed on exit.
struct TempDir {
  fs::path path;
  TempDir() {
    path = fs::temp_directory_path() / ("cpu_results." + std::to_string(getpid()) + "." + std::to_string(counter()++));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  static int& counter() {
    static int n = 0;
    return n;
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// 1-based line of the n-th (0-based) occurrence of `needle` in `text`.
inline int line_of(const std::string& text, const std::string& needle, int nth = 0) {
  size_t pos = text.find(needle);
  for (int i = 0; i < nth && pos != std::string::npos; ++i) pos = text.find(needle, pos + 1);
  REQUIRE_MESSAGE(pos != std::string::npos, "no " << needle << " in the text");
  return 1 + int(std::count(text.begin(), text.begin() + long(pos), '\n'));
}

inline std::string load_error(const std::string& path) {
  try {
    scorer::load_results(path);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// Distinct values with every bit of a double's mantissa in use.
struct Values {
  std::mt19937_64 rng{99};
  double next() { return std::uniform_real_distribution<double>(0.001, 1000.0)(rng); }
  std::vector<double> many(int n) {
    std::vector<double> v(n);
    for (double& x : v) x = next();
    return v;
  }
  Interval interval() { return {next(), next(), next()}; }
};

// A run in which no field keeps its default value.
inline RunResult filled_run() {
  Values v;
  RunResult run;
  scorer::RunMeta& m = run.meta;
  m.scorer_version = "scorer-1.4-2-g0abc123";
  m.git_commit = "0123456789abcdef0123456789abcdef01234567";
  m.git_dirty = true;
  m.submission_sha256 = std::string(64, 'a');
  m.command_line = "scorer run --note \"a \\ quoted note\" --seed 7";
  m.started_at = "2025-01-02T03:04:05Z";
  m.shapes_path = "shapes.toml";
  m.shapes_sha256 = std::string(64, 'b');
  m.seed = 18446744073709551557ull;  // above the largest int64
  m.mode = "graph";
  m.replicates = 3;
  m.timer = "events+cupti";
  m.interrupted = true;
  m.variants = {{"dense", "splitk"}, {"moe_w4a16", "default"}};
  m.baselines = {{"dense", "cublaslt"}, {"moe_w4a16", "cublas_grouped_sync"}};
  m.scoring.aggregate = scorer::ScoringRule::Aggregate::regimes;
  m.scoring.regime_weights = {{"small", 2.0}, {"moe", 0.5}};
  m.scoring.failed_speedup = 0.5;
  m.gpu_name = "NVIDIA H200";
  m.sm_count = 132;
  m.l2_bytes = 62914560;
  m.driver_version = 13000;
  m.runtime_version = 12090;
  m.sm_clock_mhz_start = v.next();
  m.sm_clock_mhz_end = v.next();
  m.mem_clock_mhz_start = v.next();
  m.mem_clock_mhz_end = v.next();
  m.throttle_reasons = 0x8000000000000004ull;  // above the largest int64
  m.nvml = "nvmlInit: driver not loaded";
  m.copy_gbps = v.next();
  m.matrix_tflops = v.next();
  m.empty_launch_us = v.next();

  const char* names[3] = {"pooler_x", "dense_y", "moe_z"};
  const scorer::Op ops[3] = {scorer::Op::pooler, scorer::Op::dense, scorer::Op::moe_w4a16};
  for (int i = 0; i < 3; ++i) {
    ShapeResult r;
    r.shape.name = names[i];
    r.shape.op = ops[i];
    r.shape.regime = i == 2 ? "moe" : "small";
    r.shape.line = 10 + 7 * i;
    switch (ops[i]) {
      case scorer::Op::pooler:
        r.shape.B = 3, r.shape.H = 64, r.shape.min_len = 2, r.shape.max_len = 40;
        break;
      case scorer::Op::dense:
        r.shape.M = 5, r.shape.N = 7, r.shape.K = 16;
        break;
      default:
        r.shape.M = 9, r.shape.H = 256, r.shape.I = 384, r.shape.E_global = 16;
        r.shape.E_local = 4, r.shape.k = 3, r.shape.ep_rank = 2;
    }
    r.status = i == 2 ? "incorrect" : "ok";
    r.reason = i == 2 ? "output off at element 17: got 1.5, expected 1.25" : "";
    r.variant = "v" + std::to_string(i);
    r.check = {4 + i, v.next(), v.next(), v.next()};
    r.bytes = v.next(), r.flops = v.next(), r.floor_us = v.next();
    r.floor_read_us = v.next(), r.floor_compute_us = v.next(), r.raw_limit_us = v.next();
    r.converged = i != 1;
    r.flags = {"flag " + std::to_string(i), "µs drift"};
    for (int k = 1; k <= 2 + i % 2; ++k) {
      scorer::ReplicateResult& p = r.replicates.emplace_back();
      p.index = k;
      p.seed = 18446744073709551000ull + uint64_t(k);
      p.gpu = k - 1;
      p.status = i == 2 && k == 2 ? "incorrect" : "ok";
      p.reason = p.status == "ok" ? "" : r.reason;
      p.check = {2 + k, v.next(), v.next(), v.next()};
      p.floor_us = v.next(), p.floor_read_us = v.next(), p.floor_compute_us = v.next();
      p.baseline_us = v.many(5 + i);
      p.candidate_us = v.many(5 + i);
      p.graph_baseline_us = v.many(3);
      p.graph_candidate_us = v.many(3);
      p.untouched_baseline_us = v.many(4);
      p.candidate_kernel_us = v.many(5 + i);
      p.candidate_span_us = v.many(5 + i);
      p.converged = k != 2;
      p.flags = {"replicate flag " + std::to_string(k)};
      p.sm_clock_mhz_start = v.next(), p.sm_clock_mhz_end = v.next();
      p.mem_clock_mhz_start = v.next(), p.mem_clock_mhz_end = v.next();
      p.throttle_reasons = uint64_t(k) << 3;
      p.seconds = v.next();
    }
    r.baseline_median_us = v.next(), r.candidate_median_us = v.next();
    r.untouched_baseline_median_us = v.next();
    r.pct_of_floor = v.next(), r.pct_of_raw = v.next();
    r.speedup = v.next(), r.ci_lo = v.next(), r.ci_hi = v.next();
    r.graph_speedup = v.next(), r.graph_ci_lo = v.next(), r.graph_ci_hi = v.next();
    r.recorded_us = v.next(), r.recorded_speedup = v.next();
    run.shapes.push_back(r);
  }
  for (const char* name : {"small", "moe"}) run.regimes.push_back({name, 2, 1, v.interval(), v.interval(), v.next()});
  run.aggregate = v.interval();
  run.graph_aggregate = v.interval();
  run.recorded_aggregate = v.next();
  run.recorded_source = "recorded.json (vLLM 0.9, 2025-01-01)";
  run.shapes_failed = 1;
  run.flags = 6;
  run.correctness_passed = false;
  // The derived figures as a reader recomputes them from the trials.
  scorer::BootstrapOptions bo;
  bo.seed = run.meta.seed;
  scorer::compute_statistics(run, bo);
  return run;
}

inline void check_same(const Interval& a, const Interval& b) {
  CHECK(a.point == b.point);
  CHECK(a.lo == b.lo);
  CHECK(a.hi == b.hi);
}

inline void check_same(const scorer::Shape& a, const scorer::Shape& b) {
  CHECK(a.name == b.name);
  CHECK(a.op == b.op);
  CHECK(a.regime == b.regime);
  CHECK(a.line == b.line);
  CHECK(a.B == b.B);
  CHECK(a.min_len == b.min_len);
  CHECK(a.max_len == b.max_len);
  CHECK(a.M == b.M);
  CHECK(a.N == b.N);
  CHECK(a.K == b.K);
  CHECK(a.T == b.T);
  CHECK(a.E == b.E);
  CHECK(a.k == b.k);
  CHECK(a.H == b.H);
  CHECK(a.I == b.I);
  CHECK(a.E_global == b.E_global);
  CHECK(a.E_local == b.E_local);
  CHECK(a.ep_rank == b.ep_rank);
}

inline void check_same(const scorer::CheckSummary& a, const scorer::CheckSummary& b) {
  CHECK(a.checks == b.checks);
  CHECK(a.rel_l2 == b.rel_l2);
  CHECK(a.max_abs_err == b.max_abs_err);
  CHECK(a.worst_elem == b.worst_elem);
}

inline void check_same(const scorer::ReplicateResult& a, const scorer::ReplicateResult& b) {
  CHECK(a.index == b.index);
  CHECK(a.seed == b.seed);
  CHECK(a.gpu == b.gpu);
  CHECK(a.status == b.status);
  CHECK(a.reason == b.reason);
  check_same(a.check, b.check);
  CHECK(a.floor_us == b.floor_us);
  CHECK(a.floor_read_us == b.floor_read_us);
  CHECK(a.floor_compute_us == b.floor_compute_us);
  CHECK(a.baseline_us == b.baseline_us);
  CHECK(a.candidate_us == b.candidate_us);
  CHECK(a.graph_baseline_us == b.graph_baseline_us);
  CHECK(a.graph_candidate_us == b.graph_candidate_us);
  CHECK(a.untouched_baseline_us == b.untouched_baseline_us);
  CHECK(a.candidate_kernel_us == b.candidate_kernel_us);
  CHECK(a.candidate_span_us == b.candidate_span_us);
  CHECK(a.converged == b.converged);
  CHECK(a.flags == b.flags);
  CHECK(a.sm_clock_mhz_start == b.sm_clock_mhz_start);
  CHECK(a.sm_clock_mhz_end == b.sm_clock_mhz_end);
  CHECK(a.mem_clock_mhz_start == b.mem_clock_mhz_start);
  CHECK(a.mem_clock_mhz_end == b.mem_clock_mhz_end);
  CHECK(a.throttle_reasons == b.throttle_reasons);
  CHECK(a.seconds == b.seconds);
}

inline void check_same(const ShapeResult& a, const ShapeResult& b) {
  check_same(a.shape, b.shape);
  CHECK(a.status == b.status);
  CHECK(a.reason == b.reason);
  CHECK(a.variant == b.variant);
  check_same(a.check, b.check);
  CHECK(a.bytes == b.bytes);
  CHECK(a.flops == b.flops);
  CHECK(a.floor_us == b.floor_us);
  CHECK(a.floor_read_us == b.floor_read_us);
  CHECK(a.floor_compute_us == b.floor_compute_us);
  CHECK(a.raw_limit_us == b.raw_limit_us);
  CHECK(a.converged == b.converged);
  CHECK(a.flags == b.flags);
  REQUIRE(a.replicates.size() == b.replicates.size());
  for (size_t i = 0; i < a.replicates.size(); ++i) check_same(a.replicates[i], b.replicates[i]);
  CHECK(a.baseline_median_us == b.baseline_median_us);
  CHECK(a.candidate_median_us == b.candidate_median_us);
  CHECK(a.untouched_baseline_median_us == b.untouched_baseline_median_us);
  CHECK(a.pct_of_floor == b.pct_of_floor);
  CHECK(a.pct_of_raw == b.pct_of_raw);
  CHECK(a.speedup == b.speedup);
  CHECK(a.ci_lo == b.ci_lo);
  CHECK(a.ci_hi == b.ci_hi);
  CHECK(a.graph_speedup == b.graph_speedup);
  CHECK(a.graph_ci_lo == b.graph_ci_lo);
  CHECK(a.graph_ci_hi == b.graph_ci_hi);
  CHECK(a.recorded_us == b.recorded_us);
  CHECK(a.recorded_speedup == b.recorded_speedup);
}

inline void check_same(const RunResult& a, const RunResult& b) {
  const scorer::RunMeta &x = a.meta, &y = b.meta;
  CHECK(x.schema_version == y.schema_version);
  CHECK(x.scorer_version == y.scorer_version);
  CHECK(x.git_commit == y.git_commit);
  CHECK(x.git_dirty == y.git_dirty);
  CHECK(x.submission_sha256 == y.submission_sha256);
  CHECK(x.command_line == y.command_line);
  CHECK(x.started_at == y.started_at);
  CHECK(x.shapes_path == y.shapes_path);
  CHECK(x.shapes_sha256 == y.shapes_sha256);
  CHECK(x.seed == y.seed);
  CHECK(x.mode == y.mode);
  CHECK(x.replicates == y.replicates);
  CHECK(x.timer == y.timer);
  CHECK(x.interrupted == y.interrupted);
  CHECK(x.variants == y.variants);
  CHECK(x.baselines == y.baselines);
  CHECK(x.scoring.aggregate == y.scoring.aggregate);
  CHECK(x.scoring.regime_weights == y.scoring.regime_weights);
  CHECK(x.scoring.failed_speedup == y.scoring.failed_speedup);
  CHECK(x.gpu_name == y.gpu_name);
  CHECK(x.sm_count == y.sm_count);
  CHECK(x.l2_bytes == y.l2_bytes);
  CHECK(x.driver_version == y.driver_version);
  CHECK(x.runtime_version == y.runtime_version);
  CHECK(x.sm_clock_mhz_start == y.sm_clock_mhz_start);
  CHECK(x.sm_clock_mhz_end == y.sm_clock_mhz_end);
  CHECK(x.mem_clock_mhz_start == y.mem_clock_mhz_start);
  CHECK(x.mem_clock_mhz_end == y.mem_clock_mhz_end);
  CHECK(x.throttle_reasons == y.throttle_reasons);
  CHECK(x.nvml == y.nvml);
  CHECK(x.copy_gbps == y.copy_gbps);
  CHECK(x.matrix_tflops == y.matrix_tflops);
  CHECK(x.empty_launch_us == y.empty_launch_us);
  REQUIRE(a.shapes.size() == b.shapes.size());
  for (size_t i = 0; i < a.shapes.size(); ++i) check_same(a.shapes[i], b.shapes[i]);
  REQUIRE(a.regimes.size() == b.regimes.size());
  for (size_t i = 0; i < a.regimes.size(); ++i) {
    CHECK(a.regimes[i].name == b.regimes[i].name);
    CHECK(a.regimes[i].shapes == b.regimes[i].shapes);
    CHECK(a.regimes[i].failed == b.regimes[i].failed);
    check_same(a.regimes[i].speedup, b.regimes[i].speedup);
    check_same(a.regimes[i].graph_speedup, b.regimes[i].graph_speedup);
    CHECK(a.regimes[i].recorded_speedup == b.regimes[i].recorded_speedup);
  }
  check_same(a.aggregate, b.aggregate);
  check_same(a.graph_aggregate, b.graph_aggregate);
  CHECK(a.recorded_aggregate == b.recorded_aggregate);
  CHECK(a.recorded_source == b.recorded_source);
  CHECK(a.shapes_failed == b.shapes_failed);
  CHECK(a.flags == b.flags);
  CHECK(a.correctness_passed == b.correctness_passed);
}

}  // namespace results_test
