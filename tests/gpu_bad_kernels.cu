// The scorer against deliberately bad kernels: each must fail its shape with
// the right status and reason, in a process of its own, and a shape after a
// crash must still score. Each scenario runs as a fresh process (this binary
// re-executed with --bad-kernel-child NAME) because a crashed CUDA context
// cannot be reused, and fork() after CUDA is initialised is not safe.
#include <doctest/doctest.h>

#include <cstdio>
#include <iostream>

#include "scorer/results_json.h"
#include "scorer/shape_child.h"
#include "tests/bad_kernels/bad_dense.h"

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

scorer::ShapeResult run_scenario(const std::string& name, double timeout_s = 60) {
  const scorer::ChildOutcome c =
      scorer::run_program({"/proc/self/exe", "--bad-kernel-child", name}, timeout_s);
  return scorer::shape_result_from_child(bad_shape(), {}, c);
}

void require_fails(const scorer::ShapeResult& r, const std::string& status, const std::string& reason_part) {
  INFO("status: " << r.status << ", reason: " << r.reason);
  CHECK(r.status == status);
  CHECK(r.reason.find(reason_part) != std::string::npos);
}

}  // namespace

// Scores the bad shape with the named misbehaviour and prints its result.
int bad_kernel_child_main(const std::string& scenario) {
  bad_kernels::Misbehaviour m;
  if (!bad_kernels::parse_misbehaviour(scenario, &m)) {
    std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  scorer::RunOptions opt;
  opt.time = false;
  opt.sets = 2;
  opt.checks = 2;
  opt.candidate.variant = "bad_" + scenario;
  opt.candidate.dense = [m](const submission::DenseDims& d, const submission::DenseWeights& w) {
    return bad_kernels::make_bad_dense(d, w, m);
  };
  const scorer::ShapeResult r = scorer::run_shape(bad_shape(), opt, scorer::RunMeta{}, {}, "[bad]");
  std::cout << scorer::shape_result_to_json(r).dump() << std::flush;
  return 0;
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
  require_fails(run_scenario("hang", 20), "timeout", "killed");
}

TEST_CASE("work on a stream of its own is caught") {
  require_fails(run_scenario("own_stream"), "incorrect", "");
}

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
