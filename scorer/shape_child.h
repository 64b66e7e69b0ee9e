// One replicate of one shape in a process of its own: the child scores it
// (run_shape) and sends its result back as JSON; how the child ended (a
// result, a crash, a hang killed at the timeout) becomes the replicate's
// result. `scorer run` uses the forked form; the scorer's own tests run
// deliberately bad kernels through run_program and judge the outcome with
// shape_result_from_child.
#pragma once

#include <string>

#include "scorer/child_process.h"
#include "scorer/shape_runner.h"

namespace scorer {

// A ShapeResult holding exactly one replicate (see run_shape), whatever the
// child did; the replicate's seconds are the child's wall time. With
// `visible` set, the child sees that GPU alone (CUDA_VISIBLE_DEVICES) and
// scores on it as device 0, while the replicate records spec.gpu.
ShapeResult score_shape_in_child(const Shape& s, const ReplicateSpec& spec, const RunOptions& opt, const RunMeta& meta,
                                 const std::string& label, double timeout_s, const std::string& visible = "");

ShapeResult shape_result_from_child(const Shape& s, const ReplicateSpec& spec, const ChildOutcome& c);

}  // namespace scorer
