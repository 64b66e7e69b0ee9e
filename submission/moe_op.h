// The moe_w4a16 op as the submission and dev/ build it: a plan (moe_plan.h) and the two GEMM
// kernels it names, picked by a function of the plan, so that the upload compiles only the
// kernels its own variants run (moe_gemm_kernels.cu) and dev/ adds the others.
#pragma once

#include <memory>

#include "submission/moe_plan.h"
#include "submission/submission.h"

namespace submission::moe {

struct MmaGemmArgs;  // moe_gemm_stage.cuh

// One GEMM's kernel and the launch facts its instantiation fixes.
struct MmaKernel {
  void (*fn)(MmaGemmArgs) = nullptr;
  int smem = 0;
  int tile_rows = 0;
  int threads = 0;
  bool stage_packed = false;  // reads the weights stage-packed (tile_group_words), else apart
};

// The kernel of GEMM 1 (down = false) or GEMM 2 for a plan, or none (fn == nullptr).
using PickKernel = MmaKernel (*)(const MoePlan& plan, bool down);

// The kernels the upload holds: the warp-specialised ones at 3 CTAs per SM on unit-packed
// weights, GEMM 2 also on its work queue, which is every plan of "default". Throws
// std::invalid_argument for a plan that would need a kernel no block size has.
MmaKernel pick_upload_kernel(const MoePlan& plan, bool down);

// The op on `plan`, its GEMMs' kernels from `pick` (unused for the gemv plan).
std::unique_ptr<Moe> make_moe_op(const MoeDims& d, const MoeWeights& w, const MoePlan& plan, int sms, PickKernel pick);

}  // namespace submission::moe
