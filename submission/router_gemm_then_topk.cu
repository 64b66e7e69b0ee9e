// The router's general path, and its fallback wherever the one-launch kernels do not take the
// shape (T > 16, E > 512 or k > 16): a logits kernel, then a top-k kernel, two launches.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

#include "submission/router_gemm.cuh"
#include "submission/router_plan.h"

namespace submission::router {
namespace {

// Logits of one 16-expert x 16-token tile over all of H. Grid (ceil(T/16), ceil(E/16)). Launch
// bounds as for the fused kernel, so that a batch's loads all issue before its mma.
__global__ void __launch_bounds__(kLogitsWarps * 32, 1)
    router_logits_kernel(const uint4* W, const bf16* X, float* logits, int T, int H, int E, int chunks) {
  constexpr int kTile = kTileE * 16;
  __shared__ float warp_tiles[kLogitsWarps * kTile];
  const int t0 = blockIdx.x * 16, e0 = blockIdx.y * kTileE, warp = threadIdx.x / 32;
  float acc[2][4] = {};
  warp_gemm<2>(W, X, T, H, chunks, e0, t0, warp, chunks, kLogitsWarps, acc);
  store_tile<2>(warp_tiles + warp * kTile, acc);
  __syncthreads();
  for (int o = threadIdx.x; o < kTile; o += blockDim.x) {
    const int e = e0 + o / 16, t = t0 + o % 16;
    if (e < E && t < T) logits[size_t(t) * E + e] = sum_tiles(warp_tiles, kTile, kLogitsWarps, o);
  }
}

// Top k of one token per block: k rounds of a block-wide argmax over the token's keys in shared
// memory (E of them, dynamic). Ties go to the lowest index at every level.
__global__ void __launch_bounds__(kTopkThreads)
    router_topk_kernel(const float* logits, int32_t* ids, float* weights, int E, int k) {
  extern __shared__ uint32_t keys[];
  __shared__ uint32_t warp_best[kTopkThreads / 32];
  __shared__ int warp_at[kTopkThreads / 32];
  const int t = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* row = logits + size_t(t) * E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) keys[e] = order_key(row[e]);
  __syncthreads();

  int32_t* out_ids = ids + size_t(t) * k;
  float* out_w = weights + size_t(t) * k;
  for (int j = 0; j < k; ++j) {
    uint32_t best = 0;
    int at = 0;
    for (int e = threadIdx.x; e < E; e += blockDim.x)
      if (keys[e] > best) best = keys[e], at = e;
    const uint32_t m = __reduce_max_sync(0xffffffffu, best);
    const uint32_t first = __reduce_min_sync(0xffffffffu, best == m ? uint32_t(at) : 0xffffffffu);
    if (lane == 0) warp_best[warp] = m, warp_at[warp] = int(first);
    __syncthreads();
    if (threadIdx.x == 0) {
      uint32_t bm = warp_best[0];
      int ba = warp_at[0];
      for (int w = 1; w < kTopkThreads / 32; ++w)
        if (warp_best[w] > bm || (warp_best[w] == bm && warp_at[w] < ba)) bm = warp_best[w], ba = warp_at[w];
      out_ids[j] = ba;
      out_w[j] = key_value(bm);  // the logit for now; made a weight below
      keys[ba] = 0u;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float vmax = out_w[0];
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += expf(out_w[j] - vmax);
    for (int j = 0; j < k; ++j) out_w[j] = expf(out_w[j] - vmax) / sum;
  }
}

class GemmThenTopkRouter final : public Router {
 public:
  GemmThenTopkRouter(const RouterDims& d, const RouterWeights& w) : d_(d), packed_(direct::pack_tiles(w.Wg, d.E, d.H)) {
    const size_t smem = size_t(d.E) * sizeof(uint32_t);
    int dev = 0, optin = 0;
    check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
    check_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev), "cudaDeviceGetAttribute");
    cudaFuncAttributes fa;
    check_cuda(cudaFuncGetAttributes(&fa, router_topk_kernel), "cudaFuncGetAttributes");
    const size_t smem_max = size_t(optin) - fa.sharedSizeBytes;
    if (smem > smem_max)
      throw std::invalid_argument("router gemm_then_topk: E=" + std::to_string(d.E) + " does not fit in shared memory");
    // The attribute belongs to the kernel, not to this object: set the device's limit, so that
    // routers of any E can run in any order.
    check_cuda(cudaFuncSetAttribute(router_topk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_max)),
               "cudaFuncSetAttribute");
  }

  void run(const RouterIO& io, cudaStream_t stream) override {
    const dim3 grid(ceil_div(d_.T, 16), ceil_div(d_.E, kTileE));
    router_logits_kernel<<<grid, kLogitsWarps * 32, 0, stream>>>(packed_.as<uint4>(), io.X, io.logits, d_.T, d_.H, d_.E,
                                                                 ceil_div(d_.H, kChunkK));
    check_cuda(cudaGetLastError(), "router_logits_kernel launch");
    router_topk_kernel<<<d_.T, kTopkThreads, size_t(d_.E) * sizeof(uint32_t), stream>>>(io.logits, io.topk_ids,
                                                                                        io.topk_weights, d_.E, d_.k);
    check_cuda(cudaGetLastError(), "router_topk_kernel launch");
  }

 private:
  RouterDims d_;
  DeviceMemory packed_;  // Wg, direct::pack_tiles
};

}  // namespace

std::unique_ptr<Router> make_gemm_then_topk_router(const RouterDims& d, const RouterWeights& w) {
  return std::make_unique<GemmThenTopkRouter>(d, w);
}

}  // namespace submission::router
