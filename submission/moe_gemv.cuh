// The simple variant of moe_w4a16: CUDA-core kernels on the weights exactly as
// given (no repacking), the same three launches as the tensor-core path
// (alignment, GEMM 1, GEMM 2), kept as an obviously correct fallback.
//   GEMM 1: one warp per (block, i): gate row i and up row I+i of the block's
//           expert, dotted with each route's X row; h = bf16(silu(gate) * up).
//   GEMM 2: one warp per output element (m, n): the sum over the token's local
//           routes in order j, so it writes every output, zeros included, and
//           needs no workspace beyond h.
// Dot products: each lane takes 32-code chunks (16 bytes) strided by the
// warp, then a xor-butterfly reduction (fixed order: deterministic).
#pragma once

#include <cuda_bf16.h>

#include "submission/moe_align.cuh"
#include "submission/moe_plan.h"

namespace submission::moe {

constexpr int kGemvThreads = 256;

struct GemvArgs {
  const uint8_t* W13;   // [E_local][2I][H/2]
  const uint16_t* S13;  // [E_local][2I][H/128]
  const uint8_t* W2;    // [E_local][H][I/2]
  const uint16_t* S2;   // [E_local][H][I/128]
  const __nv_bfloat16* X;
  const int32_t* topk_ids;
  const float* topk_weights;
  AlignedRoutes routes;
  int block_tokens;
  __nv_bfloat16* h;    // [M*k][I]
  __nv_bfloat16* out;  // [M][H]
  int M, H, I, k, ep_rank, E_local;
};

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// sum over 32 codes of (q - 8) * x, codes low nibble first: code word v holds
// elements 8v..8v+7, the same elements as the 16 bytes of x at uint4 v.
__device__ __forceinline__ float dot32(uint4 codes, const __nv_bfloat16* x) {
  const uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  float s = 0.f;
#pragma unroll
  for (int v = 0; v < 4; ++v) {
    const uint4 xq = xv[v];
    const uint32_t xw[4] = {xq.x, xq.y, xq.z, xq.w};
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const int q = (w[v] >> (4 * e)) & 15;
      const uint32_t pair = xw[e / 2];
      const float xf = __uint_as_float((e & 1) ? pair & 0xffff0000u : pair << 16);
      s = fmaf(float(q - 8), xf, s);
    }
  }
  return s;
}

// One row (K codes, K/128 scales) dotted with a bf16 vector of length K,
// reduced over the warp; every lane gets the result.
__device__ __forceinline__ float row_dot(const uint8_t* codes, const uint16_t* scales, const __nv_bfloat16* x, int K) {
  float s = 0.f;
  for (int c = threadIdx.x & 31; c < K / 32; c += 32) {
    const uint4 q = *reinterpret_cast<const uint4*>(codes + size_t(c) * 16);
    const float scale = __uint_as_float(uint32_t(scales[c / 4]) << 16);
    s = fmaf(scale, dot32(q, x + size_t(c) * 32), s);
  }
  return warp_sum(s);
}

__global__ void __launch_bounds__(kGemvThreads) moe_gemv_up_kernel(const GemvArgs a) {
  const int blocks = *a.routes.num_blocks;
  const long long items = (long long)blocks * a.I;
  const int warps = kGemvThreads / 32;
  for (long long item = (long long)blockIdx.x * warps + (threadIdx.x >> 5); item < items;
       item += (long long)gridDim.x * warps) {
    const int b = int(item / a.I), i = int(item % a.I);
    const size_t e = a.routes.block_expert[b];
    const size_t gate_row = e * 2 * a.I + i, up_row = gate_row + a.I;
    for (int s = 0; s < a.routes.block_routes[b]; ++s) {
      const int r = a.routes.slot_route[b * a.block_tokens + s];
      const __nv_bfloat16* x = a.X + size_t(r / a.k) * a.H;
      const float gate = row_dot(a.W13 + gate_row * (a.H / 2), a.S13 + gate_row * (a.H / kGroup), x, a.H);
      const float up = row_dot(a.W13 + up_row * (a.H / 2), a.S13 + up_row * (a.H / kGroup), x, a.H);
      if ((threadIdx.x & 31) == 0) a.h[size_t(r) * a.I + i] = __float2bfloat16(gate / (1.f + expf(-gate)) * up);
    }
  }
}

__global__ void __launch_bounds__(kGemvThreads) moe_gemv_down_kernel(const GemvArgs a) {
  const long long items = (long long)a.M * a.H;
  const int warps = kGemvThreads / 32;
  for (long long item = (long long)blockIdx.x * warps + (threadIdx.x >> 5); item < items;
       item += (long long)gridDim.x * warps) {
    const int m = int(item / a.H), n = int(item % a.H);
    float sum = 0.f;
    for (int j = 0; j < a.k; ++j) {
      const int r = m * a.k + j;
      const int e = moe_local_expert(a.topk_ids[r], a.ep_rank, a.E_local);
      if (e < 0) continue;
      const size_t row = size_t(e) * a.H + n;
      sum +=
          a.topk_weights[r] * row_dot(a.W2 + row * (a.I / 2), a.S2 + row * (a.I / kGroup), a.h + size_t(r) * a.I, a.I);
    }
    if ((threadIdx.x & 31) == 0) a.out[item] = __float2bfloat16(sum);
  }
}

}  // namespace submission::moe
