#include "scorer/shape_runner.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>

#include "scorer/cold_timer.h"
#include "scorer/cuda_check.h"
#include "scorer/floors.h"
#include "scorer/op_case.h"
#include "scorer/random_fill.h"
#include "scorer/stats.h"

namespace scorer {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A shape's failure: status and reason, thrown to the top of run_shape.
struct ShapeFailure {
  std::string status, reason;
};

void sync_or_fail(cudaStream_t s, const std::string& phase) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaStreamSynchronize(s);
  if (e != cudaSuccess)
    throw ShapeFailure{"crash", phase + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")"};
}

void merge_check(CheckSummary& sum, const CheckResult& r) {
  ++sum.checks;
  sum.rel_l2 = std::max(sum.rel_l2, r.rel_l2);
  sum.max_abs_err = std::max(sum.max_abs_err, r.max_abs_err);
  sum.worst_elem = std::max(sum.worst_elem, r.worst_elem);
}

class Runner {
 public:
  Runner(const Shape& s, const RunOptions& o, const RunMeta& m, const ReplicateSpec& spec, const std::string& label)
      : s_(s), opt_(o), meta_(m), spec_(spec), label_(label), seed_(spec.seed) {}

  ShapeResult run() {
    ShapeResult r;
    r.shape = s_;
    r.variant = opt_.candidate.variant;
    ReplicateResult rep;
    rep.index = spec_.index;
    rep.seed = spec_.seed;
    rep.gpu = spec_.gpu;
    try {
      SCORER_CUDA(cudaSetDevice(spec_.gpu));
      SCORER_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      body(r, rep);
    } catch (const ShapeFailure& f) {
      rep.status = f.status;
      rep.reason = f.reason;
    } catch (const CudaError& e) {
      rep.status = "crash";
      rep.reason = phase_ + ": " + e.what();
    } catch (const std::exception& e) {
      rep.status = "error";
      rep.reason = phase_ + ": " + e.what();
    }
    rep.seconds = seconds_since(start_);
    r.status = rep.status;
    r.reason = rep.reason;
    r.check = rep.check;
    r.converged = rep.converged;
    r.flags = rep.flags;
    r.floor_us = rep.floor_us, r.floor_read_us = rep.floor_read_us, r.floor_compute_us = rep.floor_compute_us;
    r.replicates.push_back(std::move(rep));
    return r;
  }

 private:
  // Each line says how long the shape has run, so slow phases show.
  void progress(const std::string& what) {
    std::fprintf(stderr, "%s: %s (+%.1f s)\n", label_.c_str(), what.c_str(), seconds_since(start_));
  }

  // New activations for `set`; the candidate runs once on them, checked.
  void checked_run(ReplicateResult& r, int set, uint64_t seed, const std::string& when) {
    op_->new_inputs(set, seed);
    op_->poison_outputs();
    op_->run_candidate(set);
    sync_or_fail(stream_, when);
    const CheckResult c = op_->check(set);
    merge_check(r.check, c);
    if (!c.ok) throw ShapeFailure{"incorrect", when + ": " + c.reason};
  }

  void correctness(ReplicateResult& r, const char* when, uint64_t tag) {
    phase_ = when;
    for (int c = 0; c < opt_.checks; ++c)
      checked_run(r, c % op_->sets(), derive_seed(seed_, tag + c), std::string(when) + " (inputs " + std::to_string(c + 1) + ")");
  }

  // run() must do all its work on the scorer's stream, allocate nothing and not
  // synchronise: captured into a graph and replayed on new inputs, it must still
  // give the right answer.
  cudaGraphExec_t capture(const std::function<void()>& call, const std::string& who) {
    cudaGraph_t graph = nullptr;
    SCORER_CUDA(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    std::string thrown;
    try {
      call();
    } catch (const std::exception& e) {
      thrown = e.what();
    }
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    const cudaError_t last = cudaGetLastError();
    if (!thrown.empty() || end != cudaSuccess || last != cudaSuccess) {
      if (graph) cudaGraphDestroy(graph);
      const cudaError_t e = end != cudaSuccess ? end : last;
      throw ShapeFailure{"error", who + " run() cannot be captured in a CUDA graph (it must not allocate, "
                                        "synchronise or use another stream): " +
                                      (thrown.empty() ? std::string(cudaGetErrorName(e)) : thrown)};
    }
    cudaGraphExec_t exec = nullptr;
    SCORER_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    cudaGraphDestroy(graph);
    return exec;
  }

  void graph_probe(ReplicateResult& r) {
    phase_ = "graph probe";
    for (int set = 0; set < op_->sets(); ++set) {
      // Capture on inputs of this set: their shape arguments (pooler S_total)
      // are the set's, and are what every later draw for the set keeps.
      op_->new_inputs(set, derive_seed(seed_, 400 + set));
      cudaGraphExec_t exec = capture([&] { op_->run_candidate(set); }, "the submission's");
      graphs_.push_back(exec);
      op_->new_inputs(set, derive_seed(seed_, 500 + set));
      op_->poison_outputs();
      SCORER_CUDA(cudaGraphLaunch(exec, stream_));
      sync_or_fail(stream_, "graph probe");
      const CheckResult c = op_->check(set);
      merge_check(r.check, c);
      if (!c.ok)
        throw ShapeFailure{"incorrect", "run() replayed from a CUDA graph gave a wrong result (work outside the "
                                        "scorer's stream, or a result kept from an earlier call): " + c.reason};
    }
  }

  void floor(const ShapeResult& r, ReplicateResult& rep) {
    phase_ = "floor";
    DeviceBuffer buf(size_t(r.bytes) + 16);
    fill_random_bytes(buf.as<uint8_t>(), buf.bytes(), 9, stream_);
    rep.floor_read_us = measure_read_floor_us(size_t(r.bytes), buf, *timer_);
    rep.floor_compute_us = meta_.matrix_tflops > 0 ? r.flops / (meta_.matrix_tflops * 1e6) : 0;
    rep.floor_us = std::max(rep.floor_read_us, rep.floor_compute_us);
  }

  // One paired trial: baseline and candidate on the same fresh inputs, in
  // alternating order; both outputs are checked, the baseline's with its own
  // tolerance (a baseline that went wrong, or whose graph replays a stale
  // result, would skew the speedup unseen).
  // `tag` seeds the draw: every trial, warm-up ones included, gets inputs of its own.
  void trial(ReplicateResult& r, int t, uint64_t tag, bool graph, std::vector<double>& base_us,
             std::vector<double>& cand_us) {
    const int set = t % op_->sets();
    op_->new_inputs(set, derive_seed(seed_, tag));
    const bool hold_base = !op_->baseline_synchronizes();
    auto time_base = [&] {
      op_->poison_outputs();
      const bool use_graph = graph && hold_base;
      base_us.push_back(timer_->time_us([&] {
        if (use_graph) SCORER_CUDA(cudaGraphLaunch(base_graphs_[set], stream_));
        else op_->run_baseline(set);
      }, hold_base));
      sync_or_fail(stream_, "timed baseline call " + std::to_string(t + 1));
      if (const CheckResult c = op_->check_baseline(set); !c.ok)
        throw ShapeFailure{"error", "timed baseline call " + std::to_string(t + 1) +
                                        ": the baseline itself is wrong (a scorer bug): " + c.reason};
    };
    auto time_cand = [&] {
      op_->poison_outputs();
      cand_us.push_back(timer_->time_us([&] {
        if (graph) SCORER_CUDA(cudaGraphLaunch(graphs_[set], stream_));
        else op_->run_candidate(set);
      }));
      sync_or_fail(stream_, "timed call " + std::to_string(t + 1));
      const CheckResult c = op_->check(set);
      merge_check(r.check, c);
      if (!c.ok) throw ShapeFailure{"incorrect", "timed call " + std::to_string(t + 1) + ": " + c.reason};
    };
    if (t % 2) {
      time_cand();
      time_base();
    } else {
      time_base();
      time_cand();
    }
  }

  // Trials until the speedup's interval is tight or the cap is reached; the
  // interval is looked at every 10 trials and after the last.
  bool timing_loop(ReplicateResult& r, bool graph, std::vector<double>& base_us, std::vector<double>& cand_us) {
    phase_ = graph ? "timing (graph)" : "timing";
    const uint64_t base_tag = graph ? 3000000 : 1000000;
    std::vector<double> wb, wc;
    for (int w = 0; w < opt_.warmup; ++w) trial(r, w, base_tag + 1000000 + w, graph, wb, wc);
    const auto t0 = Clock::now();
    BootstrapOptions bo;
    bo.resamples = 500;
    bo.seed = seed_;
    for (int t = 0; t < opt_.max_trials; ++t) {
      trial(r, t, base_tag + t, graph, base_us, cand_us);
      const int n = t + 1;
      if (n >= opt_.min_trials && (n % 10 == 0 || n == opt_.max_trials)) {
        const Interval iv = median_interval(paired_ratios(base_us, cand_us), bo);
        if ((iv.hi - iv.lo) / 2 < opt_.target_rel_halfwidth * iv.point) return true;
        if (seconds_since(t0) > opt_.time_cap_s) return false;
      }
    }
    return false;
  }

  void body(ShapeResult& r, ReplicateResult& rep) {
    phase_ = "prepare";
    progress("prepare");
    op_ = make_op_case(s_, opt_.sets, seed_, opt_.candidate, stream_);
    timer_ = std::make_unique<ColdTimer>(stream_);
    r.bytes = op_->bytes();
    r.flops = op_->flops();
    r.raw_limit_us = meta_.copy_gbps > 0 ? r.bytes / (meta_.copy_gbps * 1e3) : 0;

    phase_ = "baseline check";
    op_->new_inputs(0, derive_seed(seed_, 1));
    op_->poison_outputs();
    op_->run_baseline(0);
    sync_or_fail(stream_, "baseline");
    if (const CheckResult c = op_->check_baseline(0); !c.ok)
      throw ShapeFailure{"error", "the baseline itself is wrong (a scorer bug): " + c.reason};

    progress("checking");
    correctness(rep, "check before timing", 100);
    graph_probe(rep);
    if (opt_.time) {
      progress("floor");
      floor(r, rep);
      progress("timing");
      rep.converged = timing_loop(rep, false, rep.baseline_us, rep.candidate_us);
      if (opt_.graph) {
        if (!op_->baseline_synchronizes())
          for (int set = 0; set < op_->sets(); ++set) {
            op_->new_inputs(set, derive_seed(seed_, 600 + set));
            base_graphs_.push_back(capture([&] { op_->run_baseline(set); }, "the baseline's"));
          }
        else
          rep.flags.push_back("graph: baseline synchronises, timed eagerly");
        if (!timing_loop(rep, true, rep.graph_baseline_us, rep.graph_candidate_us))
          rep.flags.push_back("graph: not converged");
      }
    }
    correctness(rep, "check after timing", 200);
    if (opt_.time) judge(r, rep);
    progress(summary(rep));
  }

  // Times faster than the raw bandwidth limit are impossible: the kernel cannot
  // have read its inputs. The 10x flag looks at the statistic the table shows,
  // the median of the paired ratios.
  void judge(const ShapeResult& s, ReplicateResult& r) {
    const double cand = median(r.candidate_us);
    if (s.raw_limit_us > 0 && cand < 0.9 * s.raw_limit_us)
      throw ShapeFailure{"impossible", "median " + fmt(cand) + " us is below 90% of the raw bandwidth limit (" +
                                           fmt(s.raw_limit_us) + " us): it cannot have read its inputs"};
    if (median(paired_ratios(r.baseline_us, r.candidate_us)) > 10) r.flags.push_back("speedup above 10x: look at it");
  }

  static std::string fmt(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
  }

  std::string summary(const ReplicateResult& r) const {
    if (!opt_.time) return "correct (" + std::to_string(r.check.checks) + " checks)";
    const double b = median(r.baseline_us), c = median(r.candidate_us);
    return std::to_string(r.candidate_us.size()) + " trials, baseline " + fmt(b) + " us, submission " + fmt(c) +
           " us, " + fmt(median(paired_ratios(r.baseline_us, r.candidate_us))) + "x" +
           (r.converged ? "" : " (not converged)");
  }

 public:
  ~Runner() {
    for (auto g : graphs_) cudaGraphExecDestroy(g);
    for (auto g : base_graphs_) cudaGraphExecDestroy(g);
    timer_.reset();
    op_.reset();
    if (stream_) cudaStreamDestroy(stream_);
  }

 private:
  const Shape& s_;
  const RunOptions& opt_;
  const RunMeta& meta_;
  ReplicateSpec spec_;
  std::string label_;
  uint64_t seed_;
  std::string phase_ = "start";
  Clock::time_point start_ = Clock::now();
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<OpCase> op_;
  std::unique_ptr<ColdTimer> timer_;
  std::vector<cudaGraphExec_t> graphs_, base_graphs_;
};

}  // namespace

ShapeResult run_shape(const Shape& shape, const RunOptions& opt, const RunMeta& meta, const ReplicateSpec& spec,
                      const std::string& label) {
  Runner runner(shape, opt, meta, spec, label);
  return runner.run();
}

void calibrate(RunMeta& meta) {
  int n = 0;
  SCORER_CUDA(cudaGetDeviceCount(&n));
  if (n == 0) throw CudaError(cudaErrorNoDevice, "cudaGetDeviceCount");
  SCORER_CUDA(cudaSetDevice(0));
  cudaDeviceProp p{};
  SCORER_CUDA(cudaGetDeviceProperties(&p, 0));
  meta.gpu_name = p.name;
  meta.sm_count = p.multiProcessorCount;
  meta.l2_bytes = p.l2CacheSize;
  SCORER_CUDA(cudaDriverGetVersion(&meta.driver_version));
  SCORER_CUDA(cudaRuntimeGetVersion(&meta.runtime_version));
  cudaStream_t s;
  SCORER_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  meta.sm_clock_mhz_start = measure_sm_clock_mhz(s);
  meta.copy_gbps = measure_copy_gbps(s);
  meta.matrix_tflops = measure_matrix_tflops(s);
  {
    ColdTimer timer(s);
    meta.empty_launch_us = measure_empty_launch_us(timer);
  }
  SCORER_CUDA(cudaStreamDestroy(s));
}

double sm_clock_now_mhz() {
  cudaStream_t s;
  SCORER_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const double mhz = measure_sm_clock_mhz(s);
  SCORER_CUDA(cudaStreamDestroy(s));
  return mhz;
}

}  // namespace scorer
