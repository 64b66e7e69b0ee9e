// The router's device pieces shared by its kernels (router_tagged.cu, router_gemm_then_topk.cu,
// dev/router.cu): order keys, a warp's share of a 16-expert tile by tensor cores, and the sums of
// the warps' tiles in shared memory. Every sum is taken in a fixed order and no float atomics
// are used, so logits, ids and weights are bit-identical from run to run.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "submission/direct_mma.cuh"
#include "submission/router_plan.h"

namespace submission::router {

// A float's bits mapped so that unsigned order is float order, -0 turned into +0 first so that
// the two zeros tie as they do in the reference. No finite logit maps to 0, which therefore
// marks an expert that is taken or does not exist.
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f + 0.0f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float key_value(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// One warp's share of a tile: experts [e0, e0 + 16) x tokens [t0, t0 + 8*TokenTiles), summed over the
// 32-wide k chunks first, first + stride, ... below end, in that order (direct::warp_gemm). W is
// Wg packed by direct::pack_tiles (chunks per tile: ceil(H/32)): a warp's load is 512 contiguous
// bytes, where rows of Wg as they are gave it 64 bytes of each of 8 rows. Rows past E, tokens
// past T and k past H read as zeros.
template <int TokenTiles>  // n8 token tiles of a warp
__device__ __forceinline__ void warp_gemm(const uint4* W, const bf16* X, int T, int H, int chunks, int e0, int t0,
                                          int first, int end, int stride, float (&acc)[TokenTiles][4]) {
  const direct::PackedWeights w{W + size_t(e0 / kTileE) * chunks * 64};
  const auto token_rows = [&](const bf16*(&x)[TokenTiles]) {
    const int g = (threadIdx.x % 32) / 4;
#pragma unroll
    for (int n = 0; n < TokenTiles; ++n) {
      const int tok = t0 + n * 8 + g;
      x[n] = tok < T ? X + size_t(tok) * H : nullptr;
    }
  };
  direct::warp_gemm<TokenTiles, kBatch>(w, token_rows, H, first, end, stride, acc);
}

// Stores a warp's accumulators as tile[expert_in_tile * Stride + token_in_tile].
template <int TokenTiles,               // n8 token tiles of the warp's accumulators
          int Stride = 8 * TokenTiles>  // floats from one expert's row to the next
__device__ __forceinline__ void store_tile(float* tile, const float (&acc)[TokenTiles][4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
#pragma unroll
  for (int n = 0; n < TokenTiles; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) tile[(g + 8 * (i / 2)) * Stride + n * 8 + 2 * q + i % 2] = acc[n][i];
}

// Element o of the sum of nwarps consecutive tiles, in warp order. Every read is issued before
// the first add: a loop over nwarps compiled to batches of 8, 4 and 1 reads, three shared-memory
// latencies on the serial path after the last weight byte.
__device__ __forceinline__ float sum_tiles(const float* tiles, int tile_size, int nwarps, int o) {
  float v[kMaxWarps];
#pragma unroll
  for (int w = 0; w < kMaxWarps; ++w) v[w] = w < nwarps ? tiles[w * tile_size + o] : 0.0f;
  float s = v[0];
#pragma unroll
  for (int w = 1; w < kMaxWarps; ++w)
    if (w < nwarps) s += v[w];
  return s;
}

// The warps' tiles of a block whose sum is taken token-major (slot[t * 16 + e], the staged and
// tagged kernels): that sum reads a column of the tiles, so their rows are padded to 8 TokenTiles + 1
// words, which puts a column's 16 experts in 16 banks (8 TokenTiles words put them in 2 or 4).
template <int TokenTiles>  // n8 token tiles of a warp
struct ColumnTiles {
  static constexpr int kStride = 8 * TokenTiles + 1;
  static constexpr int kSize = kTileE * kStride;  // floats per warp
  __device__ static void store(float* tiles, const float (&acc)[TokenTiles][4]) {
    store_tile<TokenTiles, kStride>(tiles + (threadIdx.x / 32) * kSize, acc);
  }
  // Expert e, token t of the sum over nwarps tiles, in warp order.
  __device__ static float sum(const float* tiles, int nwarps, int e, int t) {
    return sum_tiles(tiles, kSize, nwarps, e * kStride + t);
  }
};

}  // namespace submission::router
