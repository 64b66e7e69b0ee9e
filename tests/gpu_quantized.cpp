// Precision that cannot be bought: kernels that quantize their weights in
// prepare() (tests/bad_kernels/quantized_*.cu) fail every public dense and
// pooler shape through the scorer's own checks, while the same kernel with
// the exact weights passes.
#include <doctest/doctest.h>

#include <string>

#include "scorer/shape_runner.h"
#include "tests/bad_kernels/quantized.h"

namespace {

scorer::ShapeResult check_shape(const scorer::Shape& s, quant::Scheme scheme) {
  scorer::RunOptions opt;
  opt.time = false;  // correctness only, in this process (the kernels neither crash nor hang)
  opt.sets = 1;
  opt.checks = 2;
  opt.candidate.variant = std::string("quantized_") + quant::name(scheme);
  if (s.op == scorer::Op::dense)
    opt.candidate.dense = [scheme](const submission::DenseDims& d, const submission::DenseWeights& w) {
      return bad_kernels::make_quantized_dense(d, w, scheme);
    };
  else
    opt.candidate.pooler = [scheme](const submission::PoolerDims& d, const submission::PoolerWeights& w) {
      return bad_kernels::make_quantized_pooler(d, w, scheme);
    };
  return scorer::run_shape(s, opt, scorer::RunMeta{}, {}, "[quantized]");
}

}  // namespace

TEST_CASE("weights quantized in prepare fail every public dense and pooler shape; exact weights pass") {
  const scorer::ShapesFile f = scorer::load_shapes("shapes.toml");
  int shapes = 0;
  for (const scorer::Shape& s : f.shapes) {
    if (s.op != scorer::Op::dense && s.op != scorer::Op::pooler) continue;
    ++shapes;
    CAPTURE(s.name);
    const scorer::ShapeResult exact = check_shape(s, quant::Scheme::none);
    CHECK_MESSAGE(exact.status == "ok", exact.reason);
    for (quant::Scheme q : quant::kQuantized) {
      CAPTURE(quant::name(q));
      const scorer::ShapeResult r = check_shape(s, q);
      INFO("status " << r.status << ", reason: " << r.reason);
      CHECK(r.status == "incorrect");
      CHECK((r.reason.find("relative L2") != std::string::npos || r.reason.find("off at") != std::string::npos));
    }
  }
  CHECK(shapes == 8);
}
