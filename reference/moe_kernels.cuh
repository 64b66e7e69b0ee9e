// Kernels and checks shared by the MoE reference and baselines (reference/moe*.cu).
#pragma once

#include <cuda_bf16.h>

#include <algorithm>

#include "reference/cublas_util.h"
#include "reference/reference.h"

namespace reference::moe {

using submission::kMoeGroupSize;

constexpr int kThreads = 256;
constexpr int kAlignThreads = 1024;  // the baselines' one-block alignment

// The operand pointers of a baseline's two GEMM stages, one device array per
// operand (A weights, B activations, C outputs), each indexed by GEMM entry.
enum Operand { kA1, kB1, kC1, kA2, kB2, kC2, kOperands };

__device__ inline float load(float x) { return x; }
__device__ inline float load(bf16 x) { return __bfloat162float(x); }
__device__ inline void store(float* p, float v) { *p = v; }
__device__ inline void store(bf16* p, float v) { *p = __float2bfloat16_rn(v); }

// packed [rows, cols/2] int4 codes, scales [rows, cols/128] -> out [rows, cols],
// w = (q - 8) * s. One thread per byte: its two codes are adjacent elements of
// one row, low nibble first, and (128 being even) share one scale.
template <class T>
__global__ void dequant_int4(const uint8_t* __restrict__ packed, const bf16* __restrict__ scales, size_t rows, int cols,
                             T* __restrict__ out) {
  const size_t bytes = rows * (cols / 2);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < bytes; i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / (cols / 2);
    const int col = int(2 * i - row * cols);
    const float s = __bfloat162float(scales[row * (cols / kMoeGroupSize) + col / kMoeGroupSize]);
    const uint8_t b = packed[i];
    store(out + 2 * i, float(int(b & 0xf) - 8) * s);
    store(out + 2 * i + 1, float(int(b >> 4) - 8) * s);
  }
}

// The weights dequantized once, in prepare (untimed), on the legacy stream,
// which the caller synchronises before any other stream reads them.
template <class T>
detail::DeviceArray<T> dequantize(const uint8_t* packed, const bf16* scales, size_t rows, int cols) {
  detail::DeviceArray<T> out = detail::device_array<T>(rows * cols);
  const size_t blocks = std::min<size_t>((rows * cols / 2 + kThreads - 1) / kThreads, size_t(1) << 20);
  dequant_int4<<<unsigned(blocks), kThreads>>>(packed, scales, rows, cols, out.get());
  REF_CHECK_LAUNCH();
  return out;
}

// dst[i, :] = X[slot_token[i], :] (zeros where slot_token[i] < 0, a padding
// slot), one block per row i < *rows (all the grid's rows when rows is null),
// 16 bytes at a time (H % 128 == 0). T = bf16.
template <class T>
__global__ void gather_rows(const T* __restrict__ X, const int32_t* __restrict__ slot_token, int H, T* __restrict__ dst,
                            const int* __restrict__ rows = nullptr) {
  if (rows && int(blockIdx.x) >= *rows) return;
  const int token = slot_token[blockIdx.x];
  uint4* d = reinterpret_cast<uint4*>(dst + size_t(blockIdx.x) * H);
  const uint4* src = reinterpret_cast<const uint4*>(X + size_t(token < 0 ? 0 : token) * H);
  for (int c = threadIdx.x; c < H * int(sizeof(T)) / 16; c += blockDim.x) d[c] = token < 0 ? uint4{} : src[c];
}

// h[i, :] = bf16(silu(gate) * up), with gate_up[i] = (gate[0..I), up[0..I)),
// for rows i < *rows (all the grid's rows when rows is null). The fp32
// reference keeps h in fp32 storage, but with the bf16 value.
template <class T>
__global__ void silu_mul(const T* __restrict__ gate_up, int I, T* __restrict__ h,
                         const int* __restrict__ rows = nullptr) {
  if (rows && int(blockIdx.x) >= *rows) return;
  const T* row = gate_up + size_t(blockIdx.x) * 2 * I;
  for (int i = threadIdx.x; i < I; i += blockDim.x) {
    const float g = load(row[i]), u = load(row[I + i]);
    store(h + size_t(blockIdx.x) * I + i, __bfloat162float(__float2bfloat16_rn(g / (1.0f + expf(-g)) * u)));
  }
}

// out[m, :] = bf16(sum over local routes j of w[m, j] * y[slot(m, j), :]),
// summed in fp32 in j order; zeros for a token with no local route. (A
// template, T = bf16, so that each file including this has its own.)
template <class T>
__global__ void combine(const T* __restrict__ y, const int32_t* __restrict__ slot_of_route,
                        const float* __restrict__ topk_weights, int k, int H, T* __restrict__ out) {
  const int m = blockIdx.x;
  for (int c = threadIdx.x; c < H; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int slot = slot_of_route[m * k + j];
      if (slot >= 0) acc += topk_weights[m * k + j] * load(y[size_t(slot) * H + c]);
    }
    store(out + size_t(m) * H + c, acc);
  }
}

// A warp per local expert walks the routes 32 at a time and gives each of the
// expert's routes the next slot from s_start[e], in (token, j) order: a ballot
// ranks the matches of each step, so slots follow route order without atomics.
// It stops once the expert's routes are all placed.
__device__ inline void rank_routes(const int32_t* __restrict__ topk_ids, int routes, int k, int first, int E,
                                   const int* s_count, const int* s_start, int32_t* __restrict__ slot_of_route,
                                   int32_t* __restrict__ slot_token) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int e = warp; e < E; e += warps) {
    int next = s_start[e];
    const int end = next + s_count[e];
    for (int r0 = 0; r0 < routes && next < end; r0 += 32) {
      const int r = r0 + lane;
      const bool match = r < routes && topk_ids[r] - first == e;
      const unsigned mask = __ballot_sync(0xffffffffu, match);
      if (match) {
        const int slot = next + __popc(mask & ((1u << lane) - 1));
        slot_of_route[r] = slot;
        slot_token[slot] = r / k;
      }
      next += __popc(mask);
    }
  }
}

// Counts the routes of each local expert into s_count (zeroed first); a route
// to another rank's expert gets slot -1.
__device__ inline void count_routes(const int32_t* __restrict__ topk_ids, int routes, int first, int E, int* s_count,
                                    int32_t* __restrict__ slot_of_route) {
  for (int e = threadIdx.x; e < E; e += blockDim.x) s_count[e] = 0;
  __syncthreads();
  for (int r = threadIdx.x; r < routes; r += blockDim.x) {
    const int e = topk_ids[r] - first;
    if (e >= 0 && e < E)
      atomicAdd(&s_count[e], 1);
    else
      slot_of_route[r] = -1;
  }
  __syncthreads();
}

inline void check_dims(const submission::MoeDims& d) {
  detail::require(d.M >= 1 && d.H >= kMoeGroupSize && d.H % kMoeGroupSize == 0 && d.I >= kMoeGroupSize &&
                      d.I % kMoeGroupSize == 0 && d.k >= 1 && d.k <= d.E_global && d.E_local >= 1 &&
                      d.E_global % d.E_local == 0 && d.ep_rank >= 0 && d.ep_rank < d.E_global / d.E_local,
                  "moe_w4a16: needs M >= 1, H and I positive multiples of 128, 1 <= k <= E_global, "
                  "E_global % E_local == 0, 0 <= ep_rank < E_global / E_local");
}

// The baselines' alignment counts the local experts in one block's shared memory.
inline void check_baseline_dims(const submission::MoeDims& d) {
  check_dims(d);
  detail::require(moe_align_smem_bytes(d.E_local) <= kBaselineSmemBytes,
                  "moe baseline: E_local too large for one block's counters");
}

}  // namespace reference::moe
