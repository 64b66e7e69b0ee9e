// The pure halves of the second timer and the clock reader: what a timed
// window's records say (scorer/kernel_trace.h), and the names of NVML's
// clock event reasons (scorer/gpu_clocks.h).
#include <doctest/doctest.h>

#include "scorer/gpu_clocks.h"
#include "scorer/kernel_trace.h"

namespace {

scorer::TraceRecord rec(scorer::TraceRecord::Kind k, uint32_t stream, uint64_t start, uint64_t end, uint64_t tag,
                        const char* name = "k") {
  scorer::TraceRecord r;
  r.kind = k;
  r.stream = stream;
  r.start_ns = start;
  r.end_ns = end;
  r.tag = tag;
  r.name = name;
  return r;
}

}  // namespace

TEST_CASE("a call's trace sums its own kernels and spans its own records only") {
  using R = scorer::TraceRecord;
  const std::vector<R> records = {
      rec(R::set, 7, 100, 200, 1),       // the scorer's flush, another tag
      rec(R::kernel, 7, 1000, 3000, 2),  // the call: two kernels with a gap, and a copy
      rec(R::copy, 7, 3100, 3400, 2),   rec(R::kernel, 7, 3500, 4500, 2),
      rec(R::kernel, 9, 2000, 9000, 0),  // someone else's
  };
  const scorer::CallTrace c = scorer::trace_of_call(records, 2);
  CHECK(c.records == 3);
  CHECK(c.kernel_us == doctest::Approx(3.0));  // 2 us + 1 us; the copy is not a kernel
  CHECK(c.span_us == doctest::Approx(3.5));    // 1000 .. 4500 ns
  CHECK(c.first_start_ns == 1000);
  CHECK(c.last_end_ns == 4500);
  CHECK(scorer::trace_of_call(records, 5).records == 0);
  CHECK(scorer::trace_of_call(records, 5).span_us == 0);
}

TEST_CASE("foreign records are those overlapping the window with no allowed tag") {
  using R = scorer::TraceRecord;
  const std::vector<R> records = {
      rec(R::kernel, 7, 1000, 2000, 2),  // the call itself
      rec(R::kernel, 9, 500, 1100, 0),   // untagged, overlaps the start
      rec(R::kernel, 9, 2500, 2600, 0),  // untagged, after the window
      rec(R::kernel, 9, 100, 900, 0),    // untagged, before it
      rec(R::kernel, 9, 1500, 1600, 3),  // tagged by another call (a candidate's left-over)
      rec(R::set, 7, 1900, 2100, 1),     // the scorer's own, allowed
  };
  const auto f = scorer::foreign_records(records, {2, 1}, 1000, 2000);
  REQUIRE(f.size() == 2);
  CHECK(f[0].start_ns == 500);
  CHECK(f[1].tag == 3);
  CHECK(scorer::foreign_records(records, {2, 1, 3}, 1000, 2000).size() == 1);
  CHECK(scorer::foreign_records(records, {2, 1}, 3000, 4000).empty());
}

TEST_CASE("records a call put on another stream are off-stream") {
  using R = scorer::TraceRecord;
  const std::vector<R> records = {rec(R::kernel, 7, 0, 10, 2), rec(R::kernel, 8, 0, 10, 2),
                                  rec(R::kernel, 8, 0, 10, 4)};
  const auto off = scorer::off_stream_records(records, 2, 7);
  REQUIRE(off.size() == 1);
  CHECK(off[0].stream == 8);
}

TEST_CASE("a record is described with its kind, name, stream and overlap") {
  using R = scorer::TraceRecord;
  const std::string d = scorer::describe(rec(R::kernel, 13, 1000, 42200, 0, "load"), 7200, 100000);
  CHECK(d == "kernel 'load' on stream 13 (41.2 us, 35.0 us of it inside the window)");
  CHECK(scorer::describe(rec(R::copy, 2, 0, 1000, 0), 5000, 6000) ==
        "copy on stream 2 (1.0 us, 0.0 us of it inside the window)");
}

TEST_CASE("clock event reasons are named, and only power and heat count as throttling") {
  CHECK(scorer::throttle_reason_names(0) == "none");
  CHECK(scorer::throttle_reason_names(0x1 | 0x40) == "gpu_idle, hw_thermal_slowdown");
  CHECK(scorer::throttle_reason_names(1ull << 40) == "0x10000000000");
  CHECK(scorer::throttling_reasons(0x1 | 0x2 | 0x100) == 0);
  CHECK(scorer::throttling_reasons(0x1 | 0x4) == 0x4);
  CHECK(scorer::throttling_reasons(0x8 | 0x20 | 0x80) == (0x8 | 0x20 | 0x80));
}
