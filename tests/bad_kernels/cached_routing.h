// A deliberately bad MoE kernel, built only into the GPU test binary: the
// submission's default kernel fed the routing of its first call on every
// later call (against the contract in submission.h), as a kernel that plans
// its work once might. The scorer redraws the routing for every call, so it
// must fail every moe shape; with keep_first = false it copies each call's
// routing afresh, the control that must pass.
#pragma once

#include <memory>

#include "submission/submission.h"

namespace bad_kernels {

std::unique_ptr<submission::Moe> make_cached_routing_moe(const submission::MoeDims& dims,
                                                         const submission::MoeWeights& w, bool keep_first);

}  // namespace bad_kernels
