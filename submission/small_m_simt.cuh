// The small-M engine's CUDA-core path: the op's simplest correct fallback (variant `simt`).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace submission::small_m {

// CUDA-core reference path: one warp per weight row, 8 tokens at a time, fp32
// FMA, lane-strided 16-byte loads and a butterfly reduction. Slow (it re-reads
// W once per 8 tokens) but obviously right; kept as the fallback. Four blocks
// per SM keep enough warps' loads in flight.
template <class Rows,  // where token row m starts (small_m_rows.cuh)
          class Epi>   // bias and store of an output (small_m_rows.cuh)
__global__ void __launch_bounds__(256, 4)
    simt_gemm_kernel(const bf16* __restrict__ W, const Rows rows, const Epi epi, int M, int N, int K) {
  const int lane = threadIdx.x % 32;
  const int n = blockIdx.x * 8 + threadIdx.x / 32;
  if (n >= N) return;
  const bf16* w = W + size_t(n) * K;
  for (int m0 = 0; m0 < M; m0 += 8) {
    const bf16* x[8];
    float acc[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      x[i] = rows.row(m0 + i);
      acc[i] = 0.0f;
    }
    for (int k = lane * 8; k < K; k += 32 * 8) {
      const uint4 wv = *reinterpret_cast<const uint4*>(w + k);
      const __nv_bfloat162* wp = reinterpret_cast<const __nv_bfloat162*>(&wv);
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        if (!x[i]) continue;
        const uint4 xv = *reinterpret_cast<const uint4*>(x[i] + k);
        const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(&xv);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 a = __bfloat1622float2(wp[e]), b = __bfloat1622float2(xp[e]);
          acc[i] = fmaf(a.x, b.x, acc[i]);
          acc[i] = fmaf(a.y, b.y, acc[i]);
        }
      }
    }
    float mine = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      float v = acc[i];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == i) mine = v;
    }
    if (lane < 8 && m0 + lane < M) epi.store(m0 + lane, n, mine + (Epi::kHasBias ? epi.bias(n) : 0.0f));
  }
}

}  // namespace submission::small_m
