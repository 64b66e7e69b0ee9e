// What the kernel trace says of the calls a replicate timed (pure functions,
// tested on the CPU). Each timed call has a window on the device's clock, from
// the start of its flush to the end of its own last record; nothing but the
// call's own work may run in it:
// - work that overlaps the window of a baseline (paired or untouched) or of a
//   floor and is not that call's own fails the shape as `foreign work` "during
//   the baseline": it is what a submission left running after its call, or
//   launched later from a thread of its own;
// - likewise work in the window of the submission's call that is not the
//   call's own, and work the call itself put on a stream other than the
//   scorer's (a graph replay may use streams of its own), "during the
//   submission's call".
// The CUPTI timer's figures per candidate trial come from the same records.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scorer/cold_timer.h"
#include "scorer/kernel_trace.h"

namespace scorer {

struct TimedCall {
  enum Kind { floor, untouched_baseline, baseline, candidate };
  Kind kind = baseline;
  std::string label;  // how a message names it, e.g. "paired trial 12"
  CallTags tags;
  bool graph = false;  // replayed from a CUDA graph
};

struct WindowVerdict {
  bool ok = true;
  std::string reason;  // when not ok: the shape fails as "foreign work" with it
};

// `scorer_stream` is the trace's id of the scorer's stream. The first
// finding is reported, looked for among the baselines' windows first, then
// the floors', the untouched baselines', and the submission's calls'.
WindowVerdict judge_windows(const std::vector<TraceRecord>& records, const std::vector<TimedCall>& calls,
                            uint32_t scorer_stream);

// The CUPTI figures of each of `calls`, in order: the sum of its kernels'
// durations and its first start to last end (µs). Empty when some call has
// no records of its own (the trace lost them), so that the figures are one
// per call or none.
struct CallFigures {
  std::vector<double> kernel_us, span_us;
};
CallFigures call_figures(const std::vector<TraceRecord>& records, const std::vector<TimedCall>& calls);

}  // namespace scorer
