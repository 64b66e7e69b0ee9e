// A warp's bf16 tensor-core GEMM with both operands loaded straight from global memory into
// mma.m16n8k16 fragments: no shared memory, no ldmatrix, no shuffles. For a weight streamed once
// against a handful of tokens (the router, the small-M engine's direct kernel) the weights need
// no staging: each 16-byte load of a weight row is already one thread's A fragment for two MMAs.
//
//   acc[r TokenTiles + n] += W[rows g, g+8 of tile r] . X[token 8n + g]   over the k chunks first,
//                    first + stride, ... below end (a chunk is 32 k), in that order.
//
// A warp may own several 16-row tiles (Weights::kTiles): each token load then feeds the MMAs of
// every tile, so the token bytes a warp reads per weight byte fall by that factor.
//
// Fragments (PTX ISA, mma.m16n8k16 .bf16), with g = lane/4 and q = lane%4:
//   A regs {a0a1, a2a3, a4a5, a6a7} = A[g][2q..], A[g+8][2q..], A[g][2q+8..], A[g+8][2q+8..]
//   B regs {b0b1, b2b3}             = B[2q..][g], B[2q+8..][g]
//   D      {d0, d1, d2, d3}         = D[g][2q], D[g][2q+1], D[g+8][2q], D[g+8][2q+1]
// Inside a chunk k is permuted so that each thread's 16-byte load feeds two mma: thread (g, q)
// loads k = 8q..8q+7 of its two weight rows and of its token rows, and mma j maps its k index
// 2q+i to 8q+4j+i and 2q+8+i to 8q+4j+2+i. A and B use the same map, a bijection onto the
// chunk, so the dot products are unchanged.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "submission/device_memory.h"
#include "submission/mma_bf16.cuh"

namespace submission::direct {

constexpr int kChunkK = 32;  // k per warp step: one 16-byte load per row feeds two k16 mma

// 16 bytes that no thread writes during the kernel, or zeros where !pred. The predicate sits on
// the load itself rather than on a branch, so that the loads of a batch stay in one basic block
// and can all issue before the first mma. The outputs are early-clobber ("=&r"): they are zeroed
// before the address is read.
#define SUBMISSION_DIRECT_LOAD16(QUALIFIERS) \
  "{\n"                                      \
  "  .reg .pred p;\n"                        \
  "  setp.ne.b32 p, %5, 0;\n"                \
  "  mov.b32 %0, 0;\n"                       \
  "  mov.b32 %1, 0;\n"                       \
  "  mov.b32 %2, 0;\n"                       \
  "  mov.b32 %3, 0;\n"                       \
  "  @p ld.global.nc" QUALIFIERS             \
  ".v4.u32 {%0, %1, %2, %3}, [%4];\n"        \
  "}\n"

// Weights: L1 is skipped (no SM reads a weight byte twice, and the token rows keep L1 to
// themselves); the 256-byte L2 prefetch fetches the chunks the neighbouring warps load next.
__device__ __forceinline__ uint4 load_readonly(const __nv_bfloat16* p, bool pred) {
  uint4 v;
  asm volatile(SUBMISSION_DIRECT_LOAD16(".L1::no_allocate.L2::256B")
               : "=&r"(v.x), "=&r"(v.y), "=&r"(v.z), "=&r"(v.w)
               : "l"(p), "r"(int(pred)));
  return v;
}

// Token rows, through L1: every block on an SM reads them in full (the pooler's two blocks per
// SM read the same rows in the same order), so that the second reader finds them in L1 instead
// of L2.
__device__ __forceinline__ uint4 load_shared_readonly(const __nv_bfloat16* p, bool pred) {
  uint4 v;
  asm volatile(SUBMISSION_DIRECT_LOAD16("") : "=&r"(v.x), "=&r"(v.y), "=&r"(v.z), "=&r"(v.w) : "l"(p), "r"(int(pred)));
  return v;
}

#undef SUBMISSION_DIRECT_LOAD16

// Where a lane's weight fragments come from, chunk by chunk (load(chunk, in, a, b): for each of
// the warp's kTiles tiles r, rows g and g + 8 of it into a[r] and b[r], k = 32 chunk + 8q .. +7,
// zeros where !in). PackedTiles: each tile's fragments in the order the warps read them,
// [chunk][row half][lane] 16-byte pieces (pack_tiles), zero-padded: a warp's load is 512
// contiguous bytes, where rows of W as they are gave it 64 bytes of each of 8 rows. Tiles
// consecutive tiles from `tile` on, of which the first `count` exist (the rest read as zeros);
// tile_pieces and chunk_pieces are the strides of pack_tiles' TileOrder.
template <int Tiles>  // Tiles: 16-row tiles per warp
struct PackedTiles {
  static constexpr int kTiles = Tiles;
  const uint4* tile;       // the first tile's first chunk
  size_t tile_pieces = 0;  // 16-byte pieces from one tile to the next
  int count = 1;
  size_t chunk_pieces = 64;  // ... and from one chunk of a tile to its next
  __device__ __forceinline__ void load(int chunk, bool in, uint4 (&a)[Tiles], uint4 (&b)[Tiles]) const {
#pragma unroll
    for (int r = 0; r < Tiles; ++r) {
      const uint4* c = tile + r * tile_pieces + size_t(chunk) * chunk_pieces + threadIdx.x % 32;
      a[r] = load_readonly(reinterpret_cast<const __nv_bfloat16*>(c), in && r < count);
      b[r] = load_readonly(reinterpret_cast<const __nv_bfloat16*>(c + 32), in && r < count);
    }
  }
};
using PackedWeights = PackedTiles<1>;

// The weight loads of one batch: Batch chunks from c0 on, stride apart.
template <int Batch, class Weights>  // Batch: chunks per batch
__device__ __forceinline__ void load_weights(const Weights& w, int c0, int end, int stride,
                                             uint4 (&a)[Batch][Weights::kTiles], uint4 (&b)[Batch][Weights::kTiles]) {
#pragma unroll
  for (int u = 0; u < Batch; ++u) {
    const int chunk = c0 + u * stride;
    w.load(chunk, chunk < end, a[u], b[u]);
  }
}

// The token loads of a batch, at the chunks the slots c0 + u * stride hold (kRotated: slot s
// holds chunk s ^ rot, TileStrides).
// TokenTiles: 8-token tiles, Batch: chunks per batch, kRotated: rotated walk
template <int TokenTiles, int Batch, bool kRotated>
__device__ __forceinline__ void load_tokens(const __nv_bfloat16* const (&x)[TokenTiles], int K, int c0, int end,
                                            int stride, uint4 (&xv)[Batch][TokenTiles], int rot) {
  const int q = threadIdx.x % 4;
#pragma unroll
  for (int u = 0; u < Batch; ++u) {
    const int chunk = c0 + u * stride;
    const int k = (kRotated ? chunk ^ rot : chunk) * kChunkK + q * 8;
    const bool in_k = chunk < end && k < K;
#pragma unroll
    for (int n = 0; n < TokenTiles; ++n) xv[u][n] = load_shared_readonly(x[n] + k, in_k && x[n] != nullptr);
  }
}

// A batch's MMAs: each token fragment serves every tile.
// TokenTiles: 8-token tiles, Batch: chunks per batch, Tiles: 16-row tiles per warp
template <int TokenTiles, int Batch, int Tiles>
__device__ __forceinline__ void mma_batch(const uint4 (&a)[Batch][Tiles], const uint4 (&b)[Batch][Tiles],
                                          const uint4 (&xv)[Batch][TokenTiles], float (&acc)[Tiles * TokenTiles][4]) {
#pragma unroll
  for (int u = 0; u < Batch; ++u) {
#pragma unroll
    for (int r = 0; r < Tiles; ++r) {
      const uint4 wa = a[u][r], wb = b[u][r];
#pragma unroll
      for (int n = 0; n < TokenTiles; ++n) {
        mma_bf16(acc[r * TokenTiles + n], wa.x, wb.x, wa.y, wb.y, xv[u][n].x, xv[u][n].y);
        mma_bf16(acc[r * TokenTiles + n], wa.z, wb.z, wa.w, wb.w, xv[u][n].z, xv[u][n].w);
      }
    }
  }
}

// This lane's share of a warp's 16-row tiles: weight rows g and g + 8 of each from w and token
// rows x[n] (token 8n + g), K long, nullptr for a token past the end (it reads as zeros), K a
// multiple of 8 (a thread's 8 k then lie all inside K or all past it). token_rows(x) fills x; it
// runs once the first weights are requested, so that where a row is itself looked up in memory
// (the pooler's last token of a sequence) that DRAM trip overlaps the weights' instead of
// preceding it.
//
// The weights are double-buffered: a batch's loads are issued before the previous batch's MMAs,
// so a warp that loops over several batches keeps one batch of weight bytes in flight while it
// multiplies, instead of draining to zero between batches. The token loads (L2 or L1 hits after
// the first touch) follow the weights of the next batch. With several tiles (one block per SM,
// 255 registers) the tokens are double-buffered too, issued with their batch's weights, so that
// an L2 hit queued behind the weight stream does not gate the batch's MMAs. The caller's launch
// bounds must leave ptxas the registers to keep the loads ahead of the MMAs. A warp whose
// chunks fit one batch issues it and multiplies, nothing more. kOneBatch: the caller knows they
// do (end - first <= Batch * stride), and the loop is not compiled: after an L2 flush the
// kernel's code comes from DRAM too (docs/perf-log.md, rounds 85 and 87). kRotated: w is packed
// in the block's walk, slot s holding chunk s ^ rot (TileStrides), and the token chunks follow
// it; a template argument, so that the callers that never rotate (the router) carry nothing.
// TokenTiles: 8-token tiles, Batch: chunks per batch, kOneBatch: no loop, kRotated: rotated walk
template <int TokenTiles, int Batch, bool kOneBatch = false, bool kRotated = false, class Weights, class TokenRows>
__device__ __forceinline__ void warp_gemm(const Weights& w, const TokenRows& token_rows, int K, int first, int end,
                                          int stride, float (&acc)[Weights::kTiles * TokenTiles][4], int rot = 0) {
  constexpr int kTiles = Weights::kTiles;
  constexpr bool kEarlyTokens = kTiles > 1;
  uint4 a0[Batch][kTiles], b0[Batch][kTiles], x0[Batch][TokenTiles];
  load_weights<Batch>(w, first, end, stride, a0, b0);
  const __nv_bfloat16* x[TokenTiles];
  if constexpr (kOneBatch) {
    // Behind a branch: in one basic block with the weight loads, ptxas put the first use of a
    // looked-up row (the pooler's) ahead of them (docs/perf-log.md, round 87).
    if (first < end) {
      token_rows(x);
      load_tokens<TokenTiles, Batch, kRotated>(x, K, first, end, stride, x0, rot);
      if constexpr (kTiles * TokenTiles == 1) {
        // One accumulator tile: the batch's MMAs would be one dependent chain, which nothing
        // overlaps here. The chunks alternate between two chains, added at the end.
        float acc1[4] = {};
#pragma unroll
        for (int u = 0; u < Batch; ++u) {
          float(&c)[4] = u % 2 == 0 ? acc[0] : acc1;
          const uint4 wa = a0[u][0], wb = b0[u][0], xv = x0[u][0];
          mma_bf16(c, wa.x, wb.x, wa.y, wb.y, xv.x, xv.y);
          mma_bf16(c, wa.z, wb.z, wa.w, wb.w, xv.z, xv.w);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[0][i] += acc1[i];
      } else {
        mma_batch<TokenTiles, Batch>(a0, b0, x0, acc);
      }
    }
  } else {
    const int step = Batch * stride;
    uint4 a1[Batch][kTiles], b1[Batch][kTiles], x1[Batch][TokenTiles];
    token_rows(x);
    if constexpr (kEarlyTokens) load_tokens<TokenTiles, Batch, kRotated>(x, K, first, end, stride, x0, rot);
    for (int c0 = first; c0 < end; c0 += 2 * step) {
      const int c1 = c0 + step;
      if (c1 < end) {
        load_weights<Batch>(w, c1, end, stride, a1, b1);
        if constexpr (kEarlyTokens) load_tokens<TokenTiles, Batch, kRotated>(x, K, c1, end, stride, x1, rot);
      }
      if constexpr (!kEarlyTokens) load_tokens<TokenTiles, Batch, kRotated>(x, K, c0, end, stride, x0, rot);
      mma_batch<TokenTiles, Batch>(a0, b0, x0, acc);
      if (c1 >= end) break;
      if (c1 + step < end) {
        load_weights<Batch>(w, c1 + step, end, stride, a0, b0);
        if constexpr (kEarlyTokens) load_tokens<TokenTiles, Batch, kRotated>(x, K, c1 + step, end, stride, x0, rot);
      }
      if constexpr (!kEarlyTokens) load_tokens<TokenTiles, Batch, kRotated>(x, K, c1, end, stride, x1, rot);
      mma_batch<TokenTiles, Batch>(a1, b1, x1, acc);
    }
  }
}

// The order of pack_tiles' 16-byte pieces: [row half h][lane] within a (tile, chunk) of 1 KB,
// lane (g, q) of half h holding row 16 tile + g + 8h, k = 32 chunk + 8q.., zeros past N and K.
//   tile_major:  [tile][chunk]: each tile one contiguous run (the router's warps each stream
//                their own tiles).
//   chunk_major: [chunk][tile]: chunk c of every tile side by side, so that blocks streaming
//                neighbouring tiles at the same pace read one contiguous region of W at a time,
//                as a plain streaming read does, instead of as many regions as there are blocks.
enum class TileOrder { tile_major, chunk_major };
// Rotated (rot_parts > 1): block b, tiles b * block_tiles .., walks its slots in order, slot s
// holding chunk s ^ rotation(b), rotation(b) = (b mod rot_parts) * rot_group. With rot_group the
// chunks the block's warps take at a time, the blocks in step then ask L2 for rot_parts different
// groups of token chunks instead of one (docs/perf-log.md, round 89), and their weights, packed
// in that order, stay one region. A mask, not an offset that wraps: no compare and select before
// every token load.
// The masks keep every slot inside K where the chunks are whole runs of rot_parts * rot_group;
// elsewhere fewer parts. Both powers of two. Worked out here, on the host: two integer divisions
// in the kernel delayed its first weight loads.
struct TileStrides {
  size_t tile_pieces, chunk_pieces;
  int block_tiles = 1, rot_mask = 0, rot_group = 0;
  __host__ __device__ int rotation(int block) const { return (block & rot_mask) * rot_group; }
};
inline TileStrides tile_strides(TileOrder order, int N, int K, int rot_parts = 1, int block_tiles = 1,
                                int rot_group = 1) {
  auto pow2 = [](int v) { return v >= 1 && (v & (v - 1)) == 0; };
  if (!pow2(rot_parts) || !pow2(rot_group) || block_tiles < 1)
    throw std::invalid_argument("direct::tile_strides: rot_parts, rot_group powers of two, block_tiles >= 1");
  const size_t tiles = size_t(N + 15) / 16, chunks = size_t(K + kChunkK - 1) / kChunkK;
  while (rot_parts > 1 && chunks % (size_t(rot_parts) * rot_group) != 0) rot_parts /= 2;
  TileStrides st = order == TileOrder::tile_major ? TileStrides{chunks * 64, 64} : TileStrides{64, tiles * 64};
  st.block_tiles = block_tiles;
  st.rot_mask = rot_parts - 1;
  st.rot_group = rot_group;
  return st;
}

// Static: this header is in several files. Piece i in tile-major order of the slots, written
// where `st` puts it.
static __global__ void pack_tiles_kernel(const __nv_bfloat16* __restrict__ W, int N, int K, TileStrides st,
                                         uint4* __restrict__ packed, size_t pieces) {
  const int chunks = (K + kChunkK - 1) / kChunkK;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < pieces; i += size_t(gridDim.x) * blockDim.x) {
    const int lane = int(i % 32), h = int(i / 32 % 2), slot = int(i / 64 % chunks);
    const size_t tile = i / 64 / chunks, row = tile * 16 + lane / 4 + 8 * h;
    const int chunk = slot ^ st.rotation(int(tile / st.block_tiles));
    const int k = chunk * kChunkK + lane % 4 * 8;
    packed[tile * st.tile_pieces + slot * st.chunk_pieces + h * 32 + lane] =
        row < size_t(N) && k < K ? *reinterpret_cast<const uint4*>(W + row * K + k) : make_uint4(0, 0, 0, 0);
  }
}

// The packed copy of W[N, K] (K % 8 == 0) laid out as `st` says (tile_strides), ready when this
// returns: tile t, slot c starts at as<uint4>() + t * tile_pieces + c * chunk_pieces.
inline DeviceMemory pack_tiles(const __nv_bfloat16* W, int N, int K, const TileStrides& st) {
  const int chunks = (K + kChunkK - 1) / kChunkK;
  const size_t pieces = size_t((N + 15) / 16) * chunks * 64;
  DeviceMemory packed(pieces * sizeof(uint4));
  const int blocks = int(std::min<size_t>((pieces + 255) / 256, 65535));
  pack_tiles_kernel<<<blocks, 256>>>(W, N, K, st, packed.as<uint4>(), pieces);
  SUBMISSION_CUDA(cudaGetLastError());
  // The caller's stream may not wait on the legacy stream: finish here.
  SUBMISSION_CUDA(cudaDeviceSynchronize());
  return packed;
}
inline DeviceMemory pack_tiles(const __nv_bfloat16* W, int N, int K, TileOrder order = TileOrder::tile_major) {
  return pack_tiles(W, N, K, tile_strides(order, N, K));
}

}  // namespace submission::direct
