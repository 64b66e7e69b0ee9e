// Replicates: the work list's order and seeds, the assembly of a shape from
// its replicates, and a version-1 results file read as one replicate per shape.
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "scorer/replicates.h"
#include "scorer/results_json.h"
#include "scorer/stats.h"
#include "scorer/workload.h"

using nlohmann::json;
using scorer::ReplicateResult;
using scorer::ShapeResult;

namespace {

scorer::Shape shape(const std::string& name) {
  scorer::Shape s;
  s.name = name;
  s.regime = "r";
  s.op = scorer::Op::dense;
  s.M = 4, s.N = 8, s.K = 16;
  return s;
}

// One item as a child returns it: the shape's facts and one replicate.
ShapeResult item(const scorer::Shape& s, int index, const std::string& status = "ok",
                 std::vector<std::string> flags = {}) {
  ShapeResult r;
  r.shape = s;
  r.variant = "v";
  r.bytes = 100 + index, r.flops = 1000, r.raw_limit_us = 2 + index;
  r.status = status;
  ReplicateResult& p = r.replicates.emplace_back();
  p.index = index;
  p.status = status;
  p.reason = status == "ok" ? "" : "went wrong";
  p.check = {3, 0.01 * index, 0.1, 0.2 * index};
  p.floor_us = 10 * index, p.floor_read_us = 10 * index, p.floor_compute_us = 1;
  p.baseline_us = {20, 21};
  p.candidate_us = {10, 11};
  p.converged = index != 2;
  p.flags = std::move(flags);
  return r;
}

}  // namespace

TEST_CASE("replicates: the work list runs every shape's replicate 1 before any replicate 2") {
  const std::vector<scorer::Shape> shapes = {shape("a"), shape("b"), shape("c")};
  const auto list = scorer::make_work_list(shapes, 3, 7);
  REQUIRE(list.size() == 9);
  for (size_t k = 0; k < list.size(); ++k) {
    CHECK(list[k].shape == k % 3);
    CHECK(list[k].replicate == int(k / 3) + 1);
    CHECK(list[k].seed == scorer::replicate_seed(7, shapes[k % 3], list[k].replicate));
  }
  // Every (shape, replicate) has a seed of its own; replicate 1 keeps the
  // shape's seed of a single-replicate run, and the run's seed moves them all.
  std::set<uint64_t> seeds;
  for (const auto& w : list) seeds.insert(w.seed);
  CHECK(seeds.size() == 9);
  CHECK(scorer::replicate_seed(7, shapes[1], 1) == scorer::shape_seed(7, shapes[1]));
  CHECK(scorer::replicate_seed(8, shapes[1], 2) != scorer::replicate_seed(7, shapes[1], 2));
  CHECK(scorer::make_work_list(shapes, 1, 7).size() == 3);
}

TEST_CASE("replicates: a shape assembled from its replicates") {
  const scorer::Shape s = shape("a");
  SUBCASE("all passed") {
    const ShapeResult r =
        scorer::assemble_shape(s,
                               {item(s, 1, "ok", {"clock moved"}), item(s, 2, "ok", {"clock moved", "throttled"}),
                                item(s, 3, "ok", {"clock moved"})},
                               3);
    CHECK(r.status == "ok");
    CHECK(r.variant == "v");
    REQUIRE(r.replicates.size() == 3);
    for (int i = 0; i < 3; ++i) CHECK(r.replicates[i].index == i + 1);
    CHECK(r.check.checks == 9);
    CHECK(r.check.rel_l2 == doctest::Approx(0.03));
    CHECK(r.check.worst_elem == doctest::Approx(0.6));
    CHECK(r.floor_us == 20);
    CHECK(r.bytes == 102);
    CHECK(r.raw_limit_us == 4);
    CHECK_FALSE(r.converged);  // replicate 2 did not
    CHECK(r.flags == std::vector<std::string>{"clock moved", "replicate 2: throttled"});
  }
  SUBCASE("the first failure gives the shape its status, saying which replicate") {
    const ShapeResult r = scorer::assemble_shape(s, {item(s, 1), item(s, 2, "incorrect")}, 3);
    CHECK(r.status == "incorrect");
    CHECK(r.reason == "replicate 2: went wrong");
    CHECK(r.replicates.size() == 2);
    CHECK_FALSE(r.converged);
  }
  SUBCASE("one replicate: nothing prefixed") {
    const ShapeResult r = scorer::assemble_shape(s, {item(s, 1, "crash", {"x"})}, 1);
    CHECK(r.status == "crash");
    CHECK(r.reason == "went wrong");
    CHECK(r.flags == std::vector<std::string>{"x"});
  }
  SUBCASE("an interrupted run: a flag of every replicate scored still says which") {
    const ShapeResult r = scorer::assemble_shape(s, {item(s, 1, "ok", {"x"})}, 3);
    CHECK(r.flags == std::vector<std::string>{"replicate 1: x"});
  }
}

TEST_CASE("replicates: the statistics read every replicate's trials") {
  const scorer::Shape s = shape("a");
  scorer::RunResult run;
  run.shapes.push_back(scorer::assemble_shape(s, {item(s, 1), item(s, 2), item(s, 3)}, 3));
  run.shapes[0].replicates[2].baseline_us = {40, 42};
  run.shapes[0].replicates[1].untouched_baseline_us = {19, 20, 21};
  scorer::compute_statistics(run);
  CHECK(run.shapes[0].baseline_median_us == 20.5);  // the median of 20.5, 20.5 and 41
  CHECK(run.shapes[0].candidate_median_us == 10.5);
  CHECK(run.shapes[0].untouched_baseline_median_us == 20);
  // The geometric mean of the replicates' median ratios: 1.95, 1.95 and 3.91.
  CHECK(run.shapes[0].speedup == doctest::Approx(std::cbrt(2.0) * (2 + 21.0 / 11) / 2));
}

TEST_CASE("results: a version-1 file reads as one replicate per shape") {
  const scorer::Shape s = shape("a");
  scorer::RunResult run;
  run.meta.seed = 99;
  run.shapes.push_back(scorer::assemble_shape(s, {item(s, 1, "ok", {"f"})}, 1));
  run.shapes[0].replicates[0].graph_baseline_us = {5};
  run.shapes[0].replicates[0].graph_candidate_us = {4};
  scorer::compute_statistics(run);
  json j = scorer::results_to_json(run);
  // What version 1 wrote: the trials on the shape, no replicates, fewer meta fields.
  j["meta"]["schema_version"] = 1;
  for (const char* k : {"replicates", "timer", "mem_clock_mhz_start", "mem_clock_mhz_end", "throttle_reasons", "nvml"})
    j["meta"].erase(k);
  json& sh = j["shapes"][0];
  const json p = sh["replicates"][0];
  for (const char* k : {"baseline_us", "candidate_us", "graph_baseline_us", "graph_candidate_us"}) sh[k] = p[k];
  sh.erase("replicates");
  sh.erase("untouched_baseline_median_us");

  const scorer::RunResult back = scorer::results_from_json(j, "old.json");
  CHECK(back.meta.schema_version == scorer::kResultsSchemaVersion);
  CHECK(back.meta.replicates == 1);
  CHECK(back.meta.timer == "events");
  REQUIRE(back.shapes.size() == 1);
  const ShapeResult& r = back.shapes[0];
  REQUIRE(r.replicates.size() == 1);
  const ReplicateResult& q = r.replicates[0];
  CHECK(q.index == 1);
  CHECK(q.seed == scorer::shape_seed(99, s));
  CHECK(q.status == "ok");
  CHECK(q.baseline_us == std::vector<double>{20, 21});
  CHECK(q.candidate_us == std::vector<double>{10, 11});
  CHECK(q.graph_baseline_us == std::vector<double>{5});
  CHECK(q.floor_us == r.floor_us);
  CHECK(q.flags == std::vector<std::string>{"f"});
  CHECK(q.check.checks == r.check.checks);

  // Its trials are still paired.
  sh["candidate_us"].erase(0);
  CHECK_THROWS_WITH_AS(scorer::results_from_json(j, "old.json"),
                       "old.json: field 'shapes[0].candidate_us': has 1 trials but baseline_us has 2",
                       scorer::InputError);
}

TEST_CASE("replicates: the loop skips a failed shape's later replicates and stops when told") {
  const std::vector<scorer::Shape> shapes = {shape("a"), shape("b"), shape("c")};
  const auto work = scorer::make_work_list(shapes, 3, 1);
  std::vector<std::pair<size_t, int>> scored;
  std::vector<size_t> positions;
  const scorer::ScoreItem score = [&](const scorer::WorkItem& w, size_t k) {
    scored.emplace_back(w.shape, w.replicate);
    positions.push_back(k);
    // b fails in its replicate 2
    return item(shapes[w.shape], w.replicate, w.shape == 1 && w.replicate == 2 ? "timeout" : "ok");
  };
  SUBCASE("whole") {
    const auto out = scorer::score_work_list(shapes, work, 3, score, [] { return false; });
    const std::vector<std::pair<size_t, int>> want = {{0, 1}, {1, 1}, {2, 1}, {0, 2}, {1, 2}, {2, 2}, {0, 3}, {2, 3}};
    CHECK(scored == want);
    CHECK(positions == std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 8});
    REQUIRE(out.size() == 3);
    CHECK(out[0].status == "ok");
    CHECK(out[0].replicates.size() == 3);
    CHECK(out[1].status == "timeout");
    CHECK(out[1].replicates.size() == 2);
    CHECK(out[2].replicates.size() == 3);
  }
  SUBCASE("stopped during the 5th item: it is dropped") {
    const auto out = scorer::score_work_list(shapes, work, 3, score, [&] { return scored.size() == 5; });
    REQUIRE(out.size() == 3);
    CHECK(out[0].replicates.size() == 2);
    CHECK(out[1].replicates.size() == 1);
    CHECK(out[1].status == "ok");
    CHECK(out[2].replicates.size() == 1);
  }
}
