// The second timer, and the witness of work the scorer did not ask for:
// CUPTI's activity records of every kernel, copy and set this process ran on
// the device, each with the stream it ran on, its start and end on the
// device's clock, and the tag the scorer had pushed on the host thread that
// launched it.
//
// How a timed call uses it: the scorer tags the call (tag(t) ... untag()),
// and after the call trace_of_call() sums its kernels and measures the span
// from its first start to its last end, independently of the CUDA events.
// Work that overlaps a timed window and carries none of the scorer's tags
// (launched by a thread of the submission, or left running by an earlier
// call) is foreign_records(); work a tagged call put on another stream is
// off_stream_records().
//
// CUPTI (libcupti.so.13 of the CUDA Toolkit) is loaded at run time, so the
// scorer runs without it; KernelTrace then throws TraceUnavailable with the
// reason, and the caller times with events alone and says so.
//
// One KernelTrace at a time per process (CUPTI's buffers are process-wide).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace scorer {

struct TraceRecord {
  enum Kind : uint8_t { kernel, copy, set };
  Kind kind = kernel;
  uint32_t stream = 0;    // CUPTI's id of the stream it ran on (KernelTrace::stream_id)
  uint64_t start_ns = 0;  // on the device's clock (KernelTrace::now_ns)
  uint64_t end_ns = 0;
  uint64_t tag = 0;  // the tag pushed around the API call that launched it; 0: none
  std::string name;  // a kernel's name as compiled; "copy" or "set"
};

class TraceUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class KernelTrace {
 public:
  // Starts recording. Throws TraceUnavailable when CUPTI cannot be loaded, is
  // older than the headers it was built with, or refuses (another profiler
  // holds the device, profiling not permitted), or when a KernelTrace exists.
  KernelTrace();
  ~KernelTrace();
  KernelTrace(const KernelTrace&) = delete;
  KernelTrace& operator=(const KernelTrace&) = delete;

  // Every CUDA call this thread makes between tag(t) and untag() marks the
  // work it launches with t (nonzero). Tags do not nest.
  void tag(uint64_t t);
  void untag();

  // Every record completed since the last take(), in the order CUPTI gave
  // them. Waits for no device work: what is still running comes in a later
  // take().
  std::vector<TraceRecord> take();

  // CUPTI's id of `stream`, as TraceRecord::stream holds it.
  uint32_t stream_id(cudaStream_t stream) const;
  // Now, on the records' clock.
  uint64_t now_ns() const;
};

// One tagged call as the device ran it.
struct CallTrace {
  int records = 0;       // records carrying the call's tag
  double kernel_us = 0;  // the sum of its kernels' durations
  double span_us = 0;    // its first start to its last end (kernels, copies, sets); 0 without records
  uint64_t first_start_ns = 0, last_end_ns = 0;
};
CallTrace trace_of_call(const std::vector<TraceRecord>& records, uint64_t tag);

// Records that overlap [from_ns, to_ns] and carry none of the `allowed` tags.
std::vector<TraceRecord> foreign_records(const std::vector<TraceRecord>& records, const std::vector<uint64_t>& allowed,
                                         uint64_t from_ns, uint64_t to_ns);

// Records tagged `tag` that ran on a stream other than `stream`.
std::vector<TraceRecord> off_stream_records(const std::vector<TraceRecord>& records, uint64_t tag, uint32_t stream);

// What a failure message says of a record, relative to a window:
// "kernel 'name' on stream 13 (41.2 us, 35.0 us of it inside the window)".
std::string describe(const TraceRecord& r, uint64_t from_ns, uint64_t to_ns);

}  // namespace scorer
