// The scorer's cold timer (scorer/cold_timer.h): a call the host cannot
// enqueue behind the stream hold must void its time, not report it. And two
// benchmarks the lead runs by hand (skipped unless --no-skip): the flushes
// compared, and what the guards cost.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <thread>

#include "scorer/cold_timer.h"
#include "scorer/device_quiet.h"
#include "scorer/device_state.h"
#include "scorer/floors.h"
#include "scorer/kernel_trace.h"
#include "scorer/op_case.h"
#include "scorer/shape_runner.h"
#include "scorer/stats.h"
#include "tests/gpu_test_util.h"

TEST_CASE("the cold timer refuses a call that waits on its held stream from the host") {
  cudaStream_t s = nullptr;
  GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  {
    scorer::ColdTimer timer(s);
    const double empty = timer.time_us([] {});
    CHECK(empty >= 0);
    CHECK(empty < 1000);
    // The host waits for the blocking kernel, which waits for the host: the
    // hold runs out and the time (near zero) must not be used.
    CHECK_THROWS_WITH_AS(timer.time_us([&] { cudaStreamSynchronize(s); }), doctest::Contains("stream hold"),
                         std::runtime_error);
    // The timer is usable again afterwards.
    CHECK(timer.time_us([] {}) < 1000);
  }
  GT_CUDA(cudaStreamDestroy(s));
}

namespace {

__global__ void spin_ns(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  while (t - t0 < ns);
}

}  // namespace

TEST_CASE("the cold timer tags each call's flush and hold apart from the call") {
  std::unique_ptr<scorer::KernelTrace> trace;
  try {
    trace = std::make_unique<scorer::KernelTrace>();
  } catch (const scorer::TraceUnavailable& e) {
    WARN_MESSAGE(false, "CUPTI unavailable: " << e.what());
    return;
  }
  cudaStream_t s = nullptr;
  GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  {
    scorer::ColdTimer timer(s);
    timer.set_trace(trace.get(), 100);
    spin_ns<<<1, 1, 0, s>>>(1000);  // loads the module, untimed
    GT_CUDA(cudaStreamSynchronize(s));
    const double us = timer.time_us([&] { spin_ns<<<1, 1, 0, s>>>(20000); });
    CHECK(us > 19);
    GT_CUDA(cudaDeviceSynchronize());
    const auto calls = timer.take_calls();
    REQUIRE(calls.size() == 1);
    CHECK(calls[0].hold == 100);
    CHECK(calls[0].call == 101);
    CHECK(calls[0].held);
    const auto records = trace->take();
    const scorer::CallTrace hold = scorer::trace_of_call(records, 100), call = scorer::trace_of_call(records, 101);
    CHECK(hold.records == 2);  // the flush and the blocking kernel
    CHECK(call.records == 1);
    CHECK(call.kernel_us > 19);
    CHECK(hold.last_end_ns <= call.first_start_ns);
    CHECK(timer.take_calls().empty());
  }
  trace.reset();
  GT_CUDA(cudaStreamDestroy(s));
}

TEST_CASE("the quiet-device wait reports work still running after its bound") {
  cudaStream_t other = nullptr;
  GT_CUDA(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  {
    scorer::DeviceQuiet quiet;
    CHECK(quiet.wait(1e6));
    spin_ns<<<1, 1, 0, other>>>(50000000);  // 50 ms
    CHECK_FALSE(quiet.wait(1000));
    CHECK_FALSE(quiet.wait(1000));  // the waiter is still inside the first wait
    std::this_thread::sleep_for(std::chrono::milliseconds(80));
    CHECK(quiet.wait(1e6));
  }
  GT_CUDA(cudaStreamDestroy(other));
}

TEST_CASE("the device state sees a persisting-L2 carve-out and names it") {
  cudaStream_t s = nullptr;
  GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  const scorer::DeviceState before = scorer::read_device_state(s);
  CHECK(scorer::device_state_change(before, scorer::read_device_state(s), "again").empty());
  int most = 0, dev = 0;
  GT_CUDA(cudaGetDevice(&dev));
  GT_CUDA(cudaDeviceGetAttribute(&most, cudaDevAttrMaxPersistingL2CacheSize, dev));
  // Not always 0 at start: some machines' drivers set a carve-out by default.
  size_t was = 0;
  GT_CUDA(cudaDeviceGetLimit(&was, cudaLimitPersistingL2CacheSize));
  const size_t want = was == size_t(most) ? size_t(most) / 2 : size_t(most);
  GT_CUDA(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, want));
  size_t got = 0;
  GT_CUDA(cudaDeviceGetLimit(&got, cudaLimitPersistingL2CacheSize));
  const std::string change = scorer::device_state_change(before, scorer::read_device_state(s), "after prepare");
  GT_CUDA(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, was));
  INFO("change: " << change);
  CHECK(change.rfind("persisting-L2 limit: " + std::to_string(was) + " bytes before prepare, " + std::to_string(got) +
                         " bytes after prepare",
                     0) == 0);
  CHECK(scorer::device_state_change(before, scorer::read_device_state(s), "after").empty());
  GT_CUDA(cudaStreamDestroy(s));
}

namespace {

scorer::Shape public_shape(const std::string& name) {
  for (const scorer::Shape& s : scorer::load_shapes("shapes.toml").shapes)
    if (s.name == name) return s;
  FAIL("no shape " << name << " in shapes.toml (run from the checkout's root)");
  return {};
}

// Median µs of `calls` timed calls of the op's candidate (or baseline), on
// fresh inputs every 10 calls.
double median_call_us(scorer::OpCase& op, scorer::ColdTimer& timer, bool candidate, int calls) {
  std::vector<double> t;
  for (int i = 0; i < calls; ++i) {
    if (i % 10 == 0) op.new_inputs(0, 77 + i);
    op.poison_outputs();
    t.push_back(timer.time_us([&] { candidate ? op.run_candidate(0) : op.run_baseline(0); }));
    GT_CUDA(cudaStreamSynchronize(timer.stream()));
  }
  return scorer::median(t);
}

}  // namespace

// Issue 33: how much the former flush (writing 2x L2, which leaves the cache
// full of dirty lines) changed the times, against the read flush now used.
// A measurement, not a check: run with --no-skip.
TEST_CASE("benchmark: the read flush against the former write flush" * doctest::skip()) {
  const scorer::Shape s = public_shape("dense_m32_qkv");
  cudaStream_t st = nullptr;
  GT_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  {
    auto op = scorer::make_op_case(s, 1, 5, scorer::Candidate{}, st);
    op->prepare_candidate();
    op->new_inputs(0, 1);
    op->run_candidate(0);
    op->run_baseline(0);
    scorer::DeviceBuffer buf(size_t(op->bytes()) + 16);
    GT_CUDA(cudaStreamSynchronize(st));
    scorer::ColdTimer read(st, scorer::FlushMode::read), write(st, scorer::FlushMode::write);
    std::vector<double> fr, fw, cr, cw, br, bw;
    for (int round = 0; round < 4; ++round) {  // interleaved, so that drift falls on both
      fr.push_back(scorer::measure_read_floor_us(size_t(op->bytes()), buf, read));
      fw.push_back(scorer::measure_read_floor_us(size_t(op->bytes()), buf, write));
      cr.push_back(median_call_us(*op, read, true, 100));
      cw.push_back(median_call_us(*op, write, true, 100));
      br.push_back(median_call_us(*op, read, false, 100));
      bw.push_back(median_call_us(*op, write, false, 100));
    }
    using scorer::median;
    MESSAGE("floor of " << s.name << " (" << op->bytes() / 1e6 << " MB): read flush " << median(fr)
                        << " us, write flush " << median(fw) << " us (" << 100 * (median(fw) / median(fr) - 1) << "%)");
    MESSAGE(s.name << " submission: read flush " << median(cr) << " us, write flush " << median(cw) << " us ("
                   << 100 * (median(cw) / median(cr) - 1) << "%)");
    MESSAGE(s.name << " baseline: read flush " << median(br) << " us, write flush " << median(bw) << " us ("
                   << 100 * (median(bw) / median(br) - 1) << "%)");
    for (double v : {median(fr), median(fw), median(cr), median(cw), median(br), median(bw)}) CHECK(v > 0);
  }
  GT_CUDA(cudaStreamDestroy(st));
}

// Issues 33 and 40: what the guards cost. The pieces (the bounded wait for a
// quiet device, a timed call with and without the kernel trace), then one
// replicate of a shape scored with and without the trace. Run with --no-skip.
TEST_CASE("benchmark: what the guards cost per trial" * doctest::skip()) {
  using Clock = std::chrono::steady_clock;
  auto us_since = [](Clock::time_point t0) {
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  };
  cudaStream_t st = nullptr;
  GT_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  {
    scorer::DeviceQuiet quiet;
    auto t0 = Clock::now();
    for (int i = 0; i < 1000; ++i) REQUIRE(quiet.wait(1e6));
    MESSAGE("quiet-device wait on an idle device: " << us_since(t0) / 1000 << " us of host time each");
  }
  for (bool traced : {false, true}) {
    std::unique_ptr<scorer::KernelTrace> trace;
    if (traced) {
      try {
        trace = std::make_unique<scorer::KernelTrace>();
      } catch (const scorer::TraceUnavailable& e) {
        WARN_MESSAGE(false, "CUPTI unavailable: " << e.what());
        break;
      }
    }
    scorer::ColdTimer timer(st);
    if (trace) timer.set_trace(trace.get());
    const double device_us = scorer::measure_empty_launch_us(timer, 20);
    auto t0 = Clock::now();
    std::vector<double> t;
    for (int i = 0; i < 500; ++i) t.push_back(timer.time_us([] {}));
    const double host_us = us_since(t0) / 500;
    t0 = Clock::now();
    const size_t records = trace ? trace->take().size() : 0;
    MESSAGE((traced ? "with" : "without")
            << " the kernel trace: an empty launch " << device_us << " us (events), a timed empty call " << host_us
            << " us of host time"
            << (traced ? ", reading " + std::to_string(records) + " records " + std::to_string(us_since(t0)) + " us"
                       : std::string()));
  }
  GT_CUDA(cudaStreamDestroy(st));

  const scorer::Shape s = public_shape("dense_m32_o");
  double seconds[2] = {0, 0};
  for (bool traced : {false, true}) {
    scorer::RunOptions opt;
    opt.sets = 1;
    opt.stop.min_trials = opt.stop.max_trials = 400;
    opt.trace = traced;
    const scorer::ShapeResult r = scorer::run_shape(s, opt, scorer::RunMeta{}, {}, "[benchmark]");
    REQUIRE(r.status == "ok");
    seconds[traced] = r.replicates[0].seconds;
  }
  MESSAGE("one replicate of " << s.name << " with 400 paired trials: " << seconds[0] << " s without the trace, "
                              << seconds[1] << " s with it: " << 1e6 * (seconds[1] - seconds[0]) / 400
                              << " us per trial for the trace");
}
