#include "scorer/shape_child.h"

#include <nlohmann/json.hpp>

#include "scorer/results_json.h"

namespace scorer {

ShapeResult score_shape_in_child(const Shape& s, const RunOptions& opt, const RunMeta& meta,
                                 const std::string& progress_prefix, double timeout_s) {
  const ChildOutcome c = run_in_child(
      [&] { return shape_result_to_json(run_shape(s, opt, meta, progress_prefix)).dump(); }, timeout_s);
  return shape_result_from_child(s, c);
}

ShapeResult shape_result_from_child(const Shape& s, const ChildOutcome& c) {
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
    } catch (const std::exception& e) {
      r.status = "error";
      r.reason = std::string("unreadable result from the shape's process: ") + e.what();
    }
  }
  return r;
}

}  // namespace scorer
