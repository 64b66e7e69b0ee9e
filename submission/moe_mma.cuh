// The tensor-core path of moe_w4a16: weight repacking (prepare) and the two
// grouped GEMMs (launches 2 and 3 of run). The pieces both GEMM kernels
// share (units, stages, MMAs, epilogues, schedule) live here, with
// moe_mma_kernel, whose threads all copy and compute; the default runs them
// on moe_ws_kernel (moe_mma_ws.cuh), with a producer warp that copies.
//
// Swap-AB: weight rows are the MMA's M side (16-row tiles), the routes of one
// block are its N side (8-wide token tiles), so a block of 1..8 routes wastes
// no weight bytes. A work unit is (block, tile_rows weight rows) over the whole
// reduction dim; persistent CTAs take units round-robin in row-group-major
// order (or, on the work queue of moe_mma_ws.cuh, as they free up) and
// stream them through one continuous cp.async pipeline of stages of one
// scale group (128 along the reduction dim): every stage holds the unit's
// weights, their scales and the block's activations, so the pipeline never
// drains at a unit boundary. Each warp owns RT tiles of a unit and all of its
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

// ------------------------------------------------------------ repack (prepare)
// One thread per destination word of the layout in moe_plan.h, placed by
// tile_group_words with packs of `pack` tiles: apart (codes_out, scales_out)
// or stage-packed (both into codes_out; scales_out unused). Sources: codes
// [E][rows][K/2], scales [E][rows][K/128]. `w13` selects the gate/up row
// interleave.
__global__ void moe_repack_kernel(const uint8_t* __restrict__ codes, const uint16_t* __restrict__ scales,
                                  uint32_t* codes_out, uint32_t* scales_out,
                                  int E, int tiles, int K, int I, bool w13, int pack, bool stage_packed) {
  const int groups = K / kGroup, rows = tiles * kTileRows;
  const size_t tile_groups = size_t(E) * tiles * groups;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < tile_groups * kTileGroupWords;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t tg = i / kTileGroupWords;  // (e, tile, group), group fastest
    const int q = int(i % kTileGroupWords), lane = q / 8, w = q % 8;
    const int group = int(tg % groups), tile = int(tg / groups % tiles), e = int(tg / groups / tiles);
    const TileGroupWords dst = tile_group_words(size_t(e) * tiles + tile, group, groups, pack, stage_packed);
    codes_out[dst.codes + tile_word_index(lane, w)] = repacked_code_word(
        codes + size_t(e) * rows * (K / 2), K, I, w13, tile, group, lane, w);
    if (q < kTileGroupScaleWords)
      (stage_packed ? codes_out : scales_out)[dst.scales + q] = repacked_scale_word(
          scales + size_t(e) * rows * groups, K, I, w13, tile, group, q);
  }
}

// ------------------------------------------------------------ GEMM kernels
// Stage layout of a CTA with NT token tiles (block of 8*NT routes) and RT
// 16-row tiles per warp (geometry: moe_plan.h).
template <int NT, int RT>
struct MmaTile {
  static constexpr int kTokens = 8 * NT;
  static constexpr int kTiles = kMmaWarps * RT;
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

// The pipeline of such a CTA when C of them share an SM: as many stages as
// its share of shared memory holds.
template <int NT, int RT, int C>
struct MmaPipeline {
  using T = MmaTile<NT, RT>;
  static constexpr int kStages = mma_stages(T::kTokens, T::kTiles, C);
  // + the tokens this CTA combines after a GEMM 2 unit, and the constant A
  // fragment of compute_stage's zero-point MMA
  static constexpr int kSmemBytes = kStages * T::kStageBytes + mma_tail_bytes(T::kTokens);
  static_assert(kStages >= 3, "pipeline too shallow");
  static_assert(kSmemBytes <= mma_smem_budget(C), "");
};

struct MmaGemmArgs {
  const uint4* weights;     // repacked codes (tile_group_words), with the scales where stage-packed
  const uint4* scales;      // repacked scales apart, or = weights where stage-packed
  int tiles;                // 16-row tiles per expert: 2I/16 (GEMM 1), H/16 (GEMM 2)
  int groups;               // reduction dim / 128
  int splits;               // parts the reduction is split into (a divisor of groups; 1 in GEMM 1)
  const __nv_bfloat16* act; // GEMM 1: X [M][H], row of route r = r/k; GEMM 2: h [M*k][I], row r
  AlignedRoutes routes;
  __nv_bfloat16* h;         // GEMM 1 output [M*k][I]
  float* partial;           // GEMM 2: fp32 rows of each route and split [M*k][splits][H]
  int* counters;            // GEMM 2: finished (route, split) units per (token, row group), zero between calls
  int deferred_combine;     // GEMM 2: 1 = combine_all_tokens after every unit, 0 = count_and_combine per unit
  unsigned long long* grid_arrivals;  // GEMM 2 deferred: CTAs arrived at the barrier, ever (never reset)
  int stream_k;             // GEMM 1: 1 = stream-K schedule (see moe_mma_kernel), 0 = whole units
  float4* sk_partial;       // GEMM 1 stream-K: each CTA's part of its first unit, [grid][128 threads][RT*NT]
  int* sk_counters;         // GEMM 1 stream-K: stages summed so far per unit, zero between calls
  __nv_bfloat16* out;       // [M][H]
  const int32_t* topk_ids;  // [M][k]
  const float* topk_weights;
  int M, H, I, k, ep_rank, E_local;
  int cta_align;            // 1: the CTA aligns the routes itself (cta_align_routes), `routes` unused
  int max_blocks;           // the routing's block bound (cta_align's layout)
  // The work queue (moe_ws_kernel with kQueue, moe_mma_ws.cuh), each GEMM its own:
  int* queue;               // [2]: pieces taken, CTAs done; zero between calls
  int chunk_stages;         // GEMM 1: stages per chunk of a unit (the unit's last chunk may be shorter)
  float4* chunk_partial;    // GEMM 1: each chunk's posted accumulators [chunk][MMA warp][RT*NT][32 lanes]
  int* chunk_counters;      // GEMM 1: chunks posted per (unit, MMA warp), zero between calls
  // GEMM 1 -> GEMM 2 unit by unit (the plan's h_flags; nullptr: GEMM 2 waits
  // for GEMM 1's whole grid), see publish_h and wait_h:
  unsigned* h_ready;        // [max_blocks][h_row_groups]: the call's ticket once that unit's h is stored
  unsigned* tickets;        // [2]: the last call's ticket; GEMM 2's CTAs done in this call
  int h_row_groups;         // GEMM 1's row groups per block
  int rotate;               // warp-specialised GEMM 1: 1 = each unit's stages start at a group of its own
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
template <int NT>
__device__ __forceinline__ int* cta_align_routes(const MmaGemmArgs& a, int* smem) {
  if (!a.cta_align) return nullptr;
  if (threadIdx.x < 32)
    align_routes_warp(a.topk_ids, a.M, a.k, a.E_local, a.ep_rank, 8 * NT, a.max_blocks,
                      aligned_routes_at(smem, 8 * NT, a.max_blocks));
  return smem;
}

// What a thread needs to issue the loads of one unit. The copy sources are
// resolved here, once per unit, so that a stage only adds its group's offset:
// per copy, the full address took ~15 dependent integer instructions and
// GEMM 1's token of a route a double-precision multiply, a quarter of the
// loop's issue slots.
template <int NT>
struct UnitMeta {
  int block = -1, row_group = 0, split = 0, expert = 0, routes = 0;
  int rot = 0;      // GEMM 1: the producer's first stage of the unit reads its group rot (stage_group)
  int route[NT];    // route of slot (tid/16) + 8j: the slots whose activations this thread copies
  int act_row[NT];  // GEMM 1: the route's token, its activation row (-1: padding); GEMM 2 reads row route
  const uint4* w_src;  // this thread's first weight chunk of group 0
  const uint4* s_src;  // its scale chunk of group 0 (threads < 2 * tiles), weights apart only
};

// Which copies of a stage a thread issues (a policy type, computed from
// threadIdx where used, so that no register holds it across the kernel):
// the activation slots slot0() + 8j, 16-byte chunk w_chunk() of the unit's
// tile w_tile(), scale chunk s_chunk() of tile s_tile() (both in uint4); and
// which layout of tile_group_words the weights were repacked in.
// AllThreadsCopy, for issue_weights/issue_acts with all 128 threads copying:
// thread tid copies chunk tid % 64 of tiles tid/64 + 2j, scale chunk tid % 2
// of tile tid/2, and chunk tid % 16 of slots tid/16 + 8j.
template <int NT, int RT>
struct AllThreadsCopy {
  static constexpr bool kStagePacked = false;
  __device__ static int slot0() { return threadIdx.x >> 4; }
  __device__ static int w_tile() { return threadIdx.x >> 6; }
  __device__ static int w_chunk() { return threadIdx.x & 63; }
  __device__ static int s_tile() { return threadIdx.x < MmaTile<NT, RT>::kTiles * 2 ? threadIdx.x >> 1 : 0; }
  __device__ static int s_chunk() { return threadIdx.x & 1; }
};

template <bool kDown, bool kContig, int NT, int RT, class Map>
__device__ __forceinline__ UnitMeta<NT> load_unit(const MmaGemmArgs& a, const AlignedRoutes& routes, int unit,
                                                  int units, int blocks, int splits, double inv_k) {
  using T = MmaTile<NT, RT>;
  constexpr int kPack = kContig ? T::kTiles : 1;
  UnitMeta<NT> u;
#pragma unroll
  for (int j = 0; j < NT; ++j) u.route[j] = u.act_row[j] = -1;
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
  for (int j = 0; j < NT; ++j) {
    const int r = routing_load(routes.slot_route + u.block * T::kTokens + Map::slot0() + 8 * j);
    u.route[j] = r;
    if constexpr (!kDown) u.act_row[j] = r < 0 ? -1 : moe_route_token(r, inv_k);
  }
  // Within a unit tile_group_index is linear in the group (step kPack) and,
  // for a fixed group, in the tile (step `groups` with packs of 1, 1 within a
  // pack of the unit's tiles); so are the word offsets of either layout.
  const size_t tile0 = size_t(u.expert) * a.tiles + size_t(u.row_group) * T::kTiles;
  static_assert(kContig || !Map::kStagePacked, "stage-packed weights come in packs of the unit's tiles");
  u.w_src = a.weights + tile_group_words(tile0 + Map::w_tile(), 0, a.groups, kPack, Map::kStagePacked).codes / 4 +
            Map::w_chunk();
  if constexpr (!Map::kStagePacked)  // stage-packed, a stage's scales follow its codes in w_src's run
    u.s_src = a.scales + tile_group_words(tile0 + Map::s_tile(), 0, a.groups, kPack, false).scales / 4 +
              Map::s_chunk();
  return u;
}

// The cp.async copies of one stage, group `group` of unit `u`, in two parts:
// the weights and scales, which depend only on the routing, and the
// activations with the stage's metadata, which in GEMM 2 are GEMM 1's output.
// kContig: the weights were packed per unit (pack = the unit's tiles), so
// the stage's tile-groups are one contiguous run; otherwise pack = 1.
template <bool kContig, int NT, int RT>
__device__ __forceinline__ void issue_weights(const MmaGemmArgs& a, const UnitMeta<NT>& u, int group,
                                              unsigned char* stage) {
  using T = MmaTile<NT, RT>;
  constexpr int kPack = kContig ? T::kTiles : 1;
  const int tid = threadIdx.x;
  uint4* ws = reinterpret_cast<uint4*>(stage);
  uint4* ss = reinterpret_cast<uint4*>(stage + T::kWeightBytes);
  const uint4* src = u.w_src + size_t(group) * (kPack * 64);
  const size_t step = (kContig ? size_t(2) : size_t(2) * a.groups) * 64;
#pragma unroll
  for (int j = 0; j < T::kTiles / 2; ++j) cp_async16(ws + tid + kMmaThreads * j, src + j * step, 16);
  if (tid < T::kTiles * 2) cp_async16(ss + tid, u.s_src + size_t(group) * (kPack * 2), 16);
}

template <bool kDown, int NT, int RT>
__device__ __forceinline__ void issue_acts(const MmaGemmArgs& a, const UnitMeta<NT>& u, int group,
                                           unsigned char* stage) {
  using T = MmaTile<NT, RT>;
  const int tid = threadIdx.x;
  uint4* xs = reinterpret_cast<uint4*>(stage + T::kWeightBytes + T::kScaleBytes);
  int* meta = reinterpret_cast<int*>(stage + T::kWeightBytes + T::kScaleBytes + T::kActBytes);
  const int K = a.groups * kGroup, chunk = tid & 15;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int slot = (tid >> 4) + 8 * j, row = kDown ? u.route[j] : u.act_row[j];
    const __nv_bfloat16* src = row >= 0 ? a.act + size_t(row) * K + group * kGroup + chunk * 8 : a.act;
    cp_async16(xs + act_stage_uint4(chunk, slot, T::kTokens), src, row >= 0 ? 16 : 0);  // padding: zeros
  }
  if (tid == 0) {
    meta[0] = u.block;
    meta[1] = u.row_group;
    meta[2] = u.routes;
    meta[3] = u.split;
  }
  if (chunk == 0) {
#pragma unroll
    for (int j = 0; j < NT; ++j) meta[4 + (tid >> 4) + 8 * j] = u.route[j];
  }
}

// One stage's MMAs: acc += scale * (W_q - 8) . act, per 16-row tile and
// 8-route tile, for the block's first N token tiles (the others hold only
// padding routes). N is a template argument, so that no MMA is predicated:
// predicated on the route count (from shared memory, not provably uniform),
// each mma.sync took a WARPSYNC of its own (ncu: 12.5% of qwen3 m256's
// instructions).
template <int N, int NT, int RT>
__device__ __forceinline__ void compute_stage_tiles(const unsigned char* stage, const uint4* minus136_frag,
                                                    float (&acc)[RT][NT][4]) {
  static_assert(N >= 1 && N <= NT, "");
  using T = MmaTile<NT, RT>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const uint4* ws = reinterpret_cast<const uint4*>(stage);
  const uint32_t* sw = reinterpret_cast<const uint32_t*>(stage + T::kWeightBytes);
  const uint4* xs = reinterpret_cast<const uint4*>(stage + T::kWeightBytes + T::kScaleBytes);
  // The lane's 8 A words of each tile (word 2p + s: piece p, step s), two LDS.128.
  uint32_t wq[RT][8];
  uint32_t scale[RT];
#pragma unroll
  for (int rt = 0; rt < RT; ++rt) {
    const int lt = warp * RT + rt;
    const uint4 h0 = ws[lt * 64 + lane], h1 = ws[lt * 64 + 32 + lane];
    wq[rt][0] = h0.x, wq[rt][1] = h0.y, wq[rt][2] = h0.z, wq[rt][3] = h0.w;
    wq[rt][4] = h1.x, wq[rt][5] = h1.y, wq[rt][6] = h1.z, wq[rt][7] = h1.w;
    scale[rt] = sw[lt * kTileGroupScaleWords + g];
  }
  // Per-group partial sums of the biased codes (128 + q) . act; the scale
  // multiplies them once per group in fp32. zero[nt] = -136 . act over the
  // group, the same for every row, folds the bias and the zero point 8 back
  // in: one MMA per k16 step and token tile for all RT tiles, instead of a
  // subtract per A register, RT x 32 per stage. That pays at one token tile
  // only. From two on, each A register is unbiased by a bf16x2 subtract
  // (exact): more instructions, but on the FMA pipe rather than the tensor
  // pipe, the busier one (docs/perf-log.md rounds 75-76: folding at two
  // tiles ran blocks of 32 1.5-2.4% slower, at three another 5%; never
  // folding ran blocks of 8 up to 2.5% slower). The constant fragment comes
  // from shared memory: built from immediates, ptxas re-created it before
  // every such MMA (5 instructions each).
  constexpr bool kFoldZero = N == 1;
  float part[RT][N][4], zero[N][4];
#pragma unroll
  for (int nt = 0; nt < N; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      zero[nt][i] = 0.f;
#pragma unroll
      for (int rt = 0; rt < RT; ++rt) part[rt][nt][i] = 0.f;
    }
  uint32_t minus136[4] = {};
  if constexpr (kFoldZero) {
    const uint4 z = *minus136_frag;
    minus136[0] = z.x, minus136[1] = z.y, minus136[2] = z.z, minus136[3] = z.w;
  }
#pragma unroll
  for (int p = 0; p < 4; ++p) {
    uint32_t b[N][4];
#pragma unroll
    for (int nt = 0; nt < N; ++nt) {
      const uint4 v = xs[act_fragment_uint4(p, nt * 8 + g, t, T::kTokens)];
      b[nt][0] = v.x, b[nt][1] = v.y, b[nt][2] = v.z, b[nt][3] = v.w;
    }
#pragma unroll
    for (int s = 0; s < 2; ++s) {
      if constexpr (kFoldZero)
#pragma unroll
        for (int nt = 0; nt < N; ++nt) mma_bf16(zero[nt], minus136, b[nt][2 * s], b[nt][2 * s + 1]);
#pragma unroll
      for (int rt = 0; rt < RT; ++rt) {
        uint32_t af[4];
        biased_word(wq[rt][2 * p + s], af);
        if constexpr (!kFoldZero) unbias(af);
#pragma unroll
        for (int nt = 0; nt < N; ++nt) mma_bf16(part[rt][nt], af, b[nt][2 * s], b[nt][2 * s + 1]);
      }
    }
  }
#pragma unroll
  for (int rt = 0; rt < RT; ++rt) {
    const float lo = bf16_lo_to_float(scale[rt]), hi = bf16_hi_to_float(scale[rt]);
#pragma unroll
    for (int nt = 0; nt < N; ++nt) {
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

// f(std::integral_constant<int, N>) for N = the token tiles that hold one of
// the block's routes (a block has at least one), chosen at run time so
// that f's MMAs need no predicate (compute_stage_tiles).
template <int NT, int N = NT, class F>
__device__ __forceinline__ void with_route_tiles(int routes, const F& f) {
  if constexpr (N > 1) {
    if (routes <= 8 * (N - 1)) {
      with_route_tiles<NT, N - 1>(routes, f);
      return;
    }
  }
  f(std::integral_constant<int, N>{});
}

// The stage's MMAs for the block's routes.
template <int NT, int RT>
__device__ __forceinline__ void compute_stage(const unsigned char* stage, int routes, const uint4* minus136_frag,
                                              float (&acc)[RT][NT][4]) {
  with_route_tiles<NT>(routes,
                       [&](auto n) { compute_stage_tiles<decltype(n)::value, NT, RT>(stage, minus136_frag, acc); });
}

// Two stages of the same unit, one after the other in the instruction
// stream with no branch between them, so that the scheduler can overlap the
// second's loads and dequantisation with the first's MMA chain.
template <int NT, int RT>
__device__ __forceinline__ void compute_two_stages(const unsigned char* stage0, const unsigned char* stage1, int routes,
                                                   const uint4* minus136_frag, float (&acc)[RT][NT][4]) {
  with_route_tiles<NT>(routes, [&](auto n) {
    compute_stage_tiles<decltype(n)::value, NT, RT>(stage0, minus136_frag, acc);
    compute_stage_tiles<decltype(n)::value, NT, RT>(stage1, minus136_frag, acc);
  });
}

template <int NT, int RT>
__device__ __forceinline__ void zero_acc(float (&acc)[RT][NT][4]) {
#pragma unroll
  for (int rt = 0; rt < RT; ++rt)
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[rt][nt][i] = 0.f;
}

// A barrier of the kMmaThreads threads that compute (the whole CTA, or all
// but the producer warp of moe_ws_kernel), for the unit epilogues.
__device__ __forceinline__ void consumers_sync() { asm volatile("bar.sync 1, %0;" ::"n"(kMmaThreads) : "memory"); }

// GEMM 1 epilogue: accumulator rows g (gate) and g+8 (up) of a tile belong to
// the same output i (see w13_source_row), so h needs no data exchange.
template <int NT, int RT>
__device__ __forceinline__ void store_h(const MmaGemmArgs& a, const int* meta,
                                        const float (&acc)[RT][NT][4]) {
  using T = MmaTile<NT, RT>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int row_group = meta[1], routes = meta[2];
  const int* route = meta + 4;
#pragma unroll
  for (int rt = 0; rt < RT; ++rt) {
    const int i = (row_group * T::kTiles + warp * RT + rt) * 8 + g;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int col = nt * 8 + 2 * t + c;
        if (col < routes) {
          const float gate = acc[rt][nt][c], up = acc[rt][nt][2 + c];
          a.h[size_t(route[col]) * a.I + i] = __float2bfloat16(gate / (1.f + expf(-gate)) * up);
        }
      }
  }
}

// The combine's arithmetic on one output (float) or four (float4).
__device__ __forceinline__ float add_part(float x, float y) { return x + y; }
__device__ __forceinline__ float4 add_part(float4 x, float4 y) {
  return make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
}
__device__ __forceinline__ float fma_route(float w, float y, float sum) { return fmaf(w, y, sum); }
__device__ __forceinline__ float4 fma_route(float w, float4 y, float4 sum) {
  return make_float4(fmaf(w, y.x, sum.x), fmaf(w, y.y, sum.y), fmaf(w, y.z, sum.z), fmaf(w, y.w, sum.w));
}

// Token m's output at column `col` of its route rows (V = float), or at
// col..col+3 (V = float4, col a multiple of 4): the routes in order j, each
// route's splits in order, scaled by topk_weights. The (route, split) rows
// are read 8 at a time, route-major, so that 8 loads are in flight together
// however the token's rows divide into routes and splits. Read 8 routes at
// a time with each route's splits one after the other, mixtral M=1's 2
// routes x 16 splits took 16 dependent round trips of 2 loads (~7.7 us at
// the end of its GEMM 2 in a globaltimer trace). Routes to other ranks (no
// row written) add an exact 0.
template <class V>
__device__ __forceinline__ V combine_token(const MmaGemmArgs& a, int m, int splits, int col) {
  const int pairs = a.k * splits;
  V sum{}, y{};
  int j = 0, sp = 0;  // the pair q0 = j * splits + sp
  for (int q0 = 0; q0 < pairs; q0 += 8) {
    V v[8];
    float w[8];
    bool last[8];  // the pair is its route's last split
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      const int rj = m * a.k + j;
      const bool in = q0 + t < pairs;
      const bool local = in && moe_local_expert(a.topk_ids[rj], a.ep_rank, a.E_local) >= 0;
      w[t] = local ? a.topk_weights[rj] : 0.f;
      v[t] = local ? __ldcg(reinterpret_cast<const V*>(a.partial + (size_t(rj) * splits + sp) * a.H + col)) : V{};
      last[t] = in && sp == splits - 1;
      if (++sp == splits) sp = 0, ++j;
    }
#pragma unroll
    for (int t = 0; t < 8; ++t) {
      if (q0 + t >= pairs) break;
      y = add_part(y, v[t]);
      if (last[t]) {
        sum = fma_route(w[t], y, sum);
        y = V{};
      }
    }
  }
  return sum;
}

// GEMM 2 epilogue: the unit's route rows to the workspace.
template <int NT, int RT>
__device__ __forceinline__ void store_partials(const MmaGemmArgs& a, const int* meta,
                                               const float (&acc)[RT][NT][4], int splits) {
  using T = MmaTile<NT, RT>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int row_group = meta[1], routes = meta[2], split = meta[3];
  const int* route = meta + 4;
#pragma unroll
  for (int rt = 0; rt < RT; ++rt) {
    const int n = (row_group * T::kTiles + warp * RT + rt) * kTileRows + g;
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int col = nt * 8 + 2 * t + c;
        if (col < routes) {
          float* row = a.partial + (size_t(route[col]) * splits + split) * a.H;
          row[n] = acc[rt][nt][c];
          row[n + 8] = acc[rt][nt][2 + c];
        }
      }
  }
}

// The per-unit combine, after store_partials: the per-(token, row group)
// count; the CTA that completes a token's count combines its routes. Each
// unit's end waits for its stores (the fence), its counts (the atomics) and
// each completed token's rows (one L2 round trip per token), with the MMA
// warps stopped: at qwen3 M=256 this epilogue held ~42% of GEMM 2's warp
// samples, hence combine_all_tokens.
template <int NT, int RT>
__device__ __forceinline__ void count_and_combine(const MmaGemmArgs& a, const int* token_routes, const int* meta,
                                                  int row_groups, int splits, int* combine) {
  using T = MmaTile<NT, RT>;
  const int tid = threadIdx.x;
  const int row_group = meta[1], routes = meta[2];
  const int* route = meta + 4;
  // Release: this CTA's partial rows are visible device-wide before any of
  // its counter increments.
  __threadfence();
  consumers_sync();
  if (tid < routes) {
    const int m = route[tid] / a.k;
    int* counter = a.counters + size_t(m) * row_groups + row_group;
    const bool last = atomicAdd(counter, 1) + 1 == token_routes[m] * splits;
    if (last) *counter = 0;  // every (route, split) of m is counted: reset for the next call
    combine[tid] = last ? m : -1;
    __threadfence();  // acquire: the other CTAs' partial rows before reading them
  }
  consumers_sync();
  for (int s = 0; s < routes; ++s) {
    const int m = combine[s];
    if (m < 0) continue;
    for (int r = tid; r < T::kRows; r += kMmaThreads) {
      const int n = row_group * T::kRows + r;
      a.out[size_t(m) * a.H + n] = __float2bfloat16(combine_token<float>(a, m, splits, n));
    }
  }
}

// The deferred combine: GEMM 2's units only store their route rows, and once
// every CTA of the grid has (one barrier: a fence and an arrival per CTA,
// then a wait for the whole grid's), the grid sums every token's routes, a
// thread taking 4 consecutive outputs of a token at a time: its 16-byte
// loads of all the token's (route, split) rows are in flight together. The
// sums are count_and_combine's, in the same order, so the two give the same
// bits. The barrier needs every CTA resident, which the persistent grid is
// (at most the CTAs that fit at once, the same bound stream_k_fixup relies
// on). The arrival count only grows, so it needs no reset between calls: a
// CTA waits for the next multiple of the grid above its own arrival.
__device__ __forceinline__ void grid_barrier(unsigned long long* arrivals) {
  consumers_sync();  // every thread's stores are issued before thread 0 releases them
  if (threadIdx.x == 0) {
    unsigned long long old;
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    asm volatile("atom.relaxed.gpu.global.add.u64 %0, [%1], 1;" : "=l"(old) : "l"(arrivals) : "memory");
    const unsigned long long target = old - old % gridDim.x + gridDim.x;
    unsigned long long seen;
    do {
      asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(seen) : "l"(arrivals) : "memory");
    } while (seen < target);
    asm volatile("fence.acq_rel.gpu;" ::: "memory");  // acquire: every CTA's rows before reading them
  }
  consumers_sync();
}

// GEMM 2 lets a dependent grid become resident early only without the
// grid barrier: a successor's CTAs beside GEMM 2 could hold the SM space that
// GEMM 2's last CTAs need to reach the barrier. (No launch of this op
// depends on GEMM 2; a caller's programmatic launch after run() may.)
__device__ __forceinline__ void down_launch_dependents(const MmaGemmArgs& a) {
  if (!a.deferred_combine) pdl_launch_dependents();
}

template <bool kSplit>
__device__ __forceinline__ void combine_all_tokens(const MmaGemmArgs& a) {
  grid_barrier(a.grid_arrivals);
  const int splits = kSplit ? a.splits : 1;
  const int quads = a.H / 4;
  const long long items = (long long)a.M * quads;
  for (long long i = (long long)blockIdx.x * kMmaThreads + threadIdx.x; i < items;
       i += (long long)gridDim.x * kMmaThreads) {
    // A token with no local route sums to zeros, the bytes GEMM 1 writes for it (under h_ready
    // perhaps at the same time): checking for it first would put one more L2 round trip before
    // every item's loads.
    const int m = int(i / quads), q = int(i - (long long)m * quads);
    const float4 sum = combine_token<float4>(a, m, splits, 4 * q);
    const __nv_bfloat162 lo = __floats2bfloat162_rn(sum.x, sum.y), hi = __floats2bfloat162_rn(sum.z, sum.w);
    uint2 packed;
    packed.x = *reinterpret_cast<const uint32_t*>(&lo);
    packed.y = *reinterpret_cast<const uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(a.out + size_t(m) * a.H + 4 * q) = packed;
  }
}

// ------------------------------------------------------------ h unit by unit
// Under PDL, GEMM 2 can read h only once GEMM 1's whole grid has ended, and
// GEMM 1's CTAs end up to a third apart (docs/perf-log.md, rounds 46, 60),
// while GEMM 2's CTAs, resident as GEMM 1's leave, idle. With h_ready, GEMM
// 1 publishes each unit's rows of h as it stores them, and GEMM 2's producer
// waits, unit by unit, only for the GEMM 1 units whose rows it copies. A
// flag holds the ticket of the call that last stored its unit; each call's
// is the last one's plus one, so no flag needs resetting between calls (or
// graph replays).

// GEMM 1, after a unit's h stores by every computing thread: rows (block,
// row group) are ready. The fence is a release for the whole CTA's stores,
// which the barrier orders before it.
__device__ __forceinline__ void publish_h(const MmaGemmArgs& a, const int* meta, unsigned ticket) {
  if (a.h_ready == nullptr) return;
  consumers_sync();
  if (threadIdx.x == 0) {
    unsigned* flag = a.h_ready + size_t(meta[0]) * a.h_row_groups + meta[1];
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(ticket) : "memory");
  }
}

// GEMM 2's producer warp, before copying any h of a unit (block `block`,
// reduction groups [group0, group0 + groups)): waits until GEMM 1 has
// published every row group that holds it. The lanes poll the flags in
// parallel, one L2 round trip when they are set (a wait per stage, its
// flags polled one after another, ran 1-25% slower than waiting for the
// grid), and each lane acquires its own; the warp barrier then orders them
// before every lane's copies.
__device__ __forceinline__ void wait_h(const MmaGemmArgs& a, int block, int group0, int groups, unsigned ticket) {
  const int per_group = a.h_row_groups / a.groups;  // GEMM 1 row groups that hold one group of h's columns
  const unsigned* flag = a.h_ready + size_t(block) * a.h_row_groups + size_t(group0) * per_group;
  for (int i = threadIdx.x & 31; i < groups * per_group; i += 32) {
    unsigned seen;
    for (;;) {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(flag + i) : "memory");
      if (seen == ticket) break;
      __nanosleep(128);
    }
  }
  __syncwarp();
}

// This call's ticket, read by every CTA of both GEMMs before GEMM 2 can
// start (GEMM 1 reads it before it lets GEMM 2 launch).
__device__ __forceinline__ unsigned call_ticket(const MmaGemmArgs& a) {
  return a.h_ready == nullptr ? 0u : __ldcg(a.tickets) + 1u;
}

// GEMM 2's last step in each CTA, by one computing thread once its producer
// has read every flag it waits on (the last stage's copies are consumed):
// the last CTA to get here stores this call's ticket for the next call,
// whose first launch starts after this grid has ended.
__device__ __forceinline__ void retire_ticket(const MmaGemmArgs& a, unsigned ticket) {
  if (a.h_ready == nullptr || threadIdx.x != 0) return;
  if (atomicAdd(a.tickets + 1, 1u) == gridDim.x - 1) {
    a.tickets[1] = 0;
    a.tickets[0] = ticket;
  }
}

// GEMM 1's stream-K schedule. The units' stages (unit u, group g) = u*G + g
// are dealt to the CTAs in contiguous ranges of equal length, so every CTA
// streams the same number of weight bytes whatever the unit count: with whole
// units per CTA, 224 units on 396 CTAs left 172 CTAs idle and put two units
// on 92 SMs and one on 40. A unit cut by a range boundary is finished by the
// CTA that holds its first stage (see stream_k_fixup). Each CTA gets at
// least kStreamKMinStages stages (fewer CTAs work when there are few stages):
// at 4, qwen3 M=1's 96 units of 16 stages were cut into ~4 parts each and
// GEMM 1 ran 12.9 -> 18.2 us, the parts' fix-ups and short pipelines costing
// more than the idle SMs they filled. At 16 such a GEMM keeps whole units.
constexpr int kStreamKMinStages = 16;
struct StreamK {
  long long total;  // stages of all units
  int ctas;         // CTAs with a range
  __device__ long long lo(int c) const { return (long long)c * total / ctas; }
  // The CTA whose range holds stage s.
  __device__ int cta_of(long long s) const { return int(((s + 1) * ctas - 1) / total); }
};

// A stream-K unit's end in a CTA that holds only part of it. The unit's
// first stage's CTA finishes it: its part is the tail of its range (the unit
// runs on past it), so it ends last, when the CTAs holding the unit's later
// stages (the head of their ranges, or the whole range of a CTA inside a
// long unit) have long posted theirs. For those the unit is their first
// (their range starts inside it): they store their partial sums to their
// slot and add their stage count, without waiting: a CTA that had to learn whether it arrived
// last stalled its MMA warps for two L2 round trips at the head of its range
// (ncu: 13% of dsv3 m8 GEMM 1's warp samples). The finisher waits until the
// count holds the other stages, adds the parts in CTA order to its own
// (deterministic), runs GEMM 1's epilogue and resets the count for the next
// call. Every CTA of the grid is resident (persistent grid), so the wait
// ends.
template <int NT, int RT>
__device__ __forceinline__ void stream_k_fixup(const MmaGemmArgs& a, const int* meta, float (&acc)[RT][NT][4],
                                               const StreamK& sk, int unit, int groups, int stages,
                                               unsigned ticket) {
  constexpr int kFrag = kMmaThreads * RT * NT;  // float4 per slot
  const int tid = threadIdx.x;
  const long long u0 = (long long)unit * groups;
  int* counter = a.sk_counters + unit;
  const int first_c = sk.cta_of(u0);
  if (first_c != int(blockIdx.x)) {
    float4* mine = a.sk_partial + size_t(blockIdx.x) * kFrag + tid * RT * NT;
#pragma unroll
    for (int rt = 0; rt < RT; ++rt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
        __stcg(mine + rt * NT + nt, make_float4(acc[rt][nt][0], acc[rt][nt][1], acc[rt][nt][2], acc[rt][nt][3]));
    consumers_sync();  // every thread's part is stored before thread 0 releases it
    if (tid == 0) {
      asm volatile("fence.acq_rel.gpu;" ::: "memory");
      asm volatile("red.relaxed.gpu.global.add.s32 [%0], %1;" ::"l"(counter), "r"(stages) : "memory");
    }
    return;
  }
  if (tid == 0) {
    int seen;
    do {
      asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    } while (seen != groups - stages);
    asm volatile("fence.acq_rel.gpu;" ::: "memory");  // acquire: the parts before reading them
    *counter = 0;
  }
  consumers_sync();
  for (int c = first_c + 1, last_c = sk.cta_of(u0 + groups - 1); c <= last_c; ++c) {
    if (sk.lo(c) == sk.lo(c + 1)) continue;  // an empty range holds no part
    const float4* part = a.sk_partial + size_t(c) * kFrag + tid * RT * NT;
#pragma unroll
    for (int rt = 0; rt < RT; ++rt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const float4 v = __ldcg(part + rt * NT + nt);
        acc[rt][nt][0] += v.x, acc[rt][nt][1] += v.y, acc[rt][nt][2] += v.z, acc[rt][nt][3] += v.w;
      }
  }
  store_h<NT, RT>(a, meta, acc);
  publish_h(a, meta, ticket);
}

// The stages a CTA runs, in order: whole units round-robin (first_unit,
// first_unit + grid, ...), or GEMM 1's stream-K range [lo, hi) of
// consecutive units' stages, starting at group start_group of first_unit.
struct CtaStages {
  int* own_routing;  // cta_align_routes' result: one pointer live, not the five of AlignedRoutes
  unsigned ticket;   // this call's (call_ticket)
  StreamK sk;
  bool stream_k;
  // GEMM 1's whole units under h_ready, dealt block-major: a block's units
  // then end in the same wave, and GEMM 2's units of the earlier blocks are
  // ready when its CTAs arrive (row-group-major, every block ended in the
  // last wave). A block's neighbours in the order are the same expert's
  // other blocks, so its row groups are still read at about the same time.
  bool block_major;
  int blocks, row_groups, splits;  // the routing's blocks; units per block = row_groups x splits
  int units, unit_groups, total, first_unit, start_group, last_unit;
  // The CTA's i-th unit, as load_unit indexes units (row-group-major). Past
  // its last one, an index load_unit answers without a global read: the
  // producer loads the next unit's metadata a unit ahead, and a read of a
  // unit never issued stalled the pipeline at the unit boundary.
  __device__ int unit_at(int i) const {
    const int u = !stream_k ? first_unit + i * int(gridDim.x) : first_unit + i <= last_unit ? first_unit + i : units;
    return block_major && u < units ? u % row_groups * blocks + u / row_groups : u;
  }
  // The routing this CTA reads (blocks of 8 NT routes).
  template <int NT>
  __device__ AlignedRoutes routes(const MmaGemmArgs& a) const {
    return own_routing ? aligned_routes_at(own_routing, 8 * NT, a.max_blocks) : a.routes;
  }
};
// Both GEMM kernels start here, after cta_align_routes and a CTA barrier. GEMM 1
// needs the alignment for everything. GEMM 2 reads the routing before its
// wait: under PDL it starts only once every GEMM 1 CTA has passed its own
// wait, so an alignment launch has completed and been flushed by then; it
// waits before reading GEMM 1's output (h): for GEMM 1's grid, or with
// h_ready for the units it reads (wait_h).
template <bool kDown, bool kSplit, int NT, int RT>
__device__ __forceinline__ CtaStages cta_stages(const MmaGemmArgs& a, int* own_routing) {
  CtaStages c;
  if constexpr (!kDown) pdl_wait();
  c.ticket = call_ticket(a);  // in GEMM 1 before it lets GEMM 2 launch (after this)
  c.own_routing = own_routing;
  c.blocks = routing_load(c.routes<NT>(a).num_blocks);
  c.row_groups = a.tiles / (kMmaWarps * RT);
  c.splits = kSplit ? a.splits : 1;
  c.units = c.blocks * c.row_groups * c.splits;
  c.unit_groups = a.groups / c.splits;
  const int units = c.units, unit_groups = c.unit_groups;
  c.stream_k = !kDown && a.stream_k;
  c.block_major = !kDown && a.h_ready != nullptr && !c.stream_k;
  c.sk = StreamK{(long long)units * unit_groups, 0};
  c.start_group = 0;
  long long lo = 0, hi = 0;
  if (c.stream_k) {
    const long long by_stages = c.sk.total / kStreamKMinStages;
    c.sk.ctas = by_stages < 1 ? 1 : by_stages < gridDim.x ? int(by_stages) : int(gridDim.x);
    if (int(blockIdx.x) < c.sk.ctas) lo = c.sk.lo(blockIdx.x), hi = c.sk.lo(blockIdx.x + 1);
    c.total = int(hi - lo);
    c.first_unit = int(lo / unit_groups);
    c.start_group = int(lo % unit_groups);
  } else {
    c.total = (int(blockIdx.x) < units ? (units - 1 - int(blockIdx.x)) / int(gridDim.x) + 1 : 0) * unit_groups;
    c.first_unit = blockIdx.x;
  }
  c.last_unit = !c.stream_k ? units : hi > lo ? int((hi - 1) / unit_groups) : -1;
  return c;
}

// The end of a unit, or of this CTA's share of it (`stages` of the unit's
// groups): GEMM 2's store and combine, GEMM 1's h, or its stream-K fix-up.
template <bool kDown, bool kSplit, int NT, int RT>
__device__ __forceinline__ void finish_unit(const MmaGemmArgs& a, const int* meta, float (&acc)[RT][NT][4],
                                            const CtaStages& cs, int c_unit, int stages, int row_groups,
                                            int splits, int* combine) {
  if constexpr (kDown) {
    store_partials<NT, RT>(a, meta, acc, splits);
    if (!a.deferred_combine)
      count_and_combine<NT, RT>(a, cs.routes<NT>(a).token_routes, meta, row_groups, splits, combine);
  } else if (stages == cs.unit_groups) {
    store_h<NT, RT>(a, meta, acc);
    publish_h(a, meta, cs.ticket);
  } else {
    stream_k_fixup<NT, RT>(a, meta, acc, cs.sk, cs.unit_at(c_unit), cs.unit_groups, stages, cs.ticket);
  }
}

// GEMM 1's last step: tokens with no route to this rank get zeros (GEMM 2
// never visits them), one warp per token over the computing warps.
__device__ __forceinline__ void zero_unrouted_tokens(const MmaGemmArgs& a, const int* token_routes) {
  const int warp_id = blockIdx.x * kMmaWarps + (threadIdx.x >> 5);
  for (int m = warp_id; m < a.M; m += gridDim.x * kMmaWarps) {
    if (token_routes[m] != 0) continue;
    uint4* row = reinterpret_cast<uint4*>(a.out + size_t(m) * a.H);
    for (int c = threadIdx.x & 31; c < a.H / 8; c += 32) row[c] = make_uint4(0, 0, 0, 0);
  }
}

// Where the MMA side of a CTA stands: the group of the next stage and the
// CTA's unit index, and the group its share of that unit started at.
struct ConsumerPos {
  int group, unit, first_group;
};
// After n stages of a unit (meta: the last one's metadata): at the end of
// the unit or of the CTA's last stage, the unit's epilogue (finish_unit).
template <bool kDown, bool kSplit, int NT, int RT>
__device__ __forceinline__ void end_stages(const MmaGemmArgs& a, const CtaStages& cs, const int* meta, int n,
                                           bool cta_last, int* combine, ConsumerPos& pos, float (&acc)[RT][NT][4]) {
  pos.group += n;
  if (pos.group == cs.unit_groups || cta_last) {
    finish_unit<kDown, kSplit, NT, RT>(a, meta, acc, cs, pos.unit, pos.group - pos.first_group, cs.row_groups,
                                       cs.splits, combine);
    pos.group = pos.first_group = 0;
    ++pos.unit;
    zero_acc(acc);
  }
}
// One stage's MMAs into acc, then its end (end_stages). The stage's slot is
// read until this returns.
template <bool kDown, bool kSplit, int NT, int RT>
__device__ __forceinline__ void consume_stage(const MmaGemmArgs& a, const CtaStages& cs, const unsigned char* stage,
                                              const uint4* minus136_frag, int* combine, bool cta_last,
                                              ConsumerPos& pos, float (&acc)[RT][NT][4]) {
  using T = MmaTile<NT, RT>;
  const int* meta = reinterpret_cast<const int*>(stage + T::kWeightBytes + T::kScaleBytes + T::kActBytes);
  compute_stage<NT, RT>(stage, meta[2], minus136_frag, acc);
  end_stages<kDown, kSplit, NT, RT>(a, cs, meta, 1, cta_last, combine, pos, acc);
}
// consume_stage for two consecutive stages of one unit, the first not the
// unit's last (the caller checks): only the second may end the unit.
template <bool kDown, bool kSplit, int NT, int RT>
__device__ __forceinline__ void consume_two_stages(const MmaGemmArgs& a, const CtaStages& cs,
                                                   const unsigned char* stage0, const unsigned char* stage1,
                                                   const uint4* minus136_frag, int* combine, bool cta_last,
                                                   ConsumerPos& pos, float (&acc)[RT][NT][4]) {
  using T = MmaTile<NT, RT>;
  const int* meta = reinterpret_cast<const int*>(stage1 + T::kWeightBytes + T::kScaleBytes + T::kActBytes);
  compute_two_stages<NT, RT>(stage0, stage1, meta[2], minus136_frag, acc);
  end_stages<kDown, kSplit, NT, RT>(a, cs, meta, 2, cta_last, combine, pos, acc);
}

// A GEMM CTA's last step, after its last unit: GEMM 2's deferred combine, or
// GEMM 1's zeros for the tokens with no local route.
template <bool kDown, bool kSplit, int NT>
__device__ __forceinline__ void finish_gemm(const MmaGemmArgs& a, const CtaStages& cs) {
  if constexpr (kDown) {
    if (a.deferred_combine) combine_all_tokens<kSplit>(a);
    retire_ticket(a, cs.ticket);
  } else {
    zero_unrouted_tokens(a, cs.routes<NT>(a).token_routes);
  }
}

// C: the CTAs per SM the kernel is built for (its register cap and its
// pipeline depth, MmaPipeline). kSplit: GEMM 2 with a split reduction; the
// kernels without it see splits = 1 at compile time (the split loop in the
// combine measured ~10% slower GEMM 2 at M=256 when it was a runtime loop).
template <bool kDown, bool kContig, int NT, int RT, int C, bool kSplit>
__global__ void __launch_bounds__(kMmaThreads, C) moe_mma_kernel(const MmaGemmArgs a) {
  static_assert(kDown || !kSplit, "only GEMM 2 splits its reduction");
  using T = MmaTile<NT, RT>;
  using P = MmaPipeline<NT, RT, C>;
  extern __shared__ __align__(16) unsigned char mma_smem[];
  int* combine = reinterpret_cast<int*>(mma_smem + P::kStages * T::kStageBytes);
  uint4* minus136_frag = reinterpret_cast<uint4*>(mma_smem + P::kSmemBytes - 16);
  // Read only after the main loop's first __syncthreads.
  if (threadIdx.x == 0)
    *minus136_frag = make_uint4(kBf16PairMinus136, kBf16PairMinus136, kBf16PairMinus136, kBf16PairMinus136);

  // This kernel always follows an alignment launch (cta_align is planned for moe_ws_kernel only).
  const CtaStages cs = cta_stages<kDown, kSplit, NT, RT>(a, nullptr);
  if constexpr (!kDown) pdl_launch_dependents();
  const int blocks = cs.blocks, splits = cs.splits, unit_groups = cs.unit_groups, total = cs.total;
  const double inv_k = 1.0 / a.k;  // for moe_route_token
  using Map = AllThreadsCopy<NT, RT>;

  // Producer: runs kStages-1 stages ahead of the consumer, across unit
  // boundaries. The next unit's metadata is loaded one unit early so that its
  // global reads never stall the pipeline.
  int issued = 0, p_unit = 0, p_group = cs.start_group, p_slot = 0;
  UnitMeta<NT> cur = load_unit<kDown, kContig, NT, RT, Map>(a, cs.routes<NT>(a),
      cs.unit_at(0), cs.units, blocks, splits, inv_k);
  UnitMeta<NT> next = load_unit<kDown, kContig, NT, RT, Map>(a, cs.routes<NT>(a),
      cs.unit_at(1), cs.units, blocks, splits, inv_k);
  enum Part { kAll, kWeightsOnly, kActsOnly };
  auto issue = [&](Part part) {
    if (issued < total) {
      unsigned char* stage = mma_smem + p_slot * T::kStageBytes;
      const int group = cur.split * unit_groups + p_group;
      if (part != kActsOnly) issue_weights<kContig, NT, RT>(a, cur, group, stage);
      if (part != kWeightsOnly) issue_acts<kDown, NT, RT>(a, cur, group, stage);
      ++issued;
      p_slot = p_slot + 1 == P::kStages ? 0 : p_slot + 1;
      if (++p_group == unit_groups) {
        p_group = 0;
        ++p_unit;
        cur = next;
        next = load_unit<kDown, kContig, NT, RT, Map>(a, cs.routes<NT>(a),
            cs.unit_at(p_unit + 1), cs.units, blocks, splits, inv_k);
      }
    }
    cp_async_commit();  // empty groups keep the wait count uniform
  };
  if constexpr (kDown) {
    // The first stages' weights do not depend on GEMM 1: request them while
    // it finishes, then the activations (h) once it has.
    const int issued0 = issued, p_unit0 = p_unit, p_group0 = p_group, p_slot0 = p_slot;
    const UnitMeta<NT> cur0 = cur, next0 = next;
#pragma unroll 1
    for (int s = 0; s < P::kStages - 1; ++s) issue(kWeightsOnly);
    pdl_wait();
    down_launch_dependents(a);
    issued = issued0, p_unit = p_unit0, p_group = p_group0, p_slot = p_slot0;
    cur = cur0, next = next0;
#pragma unroll 1
    for (int s = 0; s < P::kStages - 1; ++s) issue(kActsOnly);
    cp_async_wait<0>();  // the prologue's two groups per stage; the loop counts one
  } else {
#pragma unroll 1
    for (int s = 0; s < P::kStages - 1; ++s) issue(kAll);
  }

  float acc[RT][NT][4];
  zero_acc(acc);

  ConsumerPos pos{cs.start_group, 0, cs.start_group};
  int c_slot = 0;
#pragma unroll 1
  for (int f = 0; f < total; ++f) {
    cp_async_wait<P::kStages - 2>();  // this thread's copies of stage f landed
    __syncthreads();                  // everyone's did; slot f-1 is free
    issue(kAll);                      // stage f + kStages - 1 into slot f-1
    consume_stage<kDown, kSplit, NT, RT>(a, cs, mma_smem + c_slot * T::kStageBytes, minus136_frag, combine,
                                         f == total - 1, pos, acc);
    c_slot = c_slot + 1 == P::kStages ? 0 : c_slot + 1;
  }
  cp_async_wait<0>();

  finish_gemm<kDown, kSplit, NT>(a, cs);
}

}  // namespace submission::moe
