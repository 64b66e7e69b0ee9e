// The small-M engine's direct kernel, the default of pooler and dense (docs/perf-log.md, rounds 7,
// 33, 51, 57, 83, 89): up to kDirectMaxTiles 16-row weight tiles per block over all of K, loaded
// straight into MMA fragments (direct::warp_gemm) from the packed copy small_m_plan.h lays out;
// no shared-memory ring, no split-K. Why this shape: at M <= 32 the op is one streaming read of
// W, and every stage between DRAM and the tensor cores costs latency that nothing hides.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "submission/direct_mma.cuh"
#include "submission/small_m_plan.h"

namespace submission::small_m {

// Accumulator element i (0..3) of token group j for lane (g, t): its token, per the PTX
// C-fragment layout (c0, c1: row g; c2, c3: row g + 8; columns 2t, 2t + 1).
__host__ __device__ constexpr int acc_token(int j, int t, int i) { return 8 * j + 2 * t + (i & 1); }

// Where partial (row n, token m) of a warp's tiles sits in the shared memory the warps meet in:
// token-major, so that the sum reads and stores consecutive rows of one token (coalesced in out),
// with each token row's rows XOR-swizzled by (m & 3) << 2 (within 16 rows, so rows = 16 Tiles
// holds it). A warp's accumulator stores (8 rows by 4 token pairs) then take two wavefronts, not
// up to eight (docs/perf-log.md, round 56).
__host__ __device__ constexpr int direct_partial_index(int n, int m, int rows) {
  return m * rows + (n ^ ((m & 3) << 2));
}
// Every partial of a warp's tiles gets a place of its own, for every tile count and token groups 1..4.
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

// Where a block's weights come from (the kernel's Source): the tiles of the packed copy
// (direct::pack_tiles) from the block's first on, walked in the block's rotated order.
struct PackedSource {
  static constexpr bool kRotated = true;
  template <int Tiles>  // 16-row weight tiles per block
  __device__ static direct::PackedTiles<Tiles> weights(const bf16*, const uint4* packed, const direct::TileStrides& st,
                                                       int N, int) {
    return {packed + blockIdx.x * Tiles * st.tile_pieces, st.tile_pieces,
            min(Tiles, (N + 15) / 16 - int(blockIdx.x) * Tiles), st.chunk_pieces};
  }
};

// The block's warps take every kDirectWarps-th 32-wide chunk of K, two batches in flight per
// warp, and meet in shared memory in warp order (deterministic): no partials, fence or election
// after the last byte. Grid (ceil(N / (16 Tiles)), ceil(M / (8 TokenGroups))). One tile: two
// blocks per SM keep 16 warps' batches in flight; more: each token load feeds every tile's MMAs,
// one block per SM for their registers.
template <int TokenGroups,  // groups of 8 tokens per block (the MMA's N side): 1..4
          int Tiles,        // 16-row weight tiles per block: 1..kDirectMaxTiles
          class Source,     // where the weights come from: weights<Tiles>(W, packed, strides, N, K), kRotated
          bool kOneBatch,   // every warp's chunks fit one batch: no loop (direct::warp_gemm)
          class Rows,       // where token row m starts (small_m_rows.cuh)
          class Epi>        // bias and store of an output (small_m_rows.cuh)
__global__ void __launch_bounds__(kDirectWarps * 32, Tiles == 1 ? 2 : 1)
    direct_gemm_kernel(const bf16* __restrict__ W, const uint4* __restrict__ packed, direct::TileStrides strides,
                       const Rows rows, const Epi epi, int M, int N, int K) {
  static_assert(Tiles >= 1 && Tiles <= kDirectMaxTiles, "direct: Tiles tiles of W");
  constexpr int kCols = 8 * TokenGroups, kRows = 16 * Tiles, kBlockTile = kRows * kCols;
  constexpr int kOuts = (kBlockTile + kDirectWarps * 32 - 1) / (kDirectWarps * 32);  // outputs per thread
  __shared__ float tiles[kDirectWarps * kBlockTile];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const int n0 = blockIdx.x * 16 * Tiles, m0 = blockIdx.y * kCols;

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
  int lookup[TokenGroups];
#pragma unroll
  for (int j = 0; j < TokenGroups; ++j) lookup[j] = rows.lookup(m0 + 8 * j + g);
  const auto token_rows = [&](const bf16*(&x)[TokenGroups]) {
#pragma unroll
    for (int j = 0; j < TokenGroups; ++j) x[j] = rows.row(m0 + 8 * j + g, lookup[j]);
  };
  const int chunks = (K + direct::kChunkK - 1) / direct::kChunkK;
  float acc[Tiles * TokenGroups][4] = {};
  const auto w = Source::template weights<Tiles>(W, packed, strides, N, K);
  direct::warp_gemm<TokenGroups, direct_batch(TokenGroups, Tiles), kOneBatch, Source::kRotated>(
      w, token_rows, K, warp, chunks, kDirectWarps, acc, strides.rotation(blockIdx.x));
  // Row r 16 + g (+ 8) of the block's tiles, token column acc_token.
#pragma unroll
  for (int r = 0; r < Tiles; ++r)
#pragma unroll
    for (int j = 0; j < TokenGroups; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i)
        tiles[warp * kBlockTile + direct_partial_index(16 * r + g + 8 * (i >> 1), acc_token(j, t, i), kRows)] =
            acc[r * TokenGroups + j][i];
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

}  // namespace submission::small_m
