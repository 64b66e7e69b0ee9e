// How one call is timed, for shapes and floors alike (the README's "Timing"):
//   1. the L2 cache is flushed by writing a buffer of twice its size;
//   2. the stream is held behind a blocking kernel that spins until the host has
//      enqueued the whole call, so the host's launch cost stays out of the time
//      (skipped for callers that synchronise inside the call);
//   3. CUDA events on the scorer's stream bracket the call;
//   4. the host releases the stream and waits for the stop event.
// Every step is on the scorer's own stream; the call sees only that stream.
#pragma once

#include <cuda_runtime.h>

#include <functional>

#include "scorer/device_buffers.h"

namespace scorer {

class ColdTimer {
 public:
  explicit ColdTimer(cudaStream_t stream);
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

 private:
  cudaStream_t stream_;
  DeviceBuffer flush_;
  volatile int* flag_host_ = nullptr;  // mapped: [0] release, polled by the blocking kernel; [1] hold ran out
  int* flag_dev_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// SM clock in MHz over ~2 ms, from clock64() against %globaltimer on one SM.
double measure_sm_clock_mhz(cudaStream_t stream);

// Median microseconds of an empty kernel timed like a shape.
double measure_empty_launch_us(ColdTimer& timer, int reps = 50);

}  // namespace scorer
