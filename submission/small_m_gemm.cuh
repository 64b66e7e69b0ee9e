// Small-M bf16 GEMM engine shared by dense and pooler:
//
//   out[m, n] = Epi( sum_k X[m, k] * W[n, k] )        any M, N; K % 8 == 0
//
// The regime is M <= 32 tokens against a large weight: the op is a single
// streaming read of W, and everything here serves that read.
//
// The default kernel is `direct_rotated` (direct_gemm_kernel<NG, RT, kPacked, kOneBatch>):
// up to three 16-row tiles of W per block over all of K, loaded straight into
// MMA fragments (direct_mma.cuh) from a copy of W packed chunk-major (chunk c of
// every tile side by side, so that the blocks read one region of W at a time),
// each token load feeding every tile's MMAs; no shared-memory ring, no split-K.
// Each block takes K's chunks in an order of its own (slot s holds chunk
// s ^ (8 (block mod 4)), direct::TileStrides), its copy packed in that order,
// so that the blocks in step read one region of W but four groups of token
// chunks, not all the same one (docs/perf-log.md, round 89).
// It is the pooler's default, and dense's where its blocks fit one wave
// (direct_tiles_one_wave). `direct_interleaved` is the same kernel with no
// rotation, `direct_tiles` that on
// a tile-major copy (each tile one contiguous run), `direct_packed` keeps one
// tile per block, `direct` reads W as it is. The other kernels (wide, narrow:
// packed weights through a cp.async or bulk-copy ring, split-K where the model
// asks; `cluster`: one wave of clusters that split K and add their partials
// through distributed shared memory, cluster_gemm.cuh) are named variants kept
// for comparison; all lost to cuBLASLt on dense, as did direct and
// direct_packed.
//
//   * Swap-AB tensor cores. mma.sync.m16n8k16 with 16 weight rows on the MMA's M
//     side and 8 tokens on its N side, so no MMA lane is wasted at M = 8..32.
//     fp32 accumulation.
//   * Weights repacked once in prepare into the order the kernel consumes them:
//     every block streams one contiguous range of the packed copy (stage after
//     stage of 16 KB), each thread receiving exactly its own MMA fragments. The
//     packed copy is padded with zeros to whole tiles and stages, so the hot loop
//     has no bounds checks on W and DRAM sees long sequential bursts.
//   * A cp.async ring of kStages stages (16-byte copies, L1 bypassed) keeps
//     (kStages - 1) x 16 KB of weights in flight per block; with two blocks per
//     SM that is 128 KB per SM, well above the ~32 KB Little's law asks for at
//     4.3 TB/s. Activations ride in the same ring (they are tiny and L2-resident
//     after the first touch).
//   * Or (Bulk) one cp.async.bulk per 16 KB weight stage, completing on an
//     mbarrier: the copy engine tracks the bytes, not per-thread LDGSTS slots.
//     The wide cp.async kernel measured ~23 GB/s per SM whether it ran one or
//     two blocks per SM (64 or 128 KB requested in flight), below the ~32 GB/s
//     per SM that 4.2 TB/s needs: the SM's outstanding 16-byte copies, not the
//     ring depth, looked like the limit. A stage is contiguous in the packed
//     copy and in shared memory, so one bulk copy moves exactly what the
//     per-thread copies did.
//   * Split-K across blocks where the row tiles alone cannot fill the machine.
//     Partial sums go to an fp32 workspace; the last block of a tile to finish
//     (elected by a self-resetting atomic counter) adds them in split order and
//     runs the epilogue: one launch, deterministic, graph-replay safe.
//
// The k permutation. The MMA sums over k, so any permutation of k applied to
// both operands gives the same product. We choose, per 32-wide k step, that
// thread (g = lane/4, t = lane%4) holds physical k = 8t..8t+7: one 16-byte load
// of a weight row and one of an activation row. Words 0,1 of that load are the
// thread's k-pairs {2t, 2t+8} of the first k16 MMA and words 2,3 those of the
// second (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point
// type": A regs (row g, k 2t..) (row g+8, k 2t..) (row g, k 2t+8..)
// (row g+8, k 2t+8..); B regs (k 2t.., n g) (k 2t+8.., n g)). Both operands use
// the same map, so no shuffles and no ldmatrix are needed.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "submission/async_copy.cuh"
#include "submission/cluster_gemm.cuh"
#include "submission/cuda_check.h"
#include "submission/device_memory.h"
#include "submission/direct_mma.cuh"
#include "submission/submission.h"

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
  static constexpr int kSubsteps = Substeps;          // 32-wide k steps per warp per stage
  static constexpr int kStages = Stages;              // depth of the cp.async ring
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
template <class C>
__host__ __device__ constexpr int w_chunk(int tp, int s, int h) {
  return (tp * C::kSubsteps + s) * 2 + h;
}

struct ChunkOrigin {
  int row;  // weight row within the block tile
  int k;    // first of the 8 k within the stage
};

// Where chunk q of thread tid comes from; the packing below and the MMA loop
// both follow it.
template <class C>
__host__ __device__ constexpr ChunkOrigin w_chunk_origin(int q, int tid) {
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int wr = warp % C::kWarpRows, wk = warp / C::kWarpRows;
  const int h = q % 2, s = (q / 2) % C::kSubsteps, tp = q / (2 * C::kSubsteps);
  return {wr * 16 * C::kTilesPerWarp + tp * 16 + g + 8 * h,
          wk * 32 * C::kSubsteps + 32 * s + 8 * t};
}

// Chunk c (8 k) of activation row r in a stage's shared-memory tile. Thread
// (g, t) of a warp reads chunk 4s + t of row 8j + g: without the swizzle rows g
// and g + 1 hit the same banks. Flipping bit 2 of c on odd rows puts each
// quarter-warp's eight 16-byte reads on eight distinct bank groups.
template <class C>
__host__ __device__ constexpr int x_slot(int r, int c) {
  return r * C::kXChunksPerRow + (c ^ ((r & 1) << 2));
}

// The activation chunk thread (wk, t) reads at k step s.
template <class C>
__host__ __device__ constexpr int x_chunk(int wk, int s, int t) {
  return (wk * C::kSubsteps + s) * 4 + t;
}

// Accumulator element i (0..3) of m16 tile tp and token group j for lane
// (g, t): weight row and token, per the PTX C-fragment layout (c0, c1: row g;
// c2, c3: row g + 8; columns 2t, 2t + 1).
template <class C>
__host__ __device__ constexpr int acc_row(int wr, int tp, int g, int i) {
  return wr * 16 * C::kTilesPerWarp + tp * 16 + g + 8 * (i >> 1);
}
__host__ __device__ constexpr int acc_token(int j, int t, int i) { return 8 * j + 2 * t + (i & 1); }

template <class C>
constexpr size_t smem_bytes(int ng) {
  return size_t(C::kStages) * (C::kWStageChunks + 8 * ng * C::kXChunksPerRow) * 16;
}

// ------------------------------------------------------------------ kernels
// Rows: where activation row m starts (nullptr past the end), so that the
// pooler's gather is just another row lookup: row(m), or in two steps,
// row(m, lookup(m)), where lookup issues any load the row needs without
// waiting for it (the direct kernel requests its first weights in between).
// Epi: the output side.
template <class Rows, class Epi>
struct Params {
  const uint4* w;      // packed weights [n_tiles][k_stages][kWChunks][kThreads]
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
template <class C, int NG, bool Bulk, class Rows, class Epi>
__global__ void __launch_bounds__(C::kThreads) mma_gemm_kernel(const Params<Rows, Epi> p) {
  constexpr int kT = C::kThreads, kTP = C::kTilesPerWarp, kS = C::kStages;
  constexpr int kXRows = 8 * NG;
  constexpr int kXStage = kXRows * C::kXChunksPerRow;
  constexpr int kFrags = C::kWarpRows * kTP * NG;  // float4 per lane in a block's partial
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

  float acc[kTP][NG][4] = {};
  int read_slot = 0, write_slot = kS - 1;
  for (int it = 0; it < n_st; ++it) {
    cp_async_wait<kS - 2>();  // this thread's copies of stage `it` have landed
    // Stage `it` sits in slot it % kS, used for the (it / kS)-th time.
    if constexpr (Bulk) mbar_wait(&full[read_slot], unsigned(it / kS) & 1u);
    __syncthreads();          // everyone's have; and slot write_slot is no longer being read
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
      uint4 b[NG];
#pragma unroll
      for (int j = 0; j < NG; ++j) b[j] = xsl[x_slot<C>(8 * j + g, x_chunk<C>(wk, s, t))];
#pragma unroll
      for (int tp = 0; tp < kTP; ++tp) {
        const uint4 lo = wsl[w_chunk<C>(tp, s, 0) * kT];  // row g
        const uint4 hi = wsl[w_chunk<C>(tp, s, 1) * kT];  // row g + 8
#pragma unroll
        for (int j = 0; j < NG; ++j) {
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
      for (int j = 0; j < NG; ++j)
        red[(((wk * C::kWarpRows + wr) * kTP + tp) * NG + j) * 32 + lane] =
            make_float4(acc[tp][j][0], acc[tp][j][1], acc[tp][j][2], acc[tp][j][3]);
    __syncthreads();
    if (wk == 0) {
#pragma unroll
      for (int tp = 0; tp < kTP; ++tp)
#pragma unroll
        for (int j = 0; j < NG; ++j)
          for (int w = 1; w < C::kWarpK; ++w) {
            const float4 v = red[(((w * C::kWarpRows + wr) * kTP + tp) * NG + j) * 32 + lane];
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
        for (int j = 0; j < NG; ++j)
          __stcg(&part[(size_t(split) * kFrags + (wr * kTP + tp) * NG + j) * 32 + lane],
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
        for (int j = 0; j < NG; ++j) {
          const size_t f = size_t((wr * kTP + tp) * NG + j) * 32 + lane;
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
    for (int j = 0; j < NG; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int n = tile * C::kRows + acc_row<C>(wr, tp, g, i);
        const int m = m0 + acc_token(j, t, i);
        if (n < p.N && m < p.M) p.epi.store(m, n, acc[tp][j][i] + bias[tp][i >> 1]);
      }
}

// Direct: RT 16-row weight tiles per block over all of K, no shared-memory ring: the block's
// warps take every kDirectWarps-th 32-wide k chunk with direct::warp_gemm, whose loads go
// straight into MMA fragments, two batches of chunks in flight per warp, and meet in shared
// memory in warp order (deterministic). No split-K, so no partials, fence or election after the
// last byte: a block's tail is one shared-memory sum and the epilogue. Grid (ceil(N/(16 RT)),
// ceil(M/(8 NG))). RT = 1: two blocks per SM keep 16 warps' batches in flight. RT > 1: each token
// load feeds RT tiles' MMAs (the token bytes an SM reads per weight byte fall RT-fold), one
// block per SM for the registers of RT tiles in flight. kPacked: the weights come from
// direct::pack_tiles' copy (strides: its TileOrder) instead of W itself (which only RT = 1
// reads).
constexpr int kDirectWarps = 8;
constexpr int kDirectMaxTiles = 3;  // RT: the warps' partial tiles must fit 48 KB of static shared memory
// direct_rotated: the blocks' walks take K's chunks in this many orders (direct::TileStrides).
constexpr int kDirectRotParts = 4;

// Chunks per warp step: two batches of weights (16 registers per chunk and tile), one of tokens
// and the accumulators within ptxas' 128 registers per thread at RT = 1 (two blocks per SM) and
// 255 at RT > 1 (one).
constexpr int direct_batch(int ng, int rt) { return rt == 1 ? (ng <= 2 ? 4 : 2) : rt == 2 && ng <= 2 ? 4 : 2; }
// Every warp's chunks fit one batch (direct::warp_gemm's kOneBatch).
constexpr bool direct_one_batch(int ng, int rt, int K) {
  return (K + direct::kChunkK - 1) / direct::kChunkK <= direct_batch(ng, rt) * kDirectWarps;
}

// Where partial (row n, token m) of a warp's tiles sits in the shared memory the warps meet in:
// token-major, so that the sum reads and stores consecutive rows of one token (coalesced in out),
// with each token row's rows XOR-swizzled by (m & 3) << 2 (within 16 rows, so rows = 16 RT
// holds it). A warp's accumulator stores (8 rows by 4 token pairs) then take two wavefronts; row
// by row they took up to eight, ~1 us at 32 tokens, with the last weight byte already in.
__host__ __device__ constexpr int direct_partial_index(int n, int m, int rows) {
  return m * rows + (n ^ ((m & 3) << 2));
}
// Every partial of a warp's tiles gets a place of its own, for every RT and token groups 1..4.
constexpr bool direct_partial_index_is_permutation() {
  for (int rows = 16; rows <= 16 * kDirectMaxTiles; rows += 16)
    for (int cols = 8; cols <= 32; cols += 8) {
      bool seen[16 * kDirectMaxTiles * 32] = {};
      for (int n = 0; n < rows; ++n)
        for (int m = 0; m < cols; ++m) {
          const int e = direct_partial_index(n, m, rows);
          if (e < 0 || e >= rows * cols || seen[e]) return false;
          seen[e] = true;
        }
    }
  return true;
}
static_assert(direct_partial_index_is_permutation(),
              "direct_partial_index must place every partial of a warp's tiles once");

template <int NG, int RT, bool kPacked, bool kOneBatch, class Rows, class Epi>
__global__ void __launch_bounds__(kDirectWarps * 32, RT == 1 ? 2 : 1)
    direct_gemm_kernel(const bf16* __restrict__ W, const uint4* __restrict__ packed, direct::TileStrides strides,
                       const Rows rows, const Epi epi, int M, int N, int K) {
  static_assert(RT >= 1 && RT <= kDirectMaxTiles && (kPacked || RT == 1), "direct: RT tiles of packed W");
  static_assert(kPacked || !kOneBatch, "direct: the one-batch kernels read the packed copy");
  constexpr int kCols = 8 * NG, kRows = 16 * RT, kBlockTile = kRows * kCols;
  constexpr int kOuts = (kBlockTile + kDirectWarps * 32 - 1) / (kDirectWarps * 32);  // outputs per thread
  __shared__ float tiles[kDirectWarps * kBlockTile];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const int n0 = blockIdx.x * 16 * RT, m0 = blockIdx.y * kCols;

  // The bias of this thread's outputs, fetched now rather than after the last weight byte.
  float bias[kOuts] = {};
  if constexpr (Epi::kHasBias) {
#pragma unroll
    for (int i = 0; i < kOuts; ++i) {
      const int n = n0 + (tid + i * kDirectWarps * 32) % kRows;
      if (n < N) bias[i] = epi.bias(n);
    }
  }
  // The token rows' lookups go out first and are waited for only after the first weight
  // requests (warp_gemm's token_rows): the pooler's is a DRAM read of cu_seqlens, and waited
  // for here it put a whole DRAM trip in front of the weight stream (docs/perf-log.md, round 83).
  int lookup[NG];
#pragma unroll
  for (int j = 0; j < NG; ++j) lookup[j] = rows.lookup(m0 + 8 * j + g);
  const auto token_rows = [&](const bf16* (&x)[NG]) {
#pragma unroll
    for (int j = 0; j < NG; ++j) x[j] = rows.row(m0 + 8 * j + g, lookup[j]);
  };
  const int chunks = (K + direct::kChunkK - 1) / direct::kChunkK;
  float acc[RT * NG][4] = {};
  if constexpr (kPacked) {
    const direct::PackedTiles<RT> w{packed + blockIdx.x * RT * strides.tile_pieces, strides.tile_pieces,
                                    min(RT, (N + 15) / 16 - int(blockIdx.x) * RT), strides.chunk_pieces};
    direct::warp_gemm<NG, direct_batch(NG, RT), kOneBatch, true>(w, token_rows, K, warp, chunks, kDirectWarps, acc,
                                                                 strides.rotation(blockIdx.x));
  } else {
    const int ra = n0 + g, rb = n0 + g + 8;
    const direct::RowMajorWeights w{ra < N ? W + size_t(ra) * K : nullptr, rb < N ? W + size_t(rb) * K : nullptr, K};
    direct::warp_gemm<NG, direct_batch(NG, RT)>(w, token_rows, K, warp, chunks, kDirectWarps, acc);
  }
  // Row r 16 + g (+ 8) of the block's tiles, token column acc_token.
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int j = 0; j < NG; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        tiles[warp * kBlockTile + direct_partial_index(16 * r + g + 8 * (i >> 1), acc_token(j, t, i), kRows)] =
            acc[r * NG + j][i];
  __syncthreads();
#pragma unroll
  for (int i = 0; i < kOuts; ++i) {
    const int o = tid + i * kDirectWarps * 32, row = o % kRows, token = o / kRows;
    const int n = n0 + row, m = m0 + token;
    if (o < kBlockTile && n < N && m < M) {
      const int e = direct_partial_index(row, token, kRows);
      float s = tiles[e];
#pragma unroll
      for (int w = 1; w < kDirectWarps; ++w) s += tiles[w * kBlockTile + e];
      epi.store(m, n, s + bias[i]);
    }
  }
}

// Packs W[N, K] into the kernel's order, zero-padded to whole tiles and stages.
template <class C>
__global__ void pack_weights_kernel(const bf16* __restrict__ W, int N, int K, int k_stages,
                                    uint4* __restrict__ packed, size_t chunks) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < chunks;
       i += size_t(gridDim.x) * blockDim.x) {
    const int tid = int(i % C::kThreads);
    const int q = int(i / C::kThreads % C::kWChunks);
    const size_t tile_stage = i / C::kWStageChunks;
    const int st = int(tile_stage % k_stages);
    const size_t tile = tile_stage / k_stages;
    const ChunkOrigin o = w_chunk_origin<C>(q, tid);
    const size_t n = tile * C::kRows + o.row;
    const int k = st * C::kStageK + o.k;
    packed[i] = n < size_t(N) && k < K ? *reinterpret_cast<const uint4*>(W + n * K + k)
                                       : make_uint4(0, 0, 0, 0);
  }
}

// CUDA-core reference path: one warp per weight row, 8 tokens at a time, fp32
// FMA, lane-strided 16-byte loads and a butterfly reduction. Slow (it re-reads
// W once per 8 tokens) but obviously right; kept as the fallback. Four blocks
// per SM keep enough warps' loads in flight.
template <class Rows, class Epi>
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

// ------------------------------------------------------------------ dispatch model
// How many k splits a wide or narrow kernel takes, from a model of the machine
// rather than a table of shapes. A configuration runs `units` = tiles x splits x token
// chunks blocks, `slots` of them at a time (SMs x blocks per SM, from the
// occupancy API). Per wave of `a` blocks:
//   time = latency + bytes of the wave / min(HBM bandwidth, a x in-flight bytes / latency)
// i.e. the wave streams at HBM speed if its blocks keep enough bytes in flight
// (Little's law), else at what they can keep in flight; each wave also pays one
// memory latency to fill and drain its pipelines. Two more limits:
//   * L2 -> SM traffic (weights + each block's copy of the activations +
//     partials written and read back) over the L2 bandwidth: this is what rules
//     out narrow tiles for large weights (16-row tiles reread the activations
//     once per 16 rows);
//   * a split costs a fixed fix-up (partials, fence, atomic, the last block's
//     reads) on the critical path.
// The constants come from the H200 measurements of these kernels (times less
// the ~2.8 us a cold launch costs); only their ratios steer the choice.
struct Machine {
  double hbm_bytes_per_us;  // sustained weight stream
  double l2_bytes_per_us;   // bytes into the SMs: weights + activations + partials
  double latency_us;        // loaded DRAM round trip
  double fixup_us;          // split-K fix-up: fence, election and the last block's reads
};

// The per-thread cp.async kernels (wide and narrow).
//   hbm 2.6 TB/s: wide, no split, on dense gate_up streamed 237 MB in ~92 us.
//   l2 2.6 TB/s: narrow pooler B=8 H=4096 moved ~50 MB into the SMs (33.5 MB
//     of weights, the activations once per 16 rows) in ~22 us and lost to wide
//     at 4 splits (~35 MB, ~20.3 us); at 7 TB/s the model ranked narrow first
//     there. This is the ~20-23 GB/s per SM these kernels reached.
//   latency 2.0 us: the narrow pooler at H = 1024 (one wave of 64 blocks, all
//     its 2 MB requested at once) took ~4.2 us; with it narrow stays ahead of
//     wide at H = 1024 (wide at 4 splits measured ~7.3 and ~9.4 us, B = 8, 16).
//   fix-up 2.5 us: wide dense o (4 splits, 16 stages per block) took ~23 us
//     where the stream alone models ~20.5.
inline constexpr Machine kCpAsyncMachine{2.6e6, 2.6e6, 2.0, 2.5};
// The bulk-copy wide kernel, not measured yet: the copy bandwidth the scorer
// measured (4.2 TB/s, ~3.9 net of the floor kernel's own costs), and bytes
// into the SMs no longer capped by per-thread copies; latency and fix-up as
// above.
inline constexpr Machine kBulkMachine{3.9e6, 7.0e6, 2.0, 2.5};

struct ConfigCost {
  int rows;             // weight rows per tile
  int stage_k;          // k per stage
  int stages;           // ring depth
  int blocks_per_sm;    // occupancy
};

inline double estimate_us(const ConfigCost& c, int splits, int M, int N, int K, int ng, int sms,
                          const Machine& mc) {
  const int n_tiles = (N + c.rows - 1) / c.rows;
  const int k_stages = (K + c.stage_k - 1) / c.stage_k;
  const int m_chunks = (M + 8 * ng - 1) / (8 * ng);
  const double w_stage = double(c.rows) * c.stage_k * 2;
  const double x_stage = 8.0 * ng * c.stage_k * 2;
  const int st_unit = (k_stages + splits - 1) / splits;
  const double w_unit = st_unit * w_stage;
  const double in_flight = std::min(c.stages - 1, st_unit) * w_stage;
  const int64_t units = int64_t(n_tiles) * splits * m_chunks;
  const int64_t slots = int64_t(sms) * c.blocks_per_sm;
  double t = 0;
  for (int64_t left = units; left > 0;) {
    const int64_t a = std::min(left, slots);
    const double bw = std::min(mc.hbm_bytes_per_us, a * in_flight / mc.latency_us);
    t += mc.latency_us + a * w_unit / bw;
    left -= a;
  }
  double l2_bytes = double(units) * st_unit * (w_stage + x_stage);
  if (splits > 1) l2_bytes += 2.0 * splits * m_chunks * 8.0 * ng * n_tiles * c.rows * 4;
  t = std::max(t, l2_bytes / mc.l2_bytes_per_us);
  if (splits > 1) t += mc.fixup_us;
  return t;
}

// ------------------------------------------------------------------ host engine
enum class Kernel {
  wide, wide_bulk, narrow, direct, direct_packed, direct_tiles, direct_interleaved, direct_rotated, cluster, simt
};

// Variant names shared by dense and pooler, "default" first.
inline std::vector<std::string> variant_names() {
  return {"default",           "splitk_mma",       "splitk_bulk_mma",        "narrow_mma",
          "direct_mma",        "direct_packed_mma", "direct_tiles_mma",      "direct_interleaved_mma",
          "direct_rotated_mma", "cluster_splitk_mma", "simt"};
}

inline Kernel kernel_for_variant(const std::string& op, const std::string& variant) {
  // Measured on the H200 (docs/perf-log.md, rounds 7 and 33): the pooler at 77-96% of its
  // floor, against 59-67% with the wide and narrow kernels the model chose between before, and
  // 1.1-1.2x ahead of direct_mma reading W as it is; direct_tiles is direct_packed where the
  // model keeps one tile per block (H = 1024) and 2.5% faster at B = 16, H = 4096; its
  // chunk-major copy (direct_interleaved) 1-1.6% faster at H = 4096 (round 51); the walks
  // rotated (direct_rotated) 1.3-2.8% faster at H = 4096, the same at H = 1024 (round 89).
  if (variant == "default") return Kernel::direct_rotated;
  if (variant == "splitk_mma") return Kernel::wide;    // 128-row tiles, split-K chosen by the model
  if (variant == "splitk_bulk_mma") return Kernel::wide_bulk;  // the same, weights by cp.async.bulk
  if (variant == "narrow_mma") return Kernel::narrow;  // 16-row tiles, k split across warps
  if (variant == "direct_mma") return Kernel::direct;  // 16-row tiles, W straight into fragments
  if (variant == "direct_packed_mma") return Kernel::direct_packed;  // the same from a packed copy of W
  if (variant == "direct_tiles_mma") return Kernel::direct_tiles;  // the same, up to 3 tiles per block
  if (variant == "direct_interleaved_mma") return Kernel::direct_interleaved;  // the same, tiles chunk-major
  if (variant == "direct_rotated_mma") return Kernel::direct_rotated;  // the same, each block's own chunk order
  if (variant == "cluster_splitk_mma") return Kernel::cluster;  // one wave, split-K reduced in clusters
  if (variant == "simt") return Kernel::simt;          // CUDA-core reference path
  throw std::invalid_argument("unknown " + op + " variant '" + variant + "'");
}

struct Plan {
  Kernel kernel = Kernel::simt;
  int splits = 1;
  int ng = 4;             // token groups of 8 per block (tokens per chunk = 8 ng)
  int rt = 1;             // direct kernels: 16-row weight tiles per block
  int n_tiles = 0;
  int k_stages = 0;
  int m_chunks = 0;
  double predicted_us = 0;
};

template <class Rows, class Epi>
using MmaKernel = void (*)(Params<Rows, Epi>);

// The direct kernel's block shape: token groups of 8 (ng) and 16-row tiles (rt) per block. A
// block streams its rt weight tiles and its token rows over all of K, and an SM's blocks share
// its ingest, so the model takes the shape whose busiest SM receives the fewest bytes (ties: the
// larger ng, then the smaller rt). Fewer groups per block mean more blocks where the tiles alone
// leave SMs idle (the pooler at H = 1024, B = 16: 64 tiles, 64 KB per SM at ng = 2, 48 KB on
// twice the SMs at ng = 1); the tile is then read by each of its blocks, from L2 after the
// first. More tiles per block mean fewer token bytes per weight byte where the tiles outnumber
// the SMs (the pooler at H = 4096, B = 16: 256 tiles, 64 rows of K per SM at rt = 1, 48 at
// rt = 2). max_rt = 1 keeps one tile per block.
struct DirectShape {
  int ng, rt;
  long long blocks;  // the grid's blocks at this shape
};
inline DirectShape direct_shape(int M, int N, int K, int sms, int max_rt) {
  const long long tiles = (N + 15) / 16;
  const int max_ng = std::min(4, (M + 7) / 8);
  DirectShape best{max_ng, 1, 0};
  double best_bytes = 1e300;
  for (int ng = max_ng; ng >= 1; --ng)
    for (int rt = 1; rt <= max_rt; ++rt) {
      const long long blocks = (tiles + rt - 1) / rt * ((M + 8 * ng - 1) / (8 * ng));
      const double rows = 16.0 * std::min<long long>(rt, tiles) + std::min(8 * ng, M);
      const double bytes = double((blocks + sms - 1) / sms) * rows * K * 2;
      if (bytes < best_bytes) best = {ng, rt, blocks}, best_bytes = bytes;
    }
  return best;
}

// Where the direct kernel is dense's default (dense.cu): its blocks, of up to kDirectMaxTiles
// tiles, fit one wave, one per SM. Measured at M = 32 (docs/perf-log.md, round 57): 1.06-1.14x of
// cuBLASLt there (N = 4096 at K = 4096 and 14336, 128 blocks of two tiles; N = 6144, 128 blocks
// of three); 0.94-0.95x over several waves (N = 28672).
inline bool direct_tiles_one_wave(int M, int N, int K, int sms) {
  if (M < 1 || N < 1 || K < 8) return false;
  return direct_shape(M, N, K, sms, kDirectMaxTiles).blocks <= sms;
}

template <class C, bool Bulk, class Rows, class Epi>
MmaKernel<Rows, Epi> mma_kernel(int ng) {
  switch (ng) {
    case 1: return mma_gemm_kernel<C, 1, Bulk, Rows, Epi>;
    case 2: return mma_gemm_kernel<C, 2, Bulk, Rows, Epi>;
    case 3: return mma_gemm_kernel<C, 3, Bulk, Rows, Epi>;
    default: return mma_gemm_kernel<C, 4, Bulk, Rows, Epi>;
  }
}

// Prepare-time half of the op: chooses the plan, packs W, owns the workspace.
// run() launches exactly one kernel on the caller's stream.
template <class Rows, class Epi>
class Engine {
 public:
  Engine(int M, int N, int K, const bf16* W, Kernel forced) : M_(M), N_(N), K_(K), W_(W) {
    if (M < 1 || N < 1 || K < 8 || K % 8 != 0)
      throw std::invalid_argument("small-M GEMM: need M >= 1, N >= 1, K >= 8, K % 8 == 0 (got M=" +
                                  std::to_string(M) + " N=" + std::to_string(N) +
                                  " K=" + std::to_string(K) + ")");
    const int sms = device_sm_count();
    const bool tiles = forced == Kernel::direct_tiles || forced == Kernel::direct_interleaved ||
                       forced == Kernel::direct_rotated;
    const bool direct = forced == Kernel::direct || forced == Kernel::direct_packed || tiles;
    if (direct) {
      const DirectShape shape = direct_shape(M, N, K, sms, tiles ? kDirectMaxTiles : 1);
      plan_.ng = shape.ng;
      plan_.rt = shape.rt;
    } else {
      plan_.ng = std::min(4, (M + 7) / 8);
    }
    plan_.m_chunks = (M + 8 * plan_.ng - 1) / (8 * plan_.ng);
    if (plan_.m_chunks > 65535) throw std::invalid_argument("small-M GEMM: M too large");
    // The layout of the packed copy that the direct kernels and cluster read.
    const bool chunk_major = forced == Kernel::direct_interleaved || forced == Kernel::direct_rotated;
    strides_ = direct::tile_strides(chunk_major ? direct::TileOrder::chunk_major : direct::TileOrder::tile_major, N, K,
                                    forced == Kernel::direct_rotated ? kDirectRotParts : 1, plan_.rt, kDirectWarps);
    if (forced == Kernel::simt || direct) {
      plan_.kernel = forced;
      if (forced != Kernel::simt && forced != Kernel::direct) pack_direct();  // they read W as it is
      return;
    }
    int dev = 0, smem_optin = 0;
    SUBMISSION_CUDA(cudaGetDevice(&dev));
    SUBMISSION_CUDA(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (forced == Kernel::cluster) {
      // Where no slice of the token rows fits in shared memory (from K ~ 30000 at M = 32), the
      // direct kernel runs instead: it reads the same packed copy.
      cluster_ = plan_cluster<Rows, Epi>(M, N, K, plan_.ng, sms, smem_optin);
      plan_.kernel = cluster_.clusters > 0 ? Kernel::cluster : Kernel::direct_packed;
      plan_.predicted_us = cluster_.predicted_us;
      pack_direct();
      return;
    }
    plan_.predicted_us = 1e300;
    if (forced == Kernel::wide) consider<WideConfig, false>(Kernel::wide, sms, smem_optin, kCpAsyncMachine);
    if (forced == Kernel::wide_bulk) consider<WideConfig, true>(Kernel::wide_bulk, sms, smem_optin, kBulkMachine);
    if (forced == Kernel::narrow) consider<NarrowConfig, false>(Kernel::narrow, sms, smem_optin, kCpAsyncMachine);
    if (plan_.kernel == Kernel::wide || plan_.kernel == Kernel::wide_bulk) pack<WideConfig>();
    else if (plan_.kernel == Kernel::narrow) pack<NarrowConfig>();
    else  // the kernel's shared memory does not fit this GPU
      throw std::invalid_argument("small-M GEMM: the forced tensor-core kernel does not fit this GPU");
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void run(const Rows& rows, const Epi& epi, cudaStream_t stream) const {
    if (plan_.kernel == Kernel::simt) {
      simt_gemm_kernel<Rows, Epi><<<(N_ + 7) / 8, 256, 0, stream>>>(W_, rows, epi, M_, N_, K_);
    } else if (plan_.kernel == Kernel::direct) {
      launch_direct<false>(rows, epi, stream);
    } else if (plan_.kernel == Kernel::direct_packed || plan_.kernel == Kernel::direct_tiles ||
               plan_.kernel == Kernel::direct_interleaved || plan_.kernel == Kernel::direct_rotated) {
      launch_direct<true>(rows, epi, stream);
    } else if (plan_.kernel == Kernel::cluster) {
      launch_cluster(cluster_, packed_.as<uint4>(), rows, epi, M_, N_, K_, plan_.ng, stream);
    } else {
      const Params<Rows, Epi> p{packed_.as<uint4>(), rows, epi, M_, N_, K_, plan_.k_stages, plan_.splits,
                                plan_.n_tiles, partials_.as<float4>(), counters_.as<unsigned>()};
      const dim3 grid(plan_.n_tiles * plan_.splits, plan_.m_chunks);
      const bool bulk = plan_.kernel == Kernel::wide_bulk;
      const bool wide = plan_.kernel == Kernel::wide || bulk;
      const MmaKernel<Rows, Epi> kernel = bulk   ? mma_kernel<WideConfig, true, Rows, Epi>(plan_.ng)
                                          : wide ? mma_kernel<WideConfig, false, Rows, Epi>(plan_.ng)
                                                 : mma_kernel<NarrowConfig, false, Rows, Epi>(plan_.ng);
      const int threads = wide ? WideConfig::kThreads : NarrowConfig::kThreads;
      const size_t smem = wide ? smem_bytes<WideConfig>(plan_.ng) : smem_bytes<NarrowConfig>(plan_.ng);
      kernel<<<grid, threads, smem, stream>>>(p);
    }
    SUBMISSION_CUDA(cudaGetLastError());
  }

 private:
  template <class C, bool Bulk>
  void consider(Kernel kind, int sms, int smem_optin, const Machine& mc) {
    const auto kernel = mma_kernel<C, Bulk, Rows, Epi>(plan_.ng);
    const size_t smem = smem_bytes<C>(plan_.ng);
    if (smem > size_t(smem_optin)) return;
    SUBMISSION_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    // All global traffic bypasses L1 (cp.async.cg), so give the SM's memory to shared.
    SUBMISSION_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      cudaSharedmemCarveoutMaxShared));
    int per_sm = 0;
    SUBMISSION_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, C::kThreads, smem));
    if (per_sm < 1) return;
    const ConfigCost cost{C::kRows, C::kStageK, C::kStages, per_sm};
    const int n_tiles = (N_ + C::kRows - 1) / C::kRows;
    const int k_stages = (K_ + C::kStageK - 1) / C::kStageK;
    // Splits beyond 32 only add fix-up traffic; grid.x must stay addressable.
    const int max_splits = std::min({k_stages, 32, int(INT32_MAX / n_tiles)});
    for (int s = 1; s <= max_splits; ++s) {
      const double us = estimate_us(cost, s, M_, N_, K_, plan_.ng, sms, mc);
      if (us < plan_.predicted_us) {  // strict: ties keep fewer splits / the wide tiles
        plan_.kernel = kind;
        plan_.splits = s;
        plan_.n_tiles = n_tiles;
        plan_.k_stages = k_stages;
        plan_.predicted_us = us;
      }
    }
  }

  template <bool kPacked>
  void launch_direct(const Rows& rows, const Epi& epi, cudaStream_t stream) const {
    const dim3 grid((N_ + 16 * plan_.rt - 1) / (16 * plan_.rt), plan_.m_chunks);
    direct_kernel<kPacked>(plan_.ng, plan_.rt, K_)<<<grid, kDirectWarps * 32, 0, stream>>>(
        W_, packed_.as<uint4>(), strides_, rows, epi, M_, N_, K_);
  }

  using DirectKernel = void (*)(const bf16*, const uint4*, direct::TileStrides, Rows, Epi, int, int, int);
  template <bool kPacked, int RT, bool kOneBatch>
  static DirectKernel direct_kernel_rt(int ng) {
    return ng == 1   ? direct_gemm_kernel<1, RT, kPacked, kOneBatch, Rows, Epi>
           : ng == 2 ? direct_gemm_kernel<2, RT, kPacked, kOneBatch, Rows, Epi>
           : ng == 3 ? direct_gemm_kernel<3, RT, kPacked, kOneBatch, Rows, Epi>
                     : direct_gemm_kernel<4, RT, kPacked, kOneBatch, Rows, Epi>;
  }
  template <bool kPacked, int RT>
  static DirectKernel direct_kernel_rt(int ng, int K) {
    return direct_one_batch(ng, RT, K) ? direct_kernel_rt<kPacked, RT, true>(ng)
                                       : direct_kernel_rt<kPacked, RT, false>(ng);
  }
  // The one-batch kernels only for the packed copy: W as it is (`direct`) is a named variant.
  template <bool kPacked>
  static DirectKernel direct_kernel(int ng, int rt, int K) {
    if constexpr (!kPacked) return direct_kernel_rt<false, 1, false>(ng);
    else
      return rt == 1 ? direct_kernel_rt<true, 1>(ng, K)
             : rt == 2 ? direct_kernel_rt<true, 2>(ng, K)
                       : direct_kernel_rt<true, 3>(ng, K);
  }

  void pack_direct() { packed_ = direct::pack_tiles(W_, N_, K_, strides_); }

  template <class C>
  void pack() {
    const size_t chunks = size_t(plan_.n_tiles) * plan_.k_stages * C::kWStageChunks;
    packed_ = DeviceMemory(chunks * sizeof(uint4));
    const int blocks = int(std::min<size_t>((chunks + 255) / 256, 65535));
    pack_weights_kernel<C><<<blocks, 256>>>(W_, N_, K_, plan_.k_stages, packed_.as<uint4>(), chunks);
    SUBMISSION_CUDA(cudaGetLastError());
    if (plan_.splits > 1) {
      const size_t tiles = size_t(plan_.m_chunks) * plan_.n_tiles;
      const size_t frags = size_t(C::kWarpRows) * C::kTilesPerWarp * plan_.ng * 32;
      partials_ = DeviceMemory(tiles * plan_.splits * frags * sizeof(float4));
      counters_ = DeviceMemory(tiles * sizeof(unsigned));
      SUBMISSION_CUDA(cudaMemset(counters_.as<unsigned>(), 0, tiles * sizeof(unsigned)));
    }
    // The scorer's stream may not wait on the legacy stream: finish here.
    SUBMISSION_CUDA(cudaDeviceSynchronize());
  }

  int M_, N_, K_;
  const bf16* W_;
  Plan plan_;
  ClusterPlan cluster_;    // Kernel::cluster
  direct::TileStrides strides_;  // of packed_, direct kernels and cluster
  DeviceMemory packed_;    // uint4 chunks of the packed weights
  DeviceMemory partials_;  // float4, splits > 1
  DeviceMemory counters_;  // unsigned, splits > 1
};

}  // namespace submission::small_m
