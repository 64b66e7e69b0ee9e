#include "scorer/shape_child.h"

#include <stdlib.h>

#include <chrono>
#include <nlohmann/json.hpp>

#include "scorer/results_json.h"

namespace scorer {

ShapeResult score_shape_in_child(const Shape& s, const ReplicateSpec& spec, const RunOptions& opt, const RunMeta& meta,
                                 const std::string& label, double timeout_s, const std::string& visible) {
  const auto t0 = std::chrono::steady_clock::now();
  const ChildOutcome c = run_in_child(
      [&] {
        ReplicateSpec here = spec;
        if (!visible.empty()) {  // before the child's first CUDA call
          setenv("CUDA_VISIBLE_DEVICES", visible.c_str(), 1);
          here.gpu = 0;
        }
        return shape_result_to_json(run_shape(s, opt, meta, here, label)).dump();
      },
      timeout_s);
  ShapeResult r = shape_result_from_child(s, spec, c);
  r.variant = opt.candidate.variant;
  r.replicates[0].seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

ShapeResult shape_result_from_child(const Shape& s, const ReplicateSpec& spec, const ChildOutcome& c) {
  ShapeResult r;
  r.shape = s;
  if (c.kind == ChildOutcome::interrupted) {
    r.status = "error";
    r.reason = "interrupted before it finished";
  } else if (c.kind == ChildOutcome::timed_out) {
    r.status = "timeout";
    r.reason = "hung: " + c.detail;
  } else if (c.kind == ChildOutcome::crashed) {
    r.status = "crash";
    r.reason = "the shape's process died: " + c.detail;
  } else {
    try {
      r = shape_result_from_json(nlohmann::json::parse(c.output), "result of shape " + s.name);
      if (r.replicates.size() != 1)
        throw InputError("result of shape " + s.name + ": field 'replicates': has " +
                         std::to_string(r.replicates.size()) + " replicates (expected the one scored)");
    } catch (const std::exception& e) {
      r = ShapeResult{};
      r.shape = s;
      r.status = "error";
      r.reason = std::string("unreadable result from the shape's process: ") + e.what();
    }
  }
  if (r.replicates.empty()) {  // the child gave none: the replicate is its outcome
    ReplicateResult p;
    p.status = r.status;
    p.reason = r.reason;
    r.replicates.push_back(p);
  }
  ReplicateResult& p = r.replicates[0];
  p.index = spec.index;
  p.seed = spec.seed;
  p.gpu = spec.gpu;
  return r;
}

}  // namespace scorer
