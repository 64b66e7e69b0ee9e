// The guards' pure halves: what the kernel trace says of the timed calls'
// windows (scorer/call_windows.h), the judgements across replicates
// (scorer/shape_judges.h), and how a changed device setting is named
// (scorer/device_state.h).
#include <doctest/doctest.h>

#include "scorer/call_windows.h"
#include "scorer/device_state.h"
#include "scorer/shape_judges.h"

using scorer::TimedCall;
using scorer::TraceRecord;

namespace {

TraceRecord rec(uint32_t stream, uint64_t start, uint64_t end, uint64_t tag, const char* name = "k",
                TraceRecord::Kind kind = TraceRecord::kernel) {
  TraceRecord r;
  r.kind = kind;
  r.stream = stream;
  r.start_ns = start;
  r.end_ns = end;
  r.tag = tag;
  r.name = name;
  return r;
}

TimedCall call(TimedCall::Kind kind, const std::string& label, uint64_t hold, uint64_t tag, bool graph = false) {
  return {kind, label, {hold, tag, true}, graph};
}

// Two paired trials on stream 7, one after the other: flush and hold (tags
// 1, 3, ...), then the call (tags 2, 4, ...); base then candidate.
struct Run {
  std::vector<TraceRecord> records;
  std::vector<TimedCall> calls;
  Run() {
    uint64_t t = 1000, tag = 1;
    for (int trial = 1; trial <= 2; ++trial)
      for (TimedCall::Kind k : {TimedCall::baseline, TimedCall::candidate}) {
        const std::string label = "paired trial " + std::to_string(trial) +
                                  (k == TimedCall::baseline ? "'s baseline call" : "'s submission call");
        records.push_back(rec(7, t, t + 100, tag, "flush"));
        records.push_back(rec(7, t + 100, t + 150, tag, "hold"));
        records.push_back(rec(7, t + 160, t + 400, tag + 1, k == TimedCall::baseline ? "gemm" : "mine"));
        records.push_back(rec(7, t + 410, t + 500, tag + 1, k == TimedCall::baseline ? "gemm2" : "mine2"));
        calls.push_back(call(k, label, tag, tag + 1));
        records.push_back(rec(7, t + 600, t + 700, 0, "check copy", TraceRecord::copy));  // the scorer's, between
        t += 1000;
        tag += 2;
      }
  }
};

}  // namespace

TEST_CASE("call windows: a clean run passes, and each call's figures come from its own records") {
  Run run;
  CHECK(scorer::judge_windows(run.records, run.calls, 7).ok);
  const auto f = scorer::call_figures(run.records, {run.calls[1], run.calls[3]});
  REQUIRE(f.kernel_us.size() == 2);
  CHECK(f.kernel_us[0] == doctest::Approx(0.33));  // 240 + 90 ns
  CHECK(f.span_us[0] == doctest::Approx(0.34));    // 160 .. 500
  // A call with no records of its own: no figures at all, rather than a gap.
  TimedCall lost = run.calls[1];
  lost.tags.call = 99;
  CHECK(scorer::call_figures(run.records, {run.calls[1], lost}).kernel_us.empty());
}

TEST_CASE("call windows: work beside a baseline is foreign, whoever launched it") {
  Run run;
  SUBCASE("an untagged kernel (a thread of the submission) in the baseline's hold") {
    run.records.push_back(rec(9, 3120, 3140, 0, "helper"));
    const auto v = scorer::judge_windows(run.records, run.calls, 7);
    CHECK_FALSE(v.ok);
    CHECK(v.reason.rfind("foreign work during the baseline: while paired trial 2's baseline call was timed, "
                         "kernel 'helper' on stream 9",
                         0) == 0);
    CHECK(v.reason.find("Possible causes:") != std::string::npos);
  }
  SUBCASE("a load the candidate's call launched, still running in the next baseline") {
    run.records.push_back(rec(9, 2450, 3300, 4, "load"));  // tagged by trial 1's candidate call
    const auto v = scorer::judge_windows(run.records, run.calls, 7);
    CHECK_FALSE(v.ok);
    CHECK(v.reason.find("during the baseline: while paired trial 2's baseline call") != std::string::npos);
    CHECK(v.reason.find("kernel 'load' on stream 9 (0.8 us, 0.3 us of it inside the window)") != std::string::npos);
  }
  SUBCASE("a baseline's finding comes first, though a candidate's came earlier") {
    run.records.push_back(rec(9, 1200, 1300, 0, "a"));  // in trial 1's baseline
    run.records.push_back(rec(9, 2100, 2200, 0, "b"));  // in trial 1's candidate
    run.records.push_back(rec(9, 3100, 3200, 0, "c"));  // in trial 2's baseline
    const auto v = scorer::judge_windows(run.records, run.calls, 7);
    CHECK(v.reason.find("during the baseline: while paired trial 1's baseline call was timed, kernel 'a'") !=
          std::string::npos);
    CHECK(v.reason.find("(and 1 more such records)") != std::string::npos);
  }
  SUBCASE("work outside every window is not judged") {
    run.records.push_back(rec(9, 1600, 1900, 0, "between"));
    run.records.push_back(rec(9, 9000, 9900, 0, "after"));
    CHECK(scorer::judge_windows(run.records, run.calls, 7).ok);
  }
  SUBCASE("a floor's window too") {
    run.records.push_back(rec(7, 20000, 20100, 41, "flush"));
    run.records.push_back(rec(7, 20160, 20300, 42, "read"));
    run.calls.push_back(call(TimedCall::floor, "a timed call of the floor", 41, 42));
    run.records.push_back(rec(9, 20250, 20400, 0, "late"));
    const auto v = scorer::judge_windows(run.records, run.calls, 7);
    CHECK(v.reason.rfind("foreign work during the floor's timing: while a timed call of the floor was timed", 0) == 0);
  }
}

TEST_CASE("call windows: the submission's call may only use the scorer's stream") {
  Run run;
  SUBCASE("off-stream work of the call, eager") {
    run.records.push_back(rec(11, 2170, 2300, 4, "side"));  // trial 1's candidate, another stream
    const auto v = scorer::judge_windows(run.records, run.calls, 7);
    CHECK_FALSE(v.ok);
    CHECK(v.reason.rfind("foreign work during the submission's call: paired trial 1's submission call put "
                         "kernel 'side' on stream 11",
                         0) == 0);
    CHECK(v.reason.find("not on the scorer's stream") != std::string::npos);
  }
  SUBCASE("a graph replay may use streams of its own") {
    run.records.push_back(rec(11, 2170, 2300, 4, "branch"));
    run.calls[1].graph = true;
    CHECK(scorer::judge_windows(run.records, run.calls, 7).ok);
  }
  SUBCASE("someone else's work in the candidate's window") {
    run.records.push_back(rec(11, 2170, 2300, 0, "other"));
    const auto v = scorer::judge_windows(run.records, run.calls, 7);
    CHECK(v.reason.rfind("foreign work during the submission's call: while paired trial 1's submission call", 0) == 0);
  }
}

namespace {

scorer::ShapeResult shape_with(const std::vector<std::vector<double>>& base,
                               const std::vector<std::vector<double>>& untouched) {
  scorer::ShapeResult r;
  r.shape.name = "s";
  for (size_t i = 0; i < base.size(); ++i) {
    scorer::ReplicateResult& p = r.replicates.emplace_back();
    p.index = int(i) + 1;
    p.baseline_us = base[i];
    p.candidate_us = std::vector<double>(base[i].size(), 10.0);
    p.untouched_baseline_us = untouched[i];
  }
  return r;
}

}  // namespace

TEST_CASE("baseline disturbed: slower than the untouched baseline beyond the spread and 3%") {
  SUBCASE("2% slower: within 3%") {
    scorer::ShapeResult r = shape_with({{20.4}, {20.4}, {20.4}}, {{20}, {20}, {20}});
    scorer::judge_baseline(r, 0.3);
    CHECK(r.status == "ok");
  }
  SUBCASE("8% slower, untouched spread 1%") {
    scorer::ShapeResult r = shape_with({{21.6, 21.6}, {21.6}, {21.6}}, {{20, 20}, {20.2}, {20.1}});
    scorer::judge_baseline(r, 0.3);
    CHECK(r.status == "baseline disturbed");
    CHECK(r.reason.rfind("the paired baseline's median 21.60 us is 7.5% slower than the untouched baseline's "
                         "20.10 us",
                         0) == 0);
    CHECK(r.reason.find("the bound is 3.0%") != std::string::npos);
    CHECK(r.reason.find("Possible causes:") != std::string::npos);
  }
  SUBCASE("8% slower, but the untouched medians spread 10%") {
    scorer::ShapeResult r = shape_with({{21.6}, {21.6}, {21.6}}, {{19}, {20}, {21}});
    scorer::judge_baseline(r, 0.3);
    CHECK(r.status == "ok");
  }
  SUBCASE("on a short baseline, one empty launch is the bound") {
    // 13 us untouched, 3 us launch: 10% slower is within it (the router's case), 30% is not.
    scorer::ShapeResult r = shape_with({{14.3}, {14.3}, {14.3}}, {{13}, {13}, {13}});
    scorer::judge_baseline(r, 3.0);
    CHECK(r.status == "ok");
    r = shape_with({{16.9}, {16.9}, {16.9}}, {{13}, {13}, {13}});
    scorer::judge_baseline(r, 3.0);
    CHECK(r.status == "baseline disturbed");
    CHECK(r.reason.find("the bound is 23.1%") != std::string::npos);
    CHECK(r.reason.find("one empty launch, 3.00 us") != std::string::npos);
  }
  SUBCASE("faster than the untouched baseline is no disturbance") {
    scorer::ShapeResult r = shape_with({{15}}, {{20}});
    scorer::judge_baseline(r, 0.3);
    CHECK(r.status == "ok");
  }
  SUBCASE("no untouched trials, or a failed shape: left as they are") {
    scorer::ShapeResult r = shape_with({{40}}, {{}});
    scorer::judge_baseline(r, 0.3);
    CHECK(r.status == "ok");
    r = shape_with({{40}}, {{20}});
    r.status = "crash";
    scorer::judge_baseline(r, 0.3);
    CHECK(r.status == "crash");
  }
}

TEST_CASE("timers: the events against the CUPTI span") {
  scorer::ShapeResult r = shape_with({{20, 20, 20}}, {{20}});
  auto spans = [&](double s) {
    r.flags.clear();
    r.replicates[0].candidate_span_us = {s, s, s};
    scorer::judge_timers(r, 2.5);
    return r.flags;
  };
  CHECK(spans(8.0).empty());        // 10 = 8 + ...: under 8 * 1.1 + 2.5 = 11.3
  REQUIRE(spans(6.0).size() == 1);  // 10 > 6 * 1.1 + 2.5 = 9.1
  CHECK(r.flags[0].rfind("timers disagree: the events' median 10.00 us exceeds the CUPTI span's 6.00 us", 0) == 0);
  CHECK(spans(10.4).empty());  // below, within the events' resolution
  REQUIRE(spans(11.0).size() == 1);
  CHECK(r.flags[0].find("is below the CUPTI span's 11.00 us") != std::string::npos);
  r.replicates[0].candidate_span_us.clear();
  r.flags.clear();
  scorer::judge_timers(r, 2.5);
  CHECK(r.flags.empty());  // no CUPTI figures: nothing to compare
}

TEST_CASE("device state: a changed setting is named with both values") {
  const scorer::DeviceState before = {
      {"current device", "0"}, {"persisting-L2 limit", "0 bytes"}, {"stack limit", "1024 bytes"}};
  scorer::DeviceState after = before;
  CHECK(scorer::device_state_change(before, after, "after prepare").empty());
  after[1].value = "31457280 bytes";
  after[2].value = "2048 bytes";
  CHECK(scorer::device_state_change(before, after, "after prepare") ==
        "persisting-L2 limit: 0 bytes before prepare, 31457280 bytes after prepare; stack limit: 1024 bytes "
        "before prepare, 2048 bytes after prepare");
}
