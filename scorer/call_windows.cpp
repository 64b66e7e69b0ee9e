#include "scorer/call_windows.h"

#include <algorithm>
#include <unordered_map>

namespace scorer {
namespace {

using Groups = std::unordered_map<uint64_t, std::vector<TraceRecord>>;

// The records of each tag, from one pass.
Groups group_by_tag(const std::vector<TraceRecord>& records) {
  Groups g;
  for (const TraceRecord& r : records)
    if (r.tag) g[r.tag].push_back(r);
  return g;
}

const std::vector<TraceRecord>& records_of(const Groups& g, uint64_t tag) {
  static const std::vector<TraceRecord> none;
  const auto it = g.find(tag);
  return it == g.end() ? none : it->second;
}

struct Window {
  const TimedCall* call;
  uint64_t from, to;
};

const char* during(const TimedCall& c) {
  switch (c.kind) {
    case TimedCall::floor:
      return "the floor's timing";
    case TimedCall::untouched_baseline:
      return "the untouched baseline";
    case TimedCall::baseline:
      return "the baseline";
    case TimedCall::candidate:
      break;
  }
  return "the submission's call";
}

// One finding of its kind: the first record, and how many more there were.
struct Finding {
  const Window* window = nullptr;
  TraceRecord record;
  bool off_stream = false;
  int more = 0;
  void add(const Window* w, const TraceRecord& r, bool off) {
    if (!window) {
      window = w;
      record = r;
      off_stream = off;
    } else {
      ++more;
    }
  }
};

std::string message(const Finding& f) {
  const TimedCall& c = *f.window->call;
  const std::string what = describe(f.record, f.window->from, f.window->to);
  std::string s = std::string("foreign work during ") + during(c) + ": ";
  if (f.off_stream)
    s += c.label + " put " + what + ", not on the scorer's stream";
  else
    s += "while " + c.label + " was timed, " + what + " also ran, which was not the call's own";
  if (f.more) s += " (and " + std::to_string(f.more) + " more such records)";
  s += f.off_stream ? ". run() must do all its work on the stream it is given; possible causes: a stream of "
                      "the submission's own, a library call given another stream"
                    : ". Possible causes: work the submission left running after its call returned, work "
                      "launched later by a thread of the submission, another process on the device";
  return s;
}

}  // namespace

WindowVerdict judge_windows(const std::vector<TraceRecord>& records, const std::vector<TimedCall>& calls,
                            uint32_t scorer_stream) {
  const Groups groups = group_by_tag(records);
  std::vector<Window> windows;
  for (const TimedCall& c : calls) {
    const CallTrace hold = trace_of_call(records_of(groups, c.tags.hold), c.tags.hold);
    const CallTrace call = trace_of_call(records_of(groups, c.tags.call), c.tags.call);
    if (!hold.records && !call.records) continue;  // nothing of it was recorded: no window to judge
    const uint64_t from = hold.records ? hold.first_start_ns : call.first_start_ns;
    const uint64_t to = std::max(hold.last_end_ns, call.last_end_ns);
    windows.push_back({&c, from, to});
  }
  // Calls are timed one after another: windows sorted by start end in order too.
  std::sort(windows.begin(), windows.end(), [](const Window& a, const Window& b) { return a.from < b.from; });
  Finding found[4];  // by TimedCall::Kind
  for (const TraceRecord& r : records) {
    // The windows this record overlaps: those starting before it ends, back
    // to the first that ended before it started.
    auto it = std::lower_bound(windows.begin(), windows.end(), r.end_ns,
                               [](const Window& w, uint64_t t) { return w.from < t; });
    while (it != windows.begin()) {
      const Window& w = *--it;
      if (w.to <= r.start_ns) break;
      if (r.tag == w.call->tags.hold || r.tag == w.call->tags.call) continue;
      found[w.call->kind].add(&w, r, false);
    }
  }
  for (const Window& w : windows)
    if (w.call->kind == TimedCall::candidate && !w.call->graph)
      for (const TraceRecord& r :
           off_stream_records(records_of(groups, w.call->tags.call), w.call->tags.call, scorer_stream))
        found[TimedCall::candidate].add(&w, r, true);
  // The baseline's guard first: it is what protects the speedup's denominator.
  for (TimedCall::Kind k : {TimedCall::baseline, TimedCall::floor, TimedCall::untouched_baseline, TimedCall::candidate})
    if (found[k].window) return {false, message(found[k])};
  return {};
}

CallFigures call_figures(const std::vector<TraceRecord>& records, const std::vector<TimedCall>& calls) {
  const Groups groups = group_by_tag(records);
  CallFigures f;
  for (const TimedCall& c : calls) {
    const CallTrace t = trace_of_call(records_of(groups, c.tags.call), c.tags.call);
    if (!t.records) return {};
    f.kernel_us.push_back(t.kernel_us);
    f.span_us.push_back(t.span_us);
  }
  return f;
}

}  // namespace scorer
