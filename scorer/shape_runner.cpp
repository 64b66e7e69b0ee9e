#include "scorer/shape_runner.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>

#include "scorer/call_windows.h"
#include "scorer/cold_timer.h"
#include "scorer/cuda_check.h"
#include "scorer/device_quiet.h"
#include "scorer/device_state.h"
#include "scorer/floors.h"
#include "scorer/gpu_clocks.h"
#include "scorer/kernel_trace.h"
#include "scorer/op_case.h"
#include "scorer/random_fill.h"
#include "scorer/stats.h"

namespace scorer {
namespace {

// What the bounded whole-device wait allows beyond twice the submission's call.
constexpr double kQuietSlackUs = 50000;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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

std::string fmt(double v, const char* f = "%.2f") {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// What a failed check observed: its first failure and its figures.
std::string observed(const CheckResult& c) {
  std::string s = c.reason + " (relative L2 error " + fmt(c.rel_l2, "%.3g") + ", worst element at " +
                  fmt(c.worst_elem, "%.3g") + " of its bound";
  if (c.bad_elements) s += ", " + std::to_string(c.bad_elements) + " elements over it";
  if (c.nonfinite) s += ", " + std::to_string(c.nonfinite) + " not finite";
  return s + ")";
}

// Seeds of the draws: each use of the replicate's seed has a tag of its own.
constexpr uint64_t kUntouchedTag = 700000, kWarmupTag = 2000000, kTrialTag = 1000000, kGraphTrialTag = 3000000;

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
      // Before any CUDA work, so that the trace sees all of it.
      if (opt_.trace && opt_.time) trace_ = std::make_unique<KernelTrace>();
      SCORER_CUDA(cudaSetDevice(spec_.gpu));
      SCORER_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
      body(r, rep);
      read_clocks(rep, false);
      clock_flags(rep);
    } catch (const ShapeFailure& f) {
      rep.status = f.status;
      rep.reason = f.reason;
    } catch (const CudaError& e) {
      rep.status = "crash";
      rep.reason = phase_ + ": " + e.what();
    } catch (const TraceUnavailable& e) {
      rep.status = "error";
      rep.reason = phase_ + ": the kernel trace (CUPTI) failed in the shape's process: " + e.what() +
                   " (scorer run --timer events times without it)";
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
  // Each line says how long the replicate has run, so slow phases show.
  void progress(const std::string& what) {
    std::fprintf(stderr, "%s: %s (+%.1f s)\n", label_.c_str(), what.c_str(), seconds_since(start_));
  }

  void read_clocks(ReplicateResult& rep, bool start) {
    const ClockReading c = read_clocks_now(stream_);
    (start ? rep.sm_clock_mhz_start : rep.sm_clock_mhz_end) = c.sm_mhz;
    (start ? rep.mem_clock_mhz_start : rep.mem_clock_mhz_end) = c.mem_mhz;
    rep.throttle_reasons |= c.reasons;
  }

  // Times taken on a card that slowed down are not comparable with the others.
  static void clock_flags(ReplicateResult& rep) {
    const double a = rep.sm_clock_mhz_start, b = rep.sm_clock_mhz_end;
    if (a > 0 && b > 0 && std::fabs(b / a - 1) > 0.02)
      rep.flags.push_back("SM clock moved from " + fmt(a, "%.0f") + " to " + fmt(b, "%.0f") + " MHz (" +
                          fmt(100 * (b / a - 1), "%+.1f") + "%)");
    if (const uint64_t t = throttling_reasons(rep.throttle_reasons))
      rep.flags.push_back("throttled: " + throttle_reason_names(t));
  }

  // Waits for the whole device, bounded: before a baseline or a floor is
  // timed, nothing of the submission's may still run.
  void quiet(const std::string& before) {
    // The 50 ms are the host's share: the waiter is a thread, and CUPTI's own
    // thread delivering its records held it for over 1 ms on the device. Work
    // that ends sooner is still seen, by the kernel trace (foreign work).
    const double bound_us = 2 * cand_estimate_us_ + kQuietSlackUs;
    if (!quiet_->wait(bound_us))
      throw ShapeFailure{
          "escaped work",
          "before " + before + ", the device was still busy " + fmt(bound_us / 1000, "%.3f") +
              " ms after the scorer's own work had finished (the bound: twice the submission's call, 2 x " +
              fmt(cand_estimate_us_) + " us, plus " + fmt(kQuietSlackUs / 1000, "%.0f") +
              " ms). Possible causes: a kernel or copy the submission "
              "left running on a stream of its own, work launched by a thread of the submission"};
  }

  // The calls the timer timed since the last look, under one kind and label.
  void note_calls(TimedCall::Kind kind, const std::string& label, bool graph) {
    for (const CallTags& t : timer_->take_calls()) calls_.push_back({kind, label, t, graph});
  }

  // New activations for `set`; the candidate runs once on them, checked. Its
  // time (events, no hold) bounds how long the device may stay busy after it.
  void checked_run(ReplicateResult& r, int set, uint64_t seed, const std::string& when) {
    op_->new_inputs(set, seed);
    op_->poison_outputs();
    SCORER_CUDA(cudaEventRecord(ev_[0], stream_));
    op_->run_candidate(set);
    SCORER_CUDA(cudaEventRecord(ev_[1], stream_));
    sync_or_fail(stream_, when);
    float ms = 0;
    SCORER_CUDA(cudaEventElapsedTime(&ms, ev_[0], ev_[1]));
    cand_estimate_us_ = cand_estimate_us_ > 0 ? std::min(cand_estimate_us_, 1e3 * ms) : 1e3 * ms;
    if (!opt_.judge_outputs) return;
    const CheckResult c = op_->check(set);
    merge_check(r.check, c);
    if (!c.ok) throw ShapeFailure{"incorrect", when + ": the submission's output is wrong: " + observed(c)};
  }

  void correctness(ReplicateResult& r, const char* when, uint64_t tag) {
    phase_ = when;
    for (int c = 0; c < opt_.checks; ++c)
      checked_run(r, c % op_->sets(), derive_seed(seed_, tag + c),
                  std::string(when) + " (inputs " + std::to_string(c + 1) + ")");
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
      throw ShapeFailure{"error", who + " run() cannot be captured in a CUDA graph: " +
                                      (thrown.empty() ? std::string(cudaGetErrorName(e)) : thrown) +
                                      ". Possible causes: it allocates, synchronises, or uses a stream other "
                                      "than the one it is given"};
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
      if (!opt_.judge_outputs) continue;
      const CheckResult c = op_->check(set);
      merge_check(r.check, c);
      if (!c.ok)
        throw ShapeFailure{
            "incorrect",
            "run() captured in a CUDA graph and replayed on new inputs gave a wrong result: " + observed(c) +
                ". Possible causes: an arithmetic error that shows on these inputs, work "
                "outside the scorer's stream (not captured), a result kept from an earlier call"};
    }
  }

  void floor(const ShapeResult& r, ReplicateResult& rep) {
    phase_ = "floor";
    DeviceBuffer buf(size_t(r.bytes) + 16);
    fill_random_bytes(buf.as<uint8_t>(), buf.bytes(), 9, stream_);
    sync_or_fail(stream_, "floor");
    timer_->before_each_call = [&] { quiet("a timed call of the floor"); };
    rep.floor_read_us = measure_read_floor_us(size_t(r.bytes), buf, *timer_);
    timer_->before_each_call = nullptr;
    note_calls(TimedCall::floor, "a timed call of the floor", false);
    rep.floor_compute_us = meta_.matrix_tflops > 0 ? r.flops / (meta_.matrix_tflops * 1e6) : 0;
    rep.floor_us = std::max(rep.floor_read_us, rep.floor_compute_us);
  }

  // The baseline before any submission code has run in this process (issue
  // 40): what the paired baseline is compared with. Timed like the paired
  // one, on fresh inputs for each call, after the same number of warm-up calls.
  void untouched_baseline(ReplicateResult& rep) {
    phase_ = "untouched baseline";
    const bool hold = !op_->baseline_synchronizes();
    for (int t = -opt_.warmup; t < opt_.stop.min_trials; ++t) {
      const int set = (t + opt_.warmup) % op_->sets();
      op_->new_inputs(set, derive_seed(seed_, kUntouchedTag + uint64_t(t + opt_.warmup)));
      op_->poison_outputs();
      const double us = timer_->time_us([&] { op_->run_baseline(set); }, hold);
      const std::string name = "untouched baseline call " + std::to_string(t + 1);
      note_calls(TimedCall::untouched_baseline, t < 0 ? "an untouched warm-up baseline call" : name, false);
      sync_or_fail(stream_, name);
      if (const CheckResult c = op_->check_baseline(set); !c.ok)
        throw ShapeFailure{"error", name + ": the baseline itself is wrong (a scorer bug): " + observed(c)};
      if (t >= 0) rep.untouched_baseline_us.push_back(us);
    }
  }

  // One paired trial: baseline and candidate on the same fresh inputs, in
  // alternating order; both outputs are checked, the baseline's with its own
  // tolerance (a baseline that went wrong, or whose graph replays a stale
  // result, would skew the speedup unseen). The device is quiet before the
  // baseline. Times are kept only once both checks passed, so that the trials
  // stay paired whichever check fails.
  // `tag` seeds the draw: every trial, warm-up ones included, gets inputs of its own.
  struct Paired {
    double base_us = 0, cand_us = 0;
    size_t cand_call = 0;  // the candidate call's index in calls_ (traced runs)
  };
  Paired trial(ReplicateResult& r, const std::string& name, int t, uint64_t tag, bool graph) {
    const int set = t % op_->sets();
    op_->new_inputs(set, derive_seed(seed_, tag));
    const bool hold_base = !op_->baseline_synchronizes();
    Paired p;
    auto time_base = [&] {
      quiet(name + "'s baseline call");
      op_->poison_outputs();
      const bool use_graph = graph && hold_base;
      p.base_us = timer_->time_us(
          [&] {
            if (use_graph)
              SCORER_CUDA(cudaGraphLaunch(base_graphs_[set], stream_));
            else
              op_->run_baseline(set);
          },
          hold_base);
      note_calls(TimedCall::baseline, name + "'s baseline call", use_graph);
      sync_or_fail(stream_, name + ", the baseline's call");
      if (const CheckResult c = op_->check_baseline(set); !c.ok)
        throw ShapeFailure{"error", name + ": the baseline itself is wrong (a scorer bug): " + observed(c)};
    };
    auto time_cand = [&] {
      op_->poison_outputs();
      p.cand_us = timer_->time_us([&] {
        if (graph)
          SCORER_CUDA(cudaGraphLaunch(graphs_[set], stream_));
        else
          op_->run_candidate(set);
      });
      note_calls(TimedCall::candidate, name + "'s submission call", graph);
      p.cand_call = calls_.size() - 1;
      sync_or_fail(stream_, name + ", the submission's call");
      if (!opt_.judge_outputs) return;
      const CheckResult c = op_->check(set);
      merge_check(r.check, c);
      if (!c.ok) throw ShapeFailure{"incorrect", name + ": the submission's output is wrong: " + observed(c)};
    };
    if (t % 2) {
      time_cand();
      time_base();
    } else {
      time_base();
      time_cand();
    }
    return p;
  }

  void warmup(ReplicateResult& r) {
    phase_ = "warm-up";
    for (int w = 0; w < opt_.warmup; ++w) trial(r, "warm-up trial " + std::to_string(w + 1), w, kWarmupTag + w, false);
  }

  // Trials until the stopping rule (stats.h) says the replicate's median is
  // tight or its time is up; the same rule the coverage simulations run.
  bool timing_loop(ReplicateResult& r, bool graph, std::vector<double>& base_us, std::vector<double>& cand_us) {
    phase_ = graph ? "timing (graph)" : "timing";
    const uint64_t base_tag = graph ? kGraphTrialTag : kTrialTag;
    const auto t0 = Clock::now();
    TrialStopper stopper(opt_.stop);
    for (int t = 0;; ++t) {
      const Paired p =
          trial(r, (graph ? "graph trial " : "paired trial ") + std::to_string(t + 1), t, base_tag + t, graph);
      base_us.push_back(p.base_us);
      cand_us.push_back(p.cand_us);
      if (!graph && trace_) cand_trials_.push_back(p.cand_call);
      const StopDecision d = stopper.add(p.base_us / p.cand_us, seconds_since(t0));
      if (d != StopDecision::go_on) return d == StopDecision::converged;
    }
  }

  void check_state(const std::string& when) {
    const std::string change = device_state_change(state_before_, read_device_state(stream_), when);
    if (!change.empty())
      throw ShapeFailure{"changed device state",
                         change + ". A submission may not change device-wide settings: they reach the baseline"};
  }

  // Judges the trace of every timed call (call_windows.h), once the device
  // is quiet, and keeps the CUPTI figures of the candidate's paired trials.
  void finish_trace(ReplicateResult& rep) {
    phase_ = "kernel trace";
    quiet("the kernel trace was read");
    const std::vector<TraceRecord> records = trace_->take();
    const WindowVerdict v = judge_windows(records, calls_, trace_->stream_id(stream_));
    if (!v.ok) throw ShapeFailure{"foreign work", v.reason};
    std::vector<TimedCall> trials;
    for (size_t i : cand_trials_) trials.push_back(calls_[i]);
    const CallFigures f = call_figures(records, trials);
    if (f.kernel_us.empty() && !trials.empty())
      rep.flags.push_back("second timer: CUPTI lost the records of some of the submission's calls");
    rep.candidate_kernel_us = f.kernel_us;
    rep.candidate_span_us = f.span_us;
  }

  void body(ShapeResult& r, ReplicateResult& rep) {
    phase_ = "set-up";
    progress("set-up");
    const auto baseline = opt_.baselines.find(op_name(s_.op));
    op_ = make_op_case(s_, opt_.sets, seed_, opt_.candidate, stream_,
                       baseline == opt_.baselines.end() ? "default" : baseline->second);
    timer_ = std::make_unique<ColdTimer>(stream_, opt_.flush);
    if (trace_) timer_->set_trace(trace_.get());
    quiet_ = std::make_unique<DeviceQuiet>();
    SCORER_CUDA(cudaEventCreate(&ev_[0]));
    SCORER_CUDA(cudaEventCreate(&ev_[1]));
    r.bytes = op_->bytes();
    r.flops = op_->flops();
    r.raw_limit_us = meta_.copy_gbps > 0 ? r.bytes / (meta_.copy_gbps * 1e3) : 0;

    phase_ = "baseline check";
    op_->new_inputs(0, derive_seed(seed_, 1));
    op_->poison_outputs();
    op_->run_baseline(0);
    sync_or_fail(stream_, "baseline");
    if (const CheckResult c = op_->check_baseline(0); !c.ok)
      throw ShapeFailure{"error", "the baseline itself is wrong (a scorer bug): " + observed(c)};
    // The card has worked a little (weights drawn, baseline run): its clocks are up.
    read_clocks(rep, true);
    if (opt_.time) {
      progress("untouched baseline");
      untouched_baseline(rep);
    }

    phase_ = "prepare";
    progress("prepare");
    state_before_ = read_device_state(stream_);
    op_->prepare_candidate();
    check_state("after prepare");

    progress("checking");
    correctness(rep, "check before timing", 100);
    graph_probe(rep);
    if (opt_.time) {
      warmup(rep);
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
    check_state("after the last trial");
    correctness(rep, "check after timing", 200);
    if (trace_ && opt_.time) finish_trace(rep);
    if (opt_.time) judge(rep);
    progress(summary(rep));
  }

  // A median below 90% of the replicate's own measured floor (a streaming
  // read of the shape's minimal bytes, timed the same way) is impossible:
  // the kernel cannot have read its inputs. Faster than the floor at all is
  // flagged for a look, as is a speedup above 10x (the median of the paired
  // ratios, the statistic the table shows).
  void judge(ReplicateResult& r) {
    const double cand = median(r.candidate_us);
    if (r.floor_us > 0 && cand < 0.9 * r.floor_us)
      throw ShapeFailure{"impossible", "the submission's median " + fmt(cand) + " us is below 90% of the floor (" +
                                           fmt(r.floor_us) +
                                           " us, a streaming read of the shape's minimal bytes "
                                           "timed the same way). Possible causes: work outside the timed "
                                           "window (another stream, another thread, done while the stream "
                                           "was held), a result kept from an earlier call, inputs not read"};
    if (r.floor_us > 0 && cand < r.floor_us)
      r.flags.push_back("faster than the floor (" + fmt(cand) + " < " + fmt(r.floor_us) + " us): look at it");
    if (median(paired_ratios(r.baseline_us, r.candidate_us)) > 10) r.flags.push_back("speedup above 10x: look at it");
  }

  std::string summary(const ReplicateResult& r) const {
    if (!opt_.time) return "correct (" + std::to_string(r.check.checks) + " checks)";
    const double b = median(r.baseline_us), c = median(r.candidate_us);
    return std::to_string(r.candidate_us.size()) + " trials, baseline " + fmt(b) + " us (untouched " +
           fmt(median(r.untouched_baseline_us)) + "), submission " + fmt(c) + " us, " +
           fmt(median(paired_ratios(r.baseline_us, r.candidate_us))) + "x" + (r.converged ? "" : " (not converged)");
  }

 public:
  ~Runner() {
    for (auto g : graphs_) cudaGraphExecDestroy(g);
    for (auto g : base_graphs_) cudaGraphExecDestroy(g);
    for (cudaEvent_t e : ev_)
      if (e) cudaEventDestroy(e);
    timer_.reset();
    op_.reset();
    quiet_.reset();
    if (stream_) cudaStreamDestroy(stream_);
    trace_.reset();
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
  cudaEvent_t ev_[2] = {nullptr, nullptr};
  std::unique_ptr<KernelTrace> trace_;
  std::unique_ptr<OpCase> op_;
  std::unique_ptr<ColdTimer> timer_;
  std::unique_ptr<DeviceQuiet> quiet_;
  DeviceState state_before_;
  double cand_estimate_us_ = 0;      // the fastest checked call of the submission (events, no hold)
  std::vector<TimedCall> calls_;     // every timed call, in order (traced runs)
  std::vector<size_t> cand_trials_;  // calls_ index of each paired trial's candidate call
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
  meta.copy_gbps = measure_copy_gbps(s);
  meta.matrix_tflops = measure_matrix_tflops(s);
  {
    ColdTimer timer(s);
    meta.empty_launch_us = measure_empty_launch_us(timer);
  }
  // Last, right after the card has worked: the clocks it times at.
  const ClockReading c = read_clocks_now(s);
  meta.sm_clock_mhz_start = c.sm_mhz;
  meta.mem_clock_mhz_start = c.mem_mhz;
  meta.throttle_reasons |= c.reasons;
  meta.nvml = c.nvml;
  SCORER_CUDA(cudaStreamDestroy(s));
}

ClockReading read_clocks_now(cudaStream_t stream) {
  ClockReading c;
  int dev = 0;
  SCORER_CUDA(cudaGetDevice(&dev));
  GpuClocks g;
  c.sm_mhz = measure_sm_clock_mhz(stream, [&] { g = read_gpu_clocks(pci_bus_id(dev)); });
  c.mem_mhz = g.available ? g.mem_mhz : 0;
  c.reasons = g.available ? g.reasons : 0;
  c.nvml = g.available ? "" : g.why_unavailable;
  return c;
}

ClockReading read_clocks_now() {
  cudaStream_t s;
  SCORER_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const ClockReading c = read_clocks_now(s);
  SCORER_CUDA(cudaStreamDestroy(s));
  return c;
}

}  // namespace scorer
