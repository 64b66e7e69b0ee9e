// The router's plan and the pieces its designs share on the host: the shape limits of the
// one-launch kernels, a call's arguments, the fused plan (one wave of blocks, each 16-expert tile
// split over H), and the router over a plain grid that the tagged (router_tagged.cu) and the
// staged kernels (dev/router.cu) run on.
//
//   logits = X . Wg^T in fp32, softmax, top-k (ties to the lower id), renormalised weights.
//
// Fast path (T <= kFusedMaxT, E <= kFusedMaxE, k <= kFusedMaxK): one launch, the default
// router_tagged.cu. General path: gemm_then_topk (router_gemm_then_topk.cu), two launches.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "submission/cuda_check.h"
#include "submission/device_memory.h"
#include "submission/direct_mma.cuh"
#include "submission/submission.h"

namespace submission::router {

constexpr int kTileE = 16;  // experts per tile: the mma's M side
using direct::kChunkK;
constexpr int kPlanChunks = 2;  // chunks per warp the fused plan aims at, more warps past that
// Chunks a warp loads before it multiplies. The fused plan gives a warp one batch, so all of its
// weights are requested at once; past kMaxWarps (and in the logits kernel) the batches are
// double-buffered (direct::warp_gemm), two in flight.
constexpr int kBatch = kPlanChunks;
constexpr int kMaxWarps = 16;      // per fused block
constexpr int kMaxSplits = 8;      // the portable cluster size
constexpr int kFusedMaxT = 16;     // two n8 mma tiles; one top-k warp per token
constexpr int kFusedMaxE = 512;    // 16 experts per lane in a top-k warp
constexpr int kFusedMaxK = 16;     // each of the k rounds is a step of the serial tail
constexpr int kLogitsWarps = 8;    // gemm_then_topk, first kernel
constexpr int kTopkThreads = 256;  // gemm_then_topk, second kernel

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// A call's arguments, as the one-launch kernels take them.
struct FusedArgs {
  const uint4* W;  // Wg packed (direct::pack_tiles)
  const bf16* X;
  float* logits;
  int32_t* ids;
  float* weights;
  // fused_cluster: final logits [T][32*LaneKeys]; fused_slots: one partial per split [splits][T][32*LaneKeys].
  // The padding past E is zero from prepare on, and is never selected.
  float* ws;
  unsigned* counter;  // blocks finished; wraps back to 0 as the last block takes it
  int T, H, E, k;
  int chunks;  // ceil(H / kChunkK)
};

// Whether the one-launch kernels take the shape.
bool fused_fits(const RouterDims& d);

// The fused kernels' shape model. One wave of blocks: each 16-expert tile is split over H as many
// ways as the SMs allow (at most a portable cluster, at most one split per chunk), so that every
// SM streams about E*H*2 / SMs bytes, all requested at once. Warps: enough that each has at most
// kPlanChunks chunks (one batch, few registers, a short mma chain), at least one per token for
// the top-k, and at most kMaxWarps; past that a warp loops over batches.
struct FusedPlan {
  int m_tiles, chunks, splits, warps;
  int lane_keys;    // experts per lane of a top-k warp (the kernels' LaneKeys)
  int token_tiles;  // n8 token tiles per block (the kernels' TokenTiles)
};
FusedPlan plan_fused(const RouterDims& d, int sm_count);

// A call's arguments: the router's, with this call's inputs and outputs.
inline FusedArgs with_io(FusedArgs a, const RouterIO& io) {
  a.X = io.X;
  a.logits = io.logits;
  a.ids = io.topk_ids;
  a.weights = io.topk_weights;
  return a;
}

// A router whose kernel takes Args (a FusedArgs f and its own workspace) on the fused plan's
// grid, without clusters: the tagged and staged routers. The derived constructor fills args_.
template <class Args>  // the kernel's argument struct, with the call's FusedArgs in .f
class PlainGridRouter : public Router {
 public:
  void run(const RouterIO& io, cudaStream_t stream) override {
    Args a = args_;
    a.f = with_io(a.f, io);
    kernel_<<<dim3(plan_.splits, plan_.m_tiles), plan_.warps * 32, 0, stream>>>(a);
    check_cuda(cudaGetLastError(), name_);
  }

 protected:
  PlainGridRouter(const RouterDims& d, const RouterWeights& w, const FusedPlan& pl, void (*kernel)(Args),
                  const char* name)
      : packed_(direct::pack_tiles(w.Wg, d.E, d.H)), plan_(pl), kernel_(kernel), name_(name) {}

  DeviceMemory packed_;  // Wg, direct::pack_tiles
  FusedPlan plan_;
  void (*kernel_)(Args);
  const char* name_;  // of the launch, for its error
  Args args_;
};

// The uploaded designs (router.cu picks): the tagged one-launch router where fused_fits, and the
// two-launch gemm_then_topk anywhere shared memory holds a token's E logits.
std::unique_ptr<Router> make_tagged_router(const RouterDims& d, const RouterWeights& w, const FusedPlan& pl);
std::unique_ptr<Router> make_gemm_then_topk_router(const RouterDims& d, const RouterWeights& w);

}  // namespace submission::router
