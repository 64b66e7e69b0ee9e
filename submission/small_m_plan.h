// The host half of the small-M GEMM (dense and pooler): which block shape the direct kernel
// takes, how its packed copy of W is laid out, and the copy itself. Compiled once
// (small_m_plan.cu) for both ops; the kernels that read the plan are in small_m_direct.cuh.
//
//   out[m, n] = Epi( sum_k X[m, k] * W[n, k] )        M, N >= 1; K >= 8, K % 8 == 0
//
// The regime is M <= 32 tokens against a large weight: the op is one streaming read of W.
#pragma once

#include "submission/device_memory.h"
#include "submission/direct_mma.cuh"
#include "submission/submission.h"

namespace submission::small_m {

constexpr int kDirectWarps = 8;
constexpr int kDirectMaxTiles = 3;  // tiles per block: the warps' partial tiles must fit 48 KB of static shared memory
// The rotated layout's blocks take K's chunks in this many orders (direct::TileStrides).
constexpr int kDirectRotParts = 4;

// Chunks per warp step: two batches of weights (16 registers per chunk and tile), one of tokens
// and the accumulators within ptxas' 128 registers per thread at one tile (two blocks per SM) and
// 255 at more (one).
constexpr int direct_batch(int ng, int rt) { return rt == 1 ? (ng <= 2 ? 4 : 2) : rt == 2 && ng <= 2 ? 4 : 2; }
// Every warp's chunks fit one batch (direct::warp_gemm's kOneBatch).
constexpr bool direct_one_batch(int ng, int rt, int K) {
  return (K + direct::kChunkK - 1) / direct::kChunkK <= direct_batch(ng, rt) * kDirectWarps;
}

// Throws std::invalid_argument unless M >= 1, N >= 1, K >= 8, K % 8 == 0.
void validate_small_m(int M, int N, int K);

// The direct kernel's block shape: token groups of 8 (ng) and 16-row tiles (rt) per block. A
// block streams its rt weight tiles and its token rows over all of K, and an SM's blocks share
// its ingest, so the model takes the shape whose busiest SM receives the fewest bytes (ties: the
// larger ng, then the smaller rt). Fewer groups per block mean more blocks where the tiles alone
// leave SMs idle (the pooler at H = 1024, B = 16); more tiles per block mean fewer token bytes
// per weight byte where the tiles outnumber the SMs (the pooler at H = 4096, B = 16).
// max_rt = 1 keeps one tile per block.
struct DirectShape {
  int ng, rt;
  long long blocks;  // the grid's blocks at this shape
};
DirectShape direct_shape(int M, int N, int K, int sms, int max_rt);

// Where the direct kernel is dense's default (dense.cu): its blocks, of up to kDirectMaxTiles
// tiles, fit one wave, one per SM (docs/perf-log.md, round 57).
bool direct_tiles_one_wave(int M, int N, int K, int sms);

// The packed copy's layout: the order of its pieces, how many orders the blocks' walks take
// (direct::TileStrides), and the most tiles a block may take.
struct DirectLayout {
  direct::TileOrder order;
  int rot_parts;
  int max_tiles;
};
// The default: chunk-major, each block's walk in an order of its own, up to three tiles a block
// (docs/perf-log.md, rounds 51 and 89).
constexpr DirectLayout kRotatedLayout{direct::TileOrder::chunk_major, kDirectRotParts, kDirectMaxTiles};

// The direct kernel's plan for a shape: block shape, grid and W packed as `layout` says.
struct DirectPlan {
  int ng = 1, rt = 1, m_chunks = 0;
  direct::TileStrides strides;
  DeviceMemory packed;  // uint4 pieces, direct::pack_tiles
};
DirectPlan plan_direct(int M, int N, int K, const bf16* W, const DirectLayout& layout);

}  // namespace submission::small_m
