// The small-M engine's split-K kernels (variants splitk_mma, splitk_bulk_mma, narrow_mma), kept
// for comparison: weights packed per block and streamed through a shared-memory ring of stages
// (per-thread cp.async, or one bulk copy per stage), split over K across blocks where the model
// (small_m_splitk_model.h) asks. All lost to the direct kernel on the pooler and to cuBLASLt on
// dense (docs/perf-log.md, rounds 7 and 33).
//
// The k permutation. The MMA sums over k, so any permutation of k applied to both operands gives
// the same product: per 32-wide k step, thread (g = lane/4, t = lane%4) holds physical k =
// 8t..8t+7, one 16-byte load of a weight row and one of an activation row, whose words 0,1 are
// the thread's k-pairs {2t, 2t+8} of the first k16 MMA and words 2,3 those of the second (PTX
// ISA, "Matrix Fragments for mma.m16n8k16"). Both operands use the same map: no shuffles, no
// ldmatrix.
//
// Split-K: partial sums go to an fp32 workspace; the last block of a tile to finish (elected by
// a self-resetting atomic counter) adds them in split order and runs the epilogue: one launch,
// deterministic, graph-replay safe.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "dev/async_copy.cuh"
#include "submission/mma_bf16.cuh"
#include "submission/small_m_direct.cuh"

namespace submission::small_m {

// ------------------------------------------------------------------ tiling
// A block owns kRows weight rows (its tile) and streams a range of k stages.
// Warps sit kWarpRows side by side over rows and kWarpK side by side over k;
// the kWarpK partial sums are added in shared memory at the end.
template <int TilesPerWarp, int WarpRows, int WarpK, int Substeps, int Stages>
struct TileConfig {
  static constexpr int kTilesPerWarp = TilesPerWarp;  // m16 row tiles per warp
  static constexpr int kWarpRows = WarpRows;
  static constexpr int kWarpK = WarpK;
  static constexpr int kSubsteps = Substeps;  // 32-wide k steps per warp per stage
  static constexpr int kStages = Stages;      // depth of the cp.async ring
  static constexpr int kThreads = 32 * WarpRows * WarpK;
  static constexpr int kRows = 16 * TilesPerWarp * WarpRows;
  static constexpr int kStageK = 32 * Substeps * WarpK;
  static constexpr int kWChunks = 2 * TilesPerWarp * Substeps;  // 16-byte W chunks per thread per stage
  static constexpr int kWStageChunks = kWChunks * kThreads;
  static constexpr int kXChunksPerRow = kStageK / 8;
  // The activation swizzle flips bit 2 of the chunk index inside a row.
  static_assert(Substeps % 2 == 0, "activation rows need at least 8 chunks per stage");
  static_assert(Stages >= 2, "a ring needs two slots");
};

// Wide: 4 warps x 2 m16 tiles = 128 rows, 64 k per stage (16 KB of W), 5 stages.
// 128 rows per block keep activation traffic at M/128 of the weight traffic.
using WideConfig = TileConfig<2, 4, 1, 2, 5>;
// Narrow: one m16 tile, 8 warps splitting 512 k per stage (16 KB of W), 3 stages.
// For small weights: many blocks with full K each, no cross-block reduction.
using NarrowConfig = TileConfig<1, 1, 8, 2, 3>;

// Index of a thread's W chunk within a stage: m16 tile tp, k step s, row half h
// (h = 0: rows g, h = 1: rows g + 8).
template <class C>  // a TileConfig
__host__ __device__ constexpr int w_chunk(int tp, int s, int h) {
  return (tp * C::kSubsteps + s) * 2 + h;
}

struct ChunkOrigin {
  int row;  // weight row within the block tile
  int k;    // first of the 8 k within the stage
};

// Where chunk q of thread tid comes from; the packing below and the MMA loop
// both follow it.
template <class C>  // a TileConfig
__host__ __device__ constexpr ChunkOrigin w_chunk_origin(int q, int tid) {
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int wr = warp % C::kWarpRows, wk = warp / C::kWarpRows;
  const int h = q % 2, s = (q / 2) % C::kSubsteps, tp = q / (2 * C::kSubsteps);
  return {wr * 16 * C::kTilesPerWarp + tp * 16 + g + 8 * h, wk * 32 * C::kSubsteps + 32 * s + 8 * t};
}

// Chunk c (8 k) of activation row r in a stage's shared-memory tile. Thread
// (g, t) of a warp reads chunk 4s + t of row 8j + g: without the swizzle rows g
// and g + 1 hit the same banks. Flipping bit 2 of c on odd rows puts each
// quarter-warp's eight 16-byte reads on eight distinct bank groups.
template <class C>  // a TileConfig
__host__ __device__ constexpr int x_slot(int r, int c) {
  return r * C::kXChunksPerRow + (c ^ ((r & 1) << 2));
}

// The activation chunk thread (wk, t) reads at k step s.
template <class C>  // a TileConfig
__host__ __device__ constexpr int x_chunk(int wk, int s, int t) {
  return (wk * C::kSubsteps + s) * 4 + t;
}

// Accumulator element i (0..3) of m16 tile tp for lane (g, t): its weight row, per the PTX
// C-fragment layout (c0, c1: row g; c2, c3: row g + 8); its token is acc_token's.
template <class C>  // a TileConfig
__host__ __device__ constexpr int acc_row(int wr, int tp, int g, int i) {
  return wr * 16 * C::kTilesPerWarp + tp * 16 + g + 8 * (i >> 1);
}

template <class C>  // a TileConfig
constexpr size_t smem_bytes(int ng) {
  return size_t(C::kStages) * (C::kWStageChunks + 8 * ng * C::kXChunksPerRow) * 16;
}

// Rows: where activation row m starts (nullptr past the end), so that the
// pooler's gather is just another row lookup: row(m), or in two steps,
// row(m, lookup(m)), where lookup issues any load the row needs without
// waiting for it (the direct kernel requests its first weights in between).
// Epi: the output side.
template <class Rows, class Epi>  // as the kernel's
struct Params {
  const uint4* w;  // packed weights [n_tiles][k_stages][kWChunks][kThreads]
  Rows rows;
  Epi epi;
  int M, N, K;
  int k_stages, splits;
  int n_tiles;
  float4* partials;    // [m_chunks][n_tiles][splits][fragments][32], splits > 1
  unsigned* counters;  // [m_chunks][n_tiles], zero between launches
};

// Bulk: weight stages by cp.async.bulk + mbarrier (one per ring slot) instead
// of per-thread cp.async; activations always use cp.async groups.
template <class C,          // a TileConfig
          int TokenGroups,  // groups of 8 tokens per block: 1..4
          bool Bulk,        // weight stages by cp.async.bulk + mbarrier, else per-thread cp.async
          class Rows,       // where token row m starts (submission/small_m_rows.cuh)
          class Epi>        // bias and store of an output
__global__ void __launch_bounds__(C::kThreads) mma_gemm_kernel(const Params<Rows, Epi> p) {
  constexpr int kT = C::kThreads, kTP = C::kTilesPerWarp, kS = C::kStages;
  constexpr int kXRows = 8 * TokenGroups;
  constexpr int kXStage = kXRows * C::kXChunksPerRow;
  constexpr int kFrags = C::kWarpRows * kTP * TokenGroups;  // float4 per lane in a block's partial
  extern __shared__ __align__(16) uint4 smem[];
  uint4* const ws = smem;
  uint4* const xs = smem + kS * C::kWStageChunks;
  __shared__ const bf16* xrow[kXRows];
  __shared__ int is_last;
  __shared__ uint64_t full[Bulk ? kS : 1];  // slot's weights landed; phase flips once per use

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const int wr = warp % C::kWarpRows, wk = warp / C::kWarpRows;
  const int tile = blockIdx.x / p.splits, split = blockIdx.x % p.splits;
  const int m0 = blockIdx.y * kXRows;
  const int st0 = int(int64_t(split) * p.k_stages / p.splits);
  const int n_st = int(int64_t(split + 1) * p.k_stages / p.splits) - st0;

  const uint4* const wblock = p.w + (size_t(tile) * p.k_stages + st0) * C::kWStageChunks;
  const uint4* const wsrc = wblock + tid;
  auto load_w = [&](int slot, int st) {
    if constexpr (Bulk) {
      if (tid == 0) {
        constexpr unsigned kBytes = C::kWStageChunks * 16;
        mbar_arrive_expect_tx(&full[slot], kBytes);
        bulk_copy(ws + slot * C::kWStageChunks, wblock + size_t(st) * C::kWStageChunks, kBytes, &full[slot]);
      }
    } else {
      uint4* dst = ws + slot * C::kWStageChunks + tid;
      const uint4* src = wsrc + size_t(st) * C::kWStageChunks;
#pragma unroll
      for (int q = 0; q < C::kWChunks; ++q) cp_async16(dst + q * kT, src + q * kT, 16);
    }
  };
  auto load_x = [&](int slot, int st) {
    const int k0 = (st0 + st) * C::kStageK;
    uint4* dst = xs + slot * kXStage;
#pragma unroll
    for (int i = tid; i < kXStage; i += kT) {
      const int r = i / C::kXChunksPerRow, c = i % C::kXChunksPerRow;
      const int k = k0 + 8 * c;
      const bf16* row = xrow[r];
      const bool ok = row != nullptr && k < p.K;
      cp_async16(dst + x_slot<C>(r, c), ok ? static_cast<const void*>(row + k) : p.w, ok ? 16 : 0);
    }
  };

  if constexpr (Bulk) {
    // Only thread 0 issues and arms the barriers; everyone else first waits
    // on them after the __syncthreads below, which orders the init before.
    if (tid == 0) {
      for (int s = 0; s < kS; ++s) mbar_init(&full[s], 1);
      mbar_init_fence();
    }
  }
  // Weights first: they do not depend on the row lookup, which for the pooler
  // is a dependent global load. These join cp.async group 0, which is harmless.
  for (int s = 0; s < kS - 1; ++s)
    if (s < n_st) load_w(s, s);

  float bias[kTP][2] = {};
  if constexpr (Epi::kHasBias) {
#pragma unroll
    for (int tp = 0; tp < kTP; ++tp)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int n = tile * C::kRows + acc_row<C>(wr, tp, g, 2 * h);
        if (n < p.N) bias[tp][h] = p.epi.bias(n);
      }
  }
  if (tid < kXRows) xrow[tid] = p.rows.row(m0 + tid);
  __syncthreads();
  for (int s = 0; s < kS - 1; ++s) {
    if (s < n_st) load_x(s, s);
    cp_async_commit();  // one group per stage, empty or not, keeps the wait count exact
  }

  float acc[kTP][TokenGroups][4] = {};
  int read_slot = 0, write_slot = kS - 1;
  for (int it = 0; it < n_st; ++it) {
    cp_async_wait<kS - 2>();  // this thread's copies of stage `it` have landed
    // Stage `it` sits in slot it % kS, used for the (it / kS)-th time.
    if constexpr (Bulk) mbar_wait(&full[read_slot], unsigned(it / kS) & 1u);
    __syncthreads();  // everyone's have; and slot write_slot is no longer being read
    if constexpr (Bulk) {
      if (tid == 0) fence_proxy_async_smem();
    }
    if (it + kS - 1 < n_st) {
      load_w(write_slot, it + kS - 1);
      load_x(write_slot, it + kS - 1);
    }
    cp_async_commit();

    const uint4* wsl = ws + read_slot * C::kWStageChunks + tid;
    const uint4* xsl = xs + read_slot * kXStage;
#pragma unroll
    for (int s = 0; s < C::kSubsteps; ++s) {
      uint4 b[TokenGroups];
#pragma unroll
      for (int j = 0; j < TokenGroups; ++j) b[j] = xsl[x_slot<C>(8 * j + g, x_chunk<C>(wk, s, t))];
#pragma unroll
      for (int tp = 0; tp < kTP; ++tp) {
        const uint4 lo = wsl[w_chunk<C>(tp, s, 0) * kT];  // row g
        const uint4 hi = wsl[w_chunk<C>(tp, s, 1) * kT];  // row g + 8
#pragma unroll
        for (int j = 0; j < TokenGroups; ++j) {
          mma_bf16(acc[tp][j], lo.x, hi.x, lo.y, hi.y, b[j].x, b[j].y);
          mma_bf16(acc[tp][j], lo.z, hi.z, lo.w, hi.w, b[j].z, b[j].w);
        }
      }
    }
    read_slot = read_slot + 1 == kS ? 0 : read_slot + 1;
    write_slot = write_slot + 1 == kS ? 0 : write_slot + 1;
  }
  cp_async_wait<0>();

  // Warps that split k inside the block meet in shared memory (the ring is
  // free now); warp column 0 adds the columns in order and carries on alone.
  if constexpr (C::kWarpK > 1) {
    __syncthreads();
    float4* red = reinterpret_cast<float4*>(smem);
#pragma unroll
    for (int tp = 0; tp < kTP; ++tp)
#pragma unroll
      for (int j = 0; j < TokenGroups; ++j)
        red[(((wk * C::kWarpRows + wr) * kTP + tp) * TokenGroups + j) * 32 + lane] =
            make_float4(acc[tp][j][0], acc[tp][j][1], acc[tp][j][2], acc[tp][j][3]);
    __syncthreads();
    if (wk == 0) {
#pragma unroll
      for (int tp = 0; tp < kTP; ++tp)
#pragma unroll
        for (int j = 0; j < TokenGroups; ++j)
          for (int w = 1; w < C::kWarpK; ++w) {
            const float4 v = red[(((w * C::kWarpRows + wr) * kTP + tp) * TokenGroups + j) * 32 + lane];
            acc[tp][j][0] += v.x;
            acc[tp][j][1] += v.y;
            acc[tp][j][2] += v.z;
            acc[tp][j][3] += v.w;
          }
    }
  }
  const bool owner = wk == 0;

  if (p.splits > 1) {
    const size_t tile_slot = size_t(blockIdx.y) * p.n_tiles + tile;
    float4* const part = p.partials + tile_slot * p.splits * kFrags * 32;
    if (owner) {
#pragma unroll
      for (int tp = 0; tp < kTP; ++tp)
#pragma unroll
        for (int j = 0; j < TokenGroups; ++j)
          __stcg(&part[(size_t(split) * kFrags + (wr * kTP + tp) * TokenGroups + j) * 32 + lane],
                 make_float4(acc[tp][j][0], acc[tp][j][1], acc[tp][j][2], acc[tp][j][3]));
    }
    __threadfence();  // partials visible device-wide before the arrival is counted
    __syncthreads();
    if (tid == 0) {
      // Wraps to 0 on the last arrival, so the counter is clean for the next
      // launch or graph replay without a reset.
      const unsigned prev = atomicInc(&p.counters[tile_slot], unsigned(p.splits - 1));
      is_last = prev == unsigned(p.splits - 1);
    }
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    if (owner) {
      // Fixed order 0..splits-1 whoever arrives last: bit-identical results.
#pragma unroll
      for (int tp = 0; tp < kTP; ++tp)
#pragma unroll
        for (int j = 0; j < TokenGroups; ++j) {
          const size_t f = size_t((wr * kTP + tp) * TokenGroups + j) * 32 + lane;
          const float4 mine = make_float4(acc[tp][j][0], acc[tp][j][1], acc[tp][j][2], acc[tp][j][3]);
          float4 sum = split == 0 ? mine : __ldcg(&part[f]);
          for (int sp = 1; sp < p.splits; ++sp) {
            const float4 v = sp == split ? mine : __ldcg(&part[size_t(sp) * kFrags * 32 + f]);
            sum.x += v.x;
            sum.y += v.y;
            sum.z += v.z;
            sum.w += v.w;
          }
          acc[tp][j][0] = sum.x;
          acc[tp][j][1] = sum.y;
          acc[tp][j][2] = sum.z;
          acc[tp][j][3] = sum.w;
        }
    }
  }

  if (!owner) return;
#pragma unroll
  for (int tp = 0; tp < kTP; ++tp)
#pragma unroll
    for (int j = 0; j < TokenGroups; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int n = tile * C::kRows + acc_row<C>(wr, tp, g, i);
        const int m = m0 + acc_token(j, t, i);
        if (n < p.N && m < p.M) p.epi.store(m, n, acc[tp][j][i] + bias[tp][i >> 1]);
      }
}

// Packs W[N, K] into the kernel's order, zero-padded to whole tiles and stages.
template <class C>  // a TileConfig
__global__ void pack_weights_kernel(const bf16* __restrict__ W, int N, int K, int k_stages, uint4* __restrict__ packed,
                                    size_t chunks) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < chunks; i += size_t(gridDim.x) * blockDim.x) {
    const int tid = int(i % C::kThreads);
    const int q = int(i / C::kThreads % C::kWChunks);
    const size_t tile_stage = i / C::kWStageChunks;
    const int st = int(tile_stage % k_stages);
    const size_t tile = tile_stage / k_stages;
    const ChunkOrigin o = w_chunk_origin<C>(q, tid);
    const size_t n = tile * C::kRows + o.row;
    const int k = st * C::kStageK + o.k;
    packed[i] = n < size_t(N) && k < K ? *reinterpret_cast<const uint4*>(W + n * K + k) : make_uint4(0, 0, 0, 0);
  }
}

}  // namespace submission::small_m
