// The plans of moe_w4a16's dev variants: each the default's plan (submission/moe_plan.h) or
// mma's with the changes its name says, run on the kernels dev/moe_w4a16.cu picks. The upload's
// plan_moe knows only "default" and "gemv"; plan_moe_variant takes every name.
#pragma once

#include <string>
#include <vector>

#include "submission/moe_plan.h"

namespace submission::moe {

// The most CTAs per SM the CTA-copies kernel (dev/moe_mma_cta_copies.cuh) of blocks of `tokens`
// routes and units of `tiles` 16-row tiles may use. The kernels are latency-bound (ncu: DRAM
// 14-38% of peak, half the issue slots empty), so the mma_occ variants trade pipeline depth for
// warps: 6 CTAs cap a thread at 85 registers, which the kernels of blocks of 8 and 16 routes
// fit, and need 3 stages in a sixth of the SM's shared memory. That won where it fit a GEMM into
// one wave of CTAs and lost elsewhere (docs/perf-log.md, round 3).
constexpr int mma_max_ctas_per_sm(int tokens, int tiles) {
  return tokens <= 16 && mma_stages(tokens, tiles, 6) >= 3 ? 6 : 3;
}

// The warp-specialised kernels (submission/moe_mma_ws.cuh) run 4 CTAs per SM only with blocks
// of 8 routes, whose MMA warps fit the 96 registers a thread gets there; 3 otherwise (mma_ws4,
// docs/perf-log.md, rounds 13, 23 and 31).
constexpr int ws_max_ctas_per_sm(int tokens) { return tokens == 8 ? 4 : 3; }

// Stages per chunk of GEMM 1 on the work queue (mma_queue). At 8 every shape ran slower than at
// 16, most by 6-8%: each chunk's end stops its MMA warps for the post and count (round 48).
constexpr int kQueueChunkStages = 16;

// The dev variants' names, in the order `scorer list` shows them (after the upload's).
const std::vector<std::string>& dev_moe_plan_names();

// The plan of any variant: the upload's (plan_moe) for "default" and "gemv", else the dev
// variant's. Throws std::invalid_argument for invalid dims, an unknown name, or a variant that
// cannot run the shape (mma_rows128 with blocks of 64). sm_count feeds the model.
MoePlan plan_moe_variant(const MoeDims& d, const std::string& variant, int sm_count);

}  // namespace submission::moe
