// The MoE routing is redrawn for every call (scorer/workload.h): a kernel that
// keeps its first call's routing (tests/bad_kernels/cached_routing.cpp) fails
// every public moe shape, uniform, zipf and trace alike, while the same
// wrapper copying each call's routing passes.
#include <doctest/doctest.h>

#include <string>

#include "scorer/shape_runner.h"
#include "tests/bad_kernels/cached_routing.h"

namespace {

scorer::ShapeResult check_shape(const scorer::Shape& s, bool keep_first) {
  scorer::RunOptions opt;
  opt.time = false;  // correctness only, in this process (the kernels neither crash nor hang)
  opt.sets = 1;
  opt.checks = 2;
  opt.candidate.variant = keep_first ? "cached_routing" : "copied_routing";
  opt.candidate.moe = [keep_first](const submission::MoeDims& d, const submission::MoeWeights& w) {
    return bad_kernels::make_cached_routing_moe(d, w, keep_first);
  };
  return scorer::run_shape(s, opt, scorer::RunMeta{}, {}, "[routing]");
}

}  // namespace

TEST_CASE("a kernel that keeps its first call's routing fails every public moe shape") {
  const scorer::ShapesFile f = scorer::load_shapes("shapes.toml");
  int shapes = 0;
  for (const scorer::Shape& s : f.shapes) {
    if (s.op != scorer::Op::moe_w4a16) continue;
    ++shapes;
    CAPTURE(s.name);
    const scorer::ShapeResult control = check_shape(s, false);
    CHECK_MESSAGE(control.status == "ok", control.reason);
    const scorer::ShapeResult r = check_shape(s, true);
    INFO("status " << r.status << ", reason: " << r.reason);
    CHECK(r.status == "incorrect");
    // Caught at the first call after the one it kept: the second check.
    CHECK(r.reason.find("(inputs 2)") != std::string::npos);
  }
  CHECK(shapes == 14);
}
