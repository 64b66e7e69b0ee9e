// The scorer against deliberately bad kernels: each must fail its shape with
// the right status and reason, in a process of its own, and a shape after a
// crash must still score. Each scenario runs as a fresh process (this binary
// re-executed with --bad-kernel-child SCENARIO SHAPE) because a crashed CUDA
// context cannot be reused, and fork() after CUDA is initialised is not safe.
//
// Two families: the naive dense kernels of bad_dense.h on a tiny shape,
// checked for correctness only; and the submission's own kernels with a
// misbehaviour added (misbehaving.h), scored with timing on the public
// shapes of shapes.toml, which must be caught by the timing guards.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "scorer/results_json.h"
#include "scorer/shape_child.h"
#include "scorer/shape_judges.h"
#include "scorer/stats.h"
#include "tests/bad_kernels/bad_dense.h"
#include "tests/bad_kernels/misbehaving.h"

namespace {

scorer::Shape bad_shape() {
  scorer::Shape s;
  s.name = "bad_dense_m4";
  s.op = scorer::Op::dense;
  s.regime = "test";
  s.M = 4;
  s.N = 96;
  s.K = 64;
  return s;
}

// The public shapes, read from the checkout the tests run in.
std::vector<scorer::Shape> public_shapes() { return scorer::load_shapes("shapes.toml").shapes; }

scorer::Shape shape_named(const std::string& name) {
  if (name == bad_shape().name) return bad_shape();
  for (const scorer::Shape& s : public_shapes())
    if (s.name == name) return s;
  throw std::runtime_error("no shape " + name);
}

std::vector<scorer::Shape> shapes_of(std::initializer_list<scorer::Op> ops) {
  std::vector<scorer::Shape> out;
  for (const scorer::Shape& s : public_shapes())
    if (std::find(ops.begin(), ops.end(), s.op) != ops.end()) out.push_back(s);
  return out;
}

scorer::ShapeResult run_scenario(const std::string& name, const std::string& shape = bad_shape().name,
                                 double timeout_s = 120) {
  const scorer::ChildOutcome c = scorer::run_program({"/proc/self/exe", "--bad-kernel-child", name, shape}, timeout_s);
  return scorer::shape_result_from_child(shape_named(shape), {}, c);
}

void require_fails(const scorer::ShapeResult& r, const std::string& status, const std::string& reason_part) {
  INFO("shape: " << r.shape.name << ", status: " << r.status << ", reason: " << r.reason);
  CHECK(r.status == status);
  CHECK(r.reason.find(reason_part) != std::string::npos);
}

// The shape fails with one of `statuses`, its reason holding the matching part.
void require_fails_any(const scorer::ShapeResult& r,
                       std::initializer_list<std::pair<const char*, const char*>> statuses) {
  INFO("shape: " << r.shape.name << ", status: " << r.status << ", reason: " << r.reason);
  bool matched = false;
  for (const auto& [status, reason_part] : statuses)
    matched = matched || (r.status == status && r.reason.find(reason_part) != std::string::npos);
  CHECK(matched);
}

// Timing as `scorer run` does it, cut short: one weight set, one check,
// no warm-up (so that timed call N of the candidate is paired trial N), 40 trials.
scorer::RunOptions guard_options() {
  scorer::RunOptions opt;
  opt.sets = 1;
  opt.checks = 1;
  opt.warmup = 0;
  opt.stop.min_trials = opt.stop.max_trials = 40;
  opt.stop.time_cap_s = 100;
  return opt;
}

}  // namespace

// Scores one shape with the named scenario and prints its result.
int bad_kernel_child_main(const std::string& scenario, const std::string& shape_name) {
  scorer::RunOptions opt;
  bad_kernels::Misdeed guarded;
  bad_kernels::Misbehaviour naive;
  // "X_alone": the timing judges alone, with the outputs unchecked and no kernel trace
  const std::string suffix = "_alone";
  const bool judge_alone =
      scenario.size() > suffix.size() && scenario.compare(scenario.size() - suffix.size(), suffix.size(), suffix) == 0;
  const std::string base = judge_alone ? scenario.substr(0, scenario.size() - suffix.size()) : scenario;
  if (bad_kernels::parse_misbehaviour(base, &naive) && shape_name == bad_shape().name) {
    opt.time = false;
    opt.sets = 2;
    opt.checks = 2;
    opt.candidate.variant = "bad_" + scenario;
    opt.candidate.dense = [naive](const submission::DenseDims& d, const submission::DenseWeights& w) {
      return bad_kernels::make_bad_dense(d, w, naive);
    };
  } else if (bad_kernels::parse_guarded(base, &guarded)) {
    opt = guard_options();
    opt.candidate = bad_kernels::misbehaving_candidate(guarded);
    if (judge_alone) {
      opt.trace = false;
      opt.judge_outputs = false;
    }
  } else {
    std::fprintf(stderr, "unknown scenario %s for shape %s\n", scenario.c_str(), shape_name.c_str());
    return 2;
  }
  const scorer::ShapeResult r = scorer::run_shape(shape_named(shape_name), opt, scorer::RunMeta{}, {}, "[bad]");
  std::cout << scorer::shape_result_to_json(r).dump() << std::flush;
  // Not through exit(): a waiter thread may still be inside a CUDA call.
  _exit(0);
}

TEST_CASE("a correct kernel passes (control for the bad ones)") {
  const scorer::ShapeResult r = run_scenario("none");
  INFO("reason: " << r.reason);
  CHECK(r.status == "ok");
  CHECK(r.check.checks >= 4);
}

TEST_CASE("an illegal address fails the shape as a crash") {
  require_fails(run_scenario("illegal_address"), "crash", "cudaErrorIllegalAddress");
}

TEST_CASE("a trap fails the shape as a crash, and the next shape still scores") {
  require_fails(run_scenario("trap"), "crash", "cudaError");
  CHECK(run_scenario("none").status == "ok");
}

TEST_CASE("a hang is killed at the timeout and fails the shape") {
  require_fails(run_scenario("hang", bad_shape().name, 20), "timeout", "killed");
}

TEST_CASE("work on a stream of its own is caught") { require_fails(run_scenario("own_stream"), "incorrect", ""); }

TEST_CASE("a cached result replayed on new inputs is caught") {
  require_fails(run_scenario("cached_result"), "incorrect", "");
}

TEST_CASE("an output element left unwritten is caught by the poison") {
  require_fails(run_scenario("partial_write"), "incorrect", "not finite");
}

TEST_CASE("a write past the end of the output is caught by the guard") {
  require_fails(run_scenario("write_past_end"), "incorrect", "guard");
}

TEST_CASE("a device synchronisation inside run() is caught") {
  require_fails(run_scenario("device_sync"), "error", "cannot be captured");
}

// Issue 40: the baseline guarded, on every public dense and pooler shape.
TEST_CASE("guards: the real kernels pass with no flag on every dense and pooler shape") {
  for (const scorer::Shape& s : shapes_of({scorer::Op::dense, scorer::Op::pooler})) {
    scorer::ShapeResult r = run_scenario("real", s.name);
    scorer::judge_baseline(r, 0);
    INFO("shape: " << s.name << ", status: " << r.status << ", reason: " << r.reason);
    CHECK(r.status == "ok");
    REQUIRE(r.replicates.size() == 1);
    const scorer::ReplicateResult& p = r.replicates[0];
    std::string flags;
    for (const std::string& f : r.flags) flags += f + "; ";
    INFO("flags: " << flags);
    CHECK(r.flags.empty());
    CHECK(p.candidate_us.size() == 40);
    CHECK(p.untouched_baseline_us.size() == 40);
    CHECK(p.candidate_span_us.size() == 40);  // the second timer ran (CUPTI loads)
    MESSAGE(s.name << ": baseline untouched " << scorer::median(p.untouched_baseline_us) << " us, paired "
                   << scorer::median(p.baseline_us) << " us; submission events " << scorer::median(p.candidate_us)
                   << " us, CUPTI span " << scorer::median(p.candidate_span_us) << " us, kernels "
                   << scorer::median(p.candidate_kernel_us) << " us");
  }
}

// The load left running after a call is seen by whichever guard meets it
// first: CUPTI, in the next timed window (its kernels outlive the call), or
// the bounded wait before a baseline call (escaped work). Likewise the late
// thread's kernels land in the baseline's window or in the next call's.
TEST_CASE("guards: each bad kernel fails with its reason on every dense and pooler shape") {
  for (const scorer::Shape& s : shapes_of({scorer::Op::dense, scorer::Op::pooler})) {
    INFO("scenario background_load");
    require_fails_any(run_scenario("background_load", s.name),
                      {{"foreign work", "foreign work during"}, {"escaped work", "the device was still busy"}});
    INFO("scenario late_thread");
    require_fails_any(run_scenario("late_thread", s.name), {{"foreign work", "foreign work during"}});
    INFO("scenario persisting_l2");
    require_fails(run_scenario("persisting_l2", s.name), "changed device state", "persisting-L2 limit: ");
    INFO("scenario wrong_in_timed_37");
    require_fails(run_scenario("wrong_in_timed_37", s.name), "incorrect",
                  "paired trial 37: the submission's output is wrong");
  }
}

TEST_CASE("guards: a result wrong in timed trial 1, 2 or the last keeps its reason and a readable result") {
  for (int trial : {1, 2, 40}) {
    const scorer::ShapeResult r = run_scenario("wrong_in_timed_" + std::to_string(trial), "dense_m32_o");
    const std::string where = "paired trial " + std::to_string(trial) + ": the submission's output is wrong: ";
    require_fails(r, "incorrect", where + "output off at element 0");
    CHECK(r.reason.find("relative L2 error") != std::string::npos);
    REQUIRE(r.replicates.size() == 1);
    // The trials before the wrong one stay, paired.
    CHECK(r.replicates[0].candidate_us.size() == size_t(trial - 1));
    CHECK(r.replicates[0].baseline_us.size() == size_t(trial - 1));
  }
}

// Issue 34: on small shapes, where the raw-limit check could not fire, the
// floor check alone (no output checks, no kernel trace) catches a kernel that
// works outside the events, and one that replays a cached result with one
// copy kernel where the floor is well above a launch. On the smallest shapes
// such a copy should cost one launch and one DRAM trip, about their floor:
// there the fresh-input checks catch it ("a cached result replayed on new inputs
// is caught"); what the floor check says is printed.
TEST_CASE("impossible: side-stream and cached-result kernels are caught by the floor check alone") {
  std::vector<std::string> small;
  for (const scorer::Shape& s : shapes_of({scorer::Op::router})) small.push_back(s.name);
  small.push_back("pooler_b8_h1024");
  small.push_back("pooler_b16_h1024");
  for (const std::string& name : small) {
    INFO("scenario side_stream_alone");
    require_fails(run_scenario("side_stream_alone", name), "impossible", "is below 90% of the floor");
    const scorer::ShapeResult r = run_scenario("cached_result_alone", name);
    MESSAGE("cached_result_alone on " << name << ": " << r.status << " " << r.reason.substr(0, 120));
  }
  for (const char* name : {"pooler_b8_h4096", "dense_m32_o", "dense_m32_down"}) {
    INFO("scenario cached_result_alone");
    require_fails(run_scenario("cached_result_alone", name), "impossible", "is below 90% of the floor");
  }
}
