// How one call is timed, for shapes and floors alike (the README's "Timing"):
//   0. the hook `before_each_call` runs, when set (the scorer's bounded wait
//      for a quiet device before baselines and floors);
//   1. the L2 cache is flushed by reading a buffer of twice its size, so the
//      timed window starts with clean lines only (the former flush wrote that
//      buffer, leaving the cache full of dirty lines whose write-back could land
//      in the timed call; FlushMode::write keeps it, to measure the difference);
//   2. the stream is held behind a blocking kernel that spins until the host has
//      enqueued the whole call, so the host's launch cost stays out of the time
//      (skipped for callers that synchronise inside the call);
//   3. CUDA events on the scorer's stream bracket the call;
//   4. the host releases the stream and waits for the stop event.
// Every step is on the scorer's own stream; the call sees only that stream.
// With a kernel trace (set_trace), the flush and hold carry one tag and the
// call another, so that the trace can tell the call's own work and its window
// from anything else (call_windows.h); each timed call's tags are logged.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "scorer/device_buffers.h"

namespace scorer {

class KernelTrace;

enum class FlushMode {
  read,   // read 2x L2: clean lines only (the default)
  write,  // write 2x L2: the former flush, kept to measure its effect
};

// The trace tags of one timed call: its flush and hold, and the call itself.
struct CallTags {
  uint64_t hold = 0;  // the flush and, when the stream was held, the blocking kernel
  uint64_t call = 0;
  bool held = false;  // the stream was held (otherwise the hold tag marks the flush alone)
};

class ColdTimer {
 public:
  explicit ColdTimer(cudaStream_t stream, FlushMode flush = FlushMode::read);
  ~ColdTimer();
  ColdTimer(const ColdTimer&) = delete;  // owns events and a mapped host flag
  ColdTimer& operator=(const ColdTimer&) = delete;

  // Microseconds of one cold call of `call`. hold_stream = false for calls
  // that synchronise their stream (they would wait on the blocking kernel).
  // Throws std::runtime_error when the hold ran out before the call was
  // enqueued: a call must have run once, untimed, before it is timed here.
  double time_us(const std::function<void()>& call, bool hold_stream = true);

  void flush_l2();
  cudaStream_t stream() const { return stream_; }

  // Tags every later call's work in `trace` (null: none). Tags count up from
  // `first_tag`, two per call.
  void set_trace(KernelTrace* trace, uint64_t first_tag = 1);
  // The tags of the calls timed since the last take, in order (empty without a trace).
  std::vector<CallTags> take_calls();

  // Runs before each call's flush; an exception from it leaves the call untimed.
  std::function<void()> before_each_call;

 private:
  cudaStream_t stream_;
  FlushMode flush_mode_;
  int sms_ = 0;
  DeviceBuffer flush_;
  volatile int* flag_host_ = nullptr;  // mapped: [0] release, polled by the blocking kernel; [1] hold ran out
  int* flag_dev_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  KernelTrace* trace_ = nullptr;
  uint64_t next_tag_ = 1;
  std::vector<CallTags> calls_;
};

// SM clock in MHz over ~2 ms, from clock64() against %globaltimer on one SM.
// `while_running`, when set, is called while the clock kernel runs (the card
// busy, its clocks up): where the scorer reads NVML's clocks.
double measure_sm_clock_mhz(cudaStream_t stream, const std::function<void()>& while_running = {});

// Median microseconds of an empty kernel timed like a shape.
double measure_empty_launch_us(ColdTimer& timer, int reps = 50);

}  // namespace scorer
