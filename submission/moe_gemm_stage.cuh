// The shared pieces of moe_w4a16's two grouped GEMMs, part 1: a
// CTA's stage layout and arguments, its work units' metadata, and the MMAs of a stage. The
// default's kernel (moe_mma_ws.cuh) and the CTA-copies kernel (dev/moe_mma_cta_copies.cuh) are
// built from these and from moe_gemm_epilogue.cuh.
//
// Swap-AB: weight rows are the MMA's M side (16-row tiles), the routes of one
// block are its N side (8-wide token tiles), so a block of 1..8 routes wastes
// no weight bytes. A work unit is (block, tile_rows weight rows) over the whole
// reduction dim; persistent CTAs take units round-robin in row-group-major
// order (or, on the work queue of moe_mma_ws.cuh, as they free up) and
// stream them through one continuous cp.async pipeline of stages of one
// scale group (128 along the reduction dim): every stage holds the unit's
// weights, their scales and the block's activations, so the pipeline never
// drains at a unit boundary. Each warp owns WarpTiles tiles of a unit and all of its
// routes; no reduction across warps or CTAs is needed for a unit.
//
// GEMM 1 (gate_up) ends a unit with SiLU(gate)*up rounded to bf16 into h.
// GEMM 2 (down) may split its reduction into parts (moe_down_splits), each
// part a unit of its own. It writes each (route, part)'s fp32 rows to a
// workspace; the combine sums a token's routes in order j = 0..k-1 (each
// route's parts in order), scaled by topk_weights, and writes the bf16
// output (deterministic: no float atomics). Where it runs is the plan's
// choice (MmaGemmArgs::deferred_combine): after the whole grid's units,
// behind one grid barrier (combine_all_tokens); or unit by unit, a count per
// (token, row group) electing the CTA that completes a token to combine it
// (count_and_combine; the counter resets itself for the next call and for
// graph replays).
#pragma once

#include <cuda_bf16.h>

#include <type_traits>

#include "submission/moe_align.cuh"
#include "submission/moe_plan.h"
#include "submission/moe_ptx.cuh"

namespace submission::moe {

// ------------------------------------------------------------ GEMM kernels
// Stage layout of a CTA with TokenTiles token tiles (block of 8*TokenTiles routes) and WarpTiles
// 16-row tiles per warp (geometry: moe_plan.h).
template <int TokenTiles, int WarpTiles>  // TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
struct MmaTile {
  static constexpr int kTokens = 8 * TokenTiles;
  static constexpr int kTiles = kMmaWarps * WarpTiles;
  static constexpr int kRows = kTiles * kTileRows;
  static constexpr int kWeightBytes = kTiles * kTileGroupBytes;
  static constexpr int kScaleBytes = kTiles * kTileGroupScaleWords * 4;
  static constexpr int kActBytes = kTokens * kGroup * 2;
  static constexpr int kStageBytes = mma_stage_bytes(kTokens, kTiles);
  static_assert(kStageBytes == kWeightBytes + kScaleBytes + kActBytes + mma_meta_ints(kTokens) * 4, "");
  // Copy mapping of issue_weights/issue_acts: thread tid copies 16-byte chunk
  // tid%16 of slots tid/16 + 8j, and at most one 16-byte scale chunk.
  static_assert(kMmaThreads == 128 && kTiles * 2 <= kMmaThreads, "copy mapping");
};

struct MmaGemmArgs {
  const uint4* weights;      // repacked codes (tile_group_words), with the scales where stage-packed
  const uint4* scales;       // repacked scales apart, or = weights where stage-packed
  int tiles;                 // 16-row tiles per expert: 2I/16 (GEMM 1), H/16 (GEMM 2)
  int groups;                // reduction dim / 128
  int splits;                // parts the reduction is split into (a divisor of groups; 1 in GEMM 1)
  const __nv_bfloat16* act;  // GEMM 1: X [M][H], row of route r = r/k; GEMM 2: h [M*k][I], row r
  AlignedRoutes routes;
  __nv_bfloat16* h;      // GEMM 1 output [M*k][I]
  float* partial;        // GEMM 2: fp32 rows of each route and split [M*k][splits][H]
  int* counters;         // GEMM 2: finished (route, split) units per (token, row group), zero between calls
  int deferred_combine;  // GEMM 2: 1 = combine_all_tokens after every unit, 0 = count_and_combine per unit
  unsigned long long* grid_arrivals;  // GEMM 2 deferred: CTAs arrived at the barrier, ever (never reset)
  int stream_k;                       // GEMM 1: 1 = stream-K schedule (see moe_mma_kernel), 0 = whole units
  float4* sk_partial;  // GEMM 1 stream-K: each CTA's part of its first unit, [grid][128 threads][WarpTiles*TokenTiles]
  int* sk_counters;    // GEMM 1 stream-K: stages summed so far per unit, zero between calls
  __nv_bfloat16* out;  // [M][H]
  const int32_t* topk_ids;  // [M][k]
  const float* topk_weights;
  int M, H, I, k, ep_rank, E_local;
  int cta_align;   // 1: the CTA aligns the routes itself (cta_align_routes), `routes` unused
  int max_blocks;  // the routing's block bound (cta_align's layout)
  // The work queue (moe_ws_kernel with kQueue, moe_mma_ws.cuh), each GEMM its own:
  int* queue;             // [2]: pieces taken, CTAs done; zero between calls
  int chunk_stages;       // GEMM 1: stages per chunk of a unit (the unit's last chunk may be shorter)
  float4* chunk_partial;  // GEMM 1: each chunk's posted accumulators [chunk][MMA warp][WarpTiles*TokenTiles][32 lanes]
  int* chunk_counters;    // GEMM 1: chunks posted per (unit, MMA warp), zero between calls
  // GEMM 1 -> GEMM 2 unit by unit (the plan's h_flags; nullptr: GEMM 2 waits
  // for GEMM 1's whole grid), see publish_h and wait_h:
  unsigned* h_ready;  // [max_blocks][h_row_groups]: the call's ticket once that unit's h is stored
  unsigned* tickets;  // [2]: the last call's ticket; GEMM 2's CTAs done in this call
  int h_row_groups;   // GEMM 1's row groups per block
  int rotate;         // warp-specialised GEMM 1: 1 = each unit's stages start at a group of its own
};

// A read of the routing: L2 (.cg) where it is the alignment launch's output
// in global memory (GEMM 2 reads it before its PDL wait, when no L1 line of
// it can be older than the alignment), plain where a CTA aligned its own
// routes into shared memory.
__device__ __forceinline__ int routing_load(const int* p) { return __isShared(p) ? *p : __ldcg(p); }

// With a.cta_align, warp 0 lays this CTA's own routing out in shared memory
// at `smem` (up to 32 routes, moe_align.cuh), readable after the caller's
// next CTA barrier, and this returns smem; otherwise nullptr: the CTA reads
// the alignment launch's (a.routes). CtaStages::routes gives either.
template <int TokenTiles>  // TokenTiles: 8-token tiles
__device__ __forceinline__ int* cta_align_routes(const MmaGemmArgs& a, int* smem) {
  if (!a.cta_align) return nullptr;
  if (threadIdx.x < 32)
    align_routes_warp(a.topk_ids, a.M, a.k, a.E_local, a.ep_rank, 8 * TokenTiles, a.max_blocks,
                      aligned_routes_at(smem, 8 * TokenTiles, a.max_blocks));
  return smem;
}

// What a thread needs to issue the loads of one unit. The copy sources are
// resolved here, once per unit, so that a stage only adds its group's offset:
// per copy, the full address took ~15 dependent integer instructions and
// GEMM 1's token of a route a double-precision multiply, a quarter of the
// loop's issue slots.
template <int TokenTiles>  // TokenTiles: 8-token tiles
struct UnitMeta {
  int block = -1, row_group = 0, split = 0, expert = 0, routes = 0;
  int rot = 0;              // GEMM 1: the producer's first stage of the unit reads its group rot (stage_group)
  int route[TokenTiles];    // route of slot (tid/16) + 8j: the slots whose activations this thread copies
  int act_row[TokenTiles];  // GEMM 1: the route's token, its activation row (-1: padding); GEMM 2 reads row route
  const uint4* w_src;       // this thread's first weight chunk of group 0
  const uint4* s_src;       // its scale chunk of group 0 (threads < 2 * tiles), weights apart only
};

// Which copies of a stage a thread issues (a policy type, computed from
// threadIdx where used, so that no register holds it across the kernel):
// the activation slots slot0() + 8j, 16-byte chunk w_chunk() of the unit's
// tile w_tile(), scale chunk s_chunk() of tile s_tile() (both in uint4); and
// kDown: GEMM 2, kContig: unit-packed weights, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp, Map: copy
// mapping
template <bool kDown, bool kContig, int TokenTiles, int WarpTiles, class Map>
__device__ __forceinline__ UnitMeta<TokenTiles> load_unit(const MmaGemmArgs& a, const AlignedRoutes& routes, int unit,
                                                          int units, int blocks, int splits, double inv_k) {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  constexpr int kPack = kContig ? Tile::kTiles : 1;
  UnitMeta<TokenTiles> u;
#pragma unroll
  for (int j = 0; j < TokenTiles; ++j) u.route[j] = u.act_row[j] = -1;
  u.w_src = u.s_src = a.weights;
  if (unit >= units) return u;
  // Row-group-major: CTAs working at the same time share row groups, so the
  // GEMM 2 combine of a row group happens early instead of all at the end.
  const int per_row_group = blocks * splits;
  u.row_group = unit / per_row_group;
  const int rest = unit - u.row_group * per_row_group;
  u.split = rest / blocks;
  u.block = rest - u.split * blocks;
  if constexpr (!kDown) u.rot = a.rotate ? (u.block + u.row_group) % a.groups : 0;
  u.expert = routing_load(routes.block_expert + u.block);
  u.routes = routing_load(routes.block_routes + u.block);
#pragma unroll
  for (int j = 0; j < TokenTiles; ++j) {
    const int r = routing_load(routes.slot_route + u.block * Tile::kTokens + Map::slot0() + 8 * j);
    u.route[j] = r;
    if constexpr (!kDown) u.act_row[j] = r < 0 ? -1 : moe_route_token(r, inv_k);
  }
  // Within a unit tile_group_index is linear in the group (step kPack) and,
  // for a fixed group, in the tile (step `groups` with packs of 1, 1 within a
  // pack of the unit's tiles); so are the word offsets of either layout.
  const size_t tile0 = size_t(u.expert) * a.tiles + size_t(u.row_group) * Tile::kTiles;
  static_assert(kContig || !Map::kStagePacked, "stage-packed weights come in packs of the unit's tiles");
  u.w_src = a.weights + tile_group_words(tile0 + Map::w_tile(), 0, a.groups, kPack, Map::kStagePacked).codes / 4 +
            Map::w_chunk();
  if constexpr (!Map::kStagePacked)  // stage-packed, a stage's scales follow its codes in w_src's run
    u.s_src = a.scales + tile_group_words(tile0 + Map::s_tile(), 0, a.groups, kPack, false).scales / 4 + Map::s_chunk();
  return u;
}

// One stage's MMAs: acc += scale * (W_q - 8) . act, per 16-row tile and
// 8-route tile, for the block's first RoutedTiles token tiles (the others hold only
// padding routes). RoutedTiles is a template argument, so that no MMA is predicated:
// predicated on the route count (from shared memory, not provably uniform),
// each mma.sync took a WARPSYNC of its own (ncu: 12.5% of qwen3 m256's
// instructions).
// RoutedTiles: token tiles holding a route, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
template <int RoutedTiles, int TokenTiles, int WarpTiles>
__device__ __forceinline__ void compute_stage_tiles(const unsigned char* stage, const uint4* minus136_frag,
                                                    float (&acc)[WarpTiles][TokenTiles][4]) {
  static_assert(RoutedTiles >= 1 && RoutedTiles <= TokenTiles, "");
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const uint4* ws = reinterpret_cast<const uint4*>(stage);
  const uint32_t* sw = reinterpret_cast<const uint32_t*>(stage + Tile::kWeightBytes);
  const uint4* xs = reinterpret_cast<const uint4*>(stage + Tile::kWeightBytes + Tile::kScaleBytes);
  // The lane's 8 A words of each tile (word 2p + s: piece p, step s), two LDS.128.
  uint32_t wq[WarpTiles][8];
  uint32_t scale[WarpTiles];
#pragma unroll
  for (int rt = 0; rt < WarpTiles; ++rt) {
    const int lt = warp * WarpTiles + rt;
    const uint4 h0 = ws[lt * 64 + lane], h1 = ws[lt * 64 + 32 + lane];
    wq[rt][0] = h0.x, wq[rt][1] = h0.y, wq[rt][2] = h0.z, wq[rt][3] = h0.w;
    wq[rt][4] = h1.x, wq[rt][5] = h1.y, wq[rt][6] = h1.z, wq[rt][7] = h1.w;
    scale[rt] = sw[lt * kTileGroupScaleWords + g];
  }
  // Per-group partial sums of the biased codes (128 + q) . act; the scale
  // multiplies them once per group in fp32. zero[nt] = -136 . act over the
  // group, the same for every row, folds the bias and the zero point 8 back
  // in: one MMA per k16 step and token tile for all WarpTiles tiles, instead of a
  // subtract per A register, WarpTiles x 32 per stage. That pays at one token tile
  // only. From two on, each A register is unbiased by a bf16x2 subtract
  // (exact): more instructions, but on the FMA pipe rather than the tensor
  // pipe, the busier one (docs/perf-log.md rounds 75-76: folding at two
  // tiles ran blocks of 32 1.5-2.4% slower, at three another 5%; never
  // folding ran blocks of 8 up to 2.5% slower). The constant fragment comes
  // from shared memory: built from immediates, ptxas re-created it before
  // every such MMA (5 instructions each).
  constexpr bool kFoldZero = RoutedTiles == 1;
  float part[WarpTiles][RoutedTiles][4], zero[RoutedTiles][4];
#pragma unroll
  for (int nt = 0; nt < RoutedTiles; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      zero[nt][i] = 0.f;
#pragma unroll
      for (int rt = 0; rt < WarpTiles; ++rt) part[rt][nt][i] = 0.f;
    }
  uint32_t minus136[4] = {};
  if constexpr (kFoldZero) {
    const uint4 z = *minus136_frag;
    minus136[0] = z.x, minus136[1] = z.y, minus136[2] = z.z, minus136[3] = z.w;
  }
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    uint32_t b[RoutedTiles][4];
#pragma unroll
    for (int nt = 0; nt < RoutedTiles; ++nt) {
      const uint4 v = xs[act_fragment_uint4(p, nt * 8 + g, t, Tile::kTokens)];
      b[nt][0] = v.x, b[nt][1] = v.y, b[nt][2] = v.z, b[nt][3] = v.w;
    }
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      if constexpr (kFoldZero)
#pragma unroll
        for (int nt = 0; nt < RoutedTiles; ++nt) mma_bf16(zero[nt], minus136, b[nt][2 * s], b[nt][2 * s + 1]);
#pragma unroll
      for (int rt = 0; rt < WarpTiles; ++rt) {
        uint32_t af[4];
        biased_word(wq[rt][2 * p + s], af);
        if constexpr (!kFoldZero) unbias(af);
#pragma unroll
        for (int nt = 0; nt < RoutedTiles; ++nt) mma_bf16(part[rt][nt], af, b[nt][2 * s], b[nt][2 * s + 1]);
      }
    }
  }
#pragma unroll
  for (int rt = 0; rt < WarpTiles; ++rt) {
    const float lo = bf16_lo_to_float(scale[rt]), hi = bf16_hi_to_float(scale[rt]);
#pragma unroll
    for (int nt = 0; nt < RoutedTiles; ++nt) {
      // Not folded, zero[] stays 0, but x + 0.f is no identity in IEEE
      // (-0 + 0 = +0), so the compiler would keep the adds in the loop.
      if constexpr (kFoldZero)
#pragma unroll
        for (int i = 0; i < 4; ++i) part[rt][nt][i] += zero[nt][i];
      acc[rt][nt][0] = fmaf(lo, part[rt][nt][0], acc[rt][nt][0]);
      acc[rt][nt][1] = fmaf(lo, part[rt][nt][1], acc[rt][nt][1]);
      acc[rt][nt][2] = fmaf(hi, part[rt][nt][2], acc[rt][nt][2]);
      acc[rt][nt][3] = fmaf(hi, part[rt][nt][3], acc[rt][nt][3]);
    }
  }
}

// f(std::integral_constant<int, RoutedTiles>) for RoutedTiles = the token tiles that hold one of
// the block's routes (a block has at least one), chosen at run time so
// that f's MMAs need no predicate (compute_stage_tiles).
// TokenTiles: 8-token tiles, RoutedTiles: token tiles holding a route
template <int TokenTiles, int RoutedTiles = TokenTiles, class F>
__device__ __forceinline__ void with_route_tiles(int routes, const F& f) {
  if constexpr (RoutedTiles > 1) {
    if (routes <= 8 * (RoutedTiles - 1)) {
      with_route_tiles<TokenTiles, RoutedTiles - 1>(routes, f);
      return;
    }
  }
  f(std::integral_constant<int, RoutedTiles>{});
}

// The stage's MMAs for the block's routes.
template <int TokenTiles, int WarpTiles>  // TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
__device__ __forceinline__ void compute_stage(const unsigned char* stage, int routes, const uint4* minus136_frag,
                                              float (&acc)[WarpTiles][TokenTiles][4]) {
  with_route_tiles<TokenTiles>(routes, [&](auto n) {
    compute_stage_tiles<decltype(n)::value, TokenTiles, WarpTiles>(stage, minus136_frag, acc);
  });
}

// Two stages of the same unit, one after the other in the instruction
// stream with no branch between them, so that the scheduler can overlap the
// second's loads and dequantisation with the first's MMA chain.
template <int TokenTiles, int WarpTiles>  // TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
__device__ __forceinline__ void compute_two_stages(const unsigned char* stage0, const unsigned char* stage1, int routes,
                                                   const uint4* minus136_frag, float (&acc)[WarpTiles][TokenTiles][4]) {
  with_route_tiles<TokenTiles>(routes, [&](auto n) {
    compute_stage_tiles<decltype(n)::value, TokenTiles, WarpTiles>(stage0, minus136_frag, acc);
    compute_stage_tiles<decltype(n)::value, TokenTiles, WarpTiles>(stage1, minus136_frag, acc);
  });
}

template <int TokenTiles, int WarpTiles>  // TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
__device__ __forceinline__ void zero_acc(float (&acc)[WarpTiles][TokenTiles][4]) {
#pragma unroll
  for (int rt = 0; rt < WarpTiles; ++rt)
#pragma unroll
    for (int nt = 0; nt < TokenTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[rt][nt][i] = 0.f;
}

// A barrier of the kMmaThreads threads that compute (the whole CTA, or all
// but the producer warp of moe_ws_kernel), for the unit epilogues.
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kMmaThreads) : "memory"); }

}  // namespace submission::moe
