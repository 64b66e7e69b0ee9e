// moe_w4a16's CTA-copies GEMM kernel (variants mma_cta_copies, mma, mma_rows*, mma_contig,
// mma_occ*): every thread issues cp.async copies between its MMAs and the CTA meets at a
// barrier per stage. The default's warp-specialised kernel (submission/moe_mma_ws.cuh) replaced
// it: here a slow warp holds the copies back and the copies the MMAs (docs/perf-log.md, round 9).
#pragma once

#include "dev/async_copy.cuh"
#include "submission/moe_gemm_epilogue.cuh"

namespace submission::moe {

// The pipeline of such a CTA when CtasPerSm of them share an SM: as many stages as
// its share of shared memory holds.
// TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp, CtasPerSm: CTAs per SM
template <int TokenTiles, int WarpTiles, int CtasPerSm>
struct MmaPipeline {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  static constexpr int kStages = mma_stages(Tile::kTokens, Tile::kTiles, CtasPerSm);
  // + the tokens this CTA combines after a GEMM 2 unit, and the constant A
  // fragment of compute_stage's zero-point MMA
  static constexpr int kSmemBytes = kStages * Tile::kStageBytes + mma_tail_bytes(Tile::kTokens);
  static_assert(kStages >= 3, "pipeline too shallow");
  static_assert(kSmemBytes <= mma_smem_budget(CtasPerSm), "");
};

// which layout of tile_group_words the weights were repacked in.
// AllThreadsCopy, for issue_weights/issue_acts with all 128 threads copying:
// thread tid copies chunk tid % 64 of tiles tid/64 + 2j, scale chunk tid % 2
// of tile tid/2, and chunk tid % 16 of slots tid/16 + 8j.
template <int TokenTiles, int WarpTiles>  // TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
struct AllThreadsCopy {
  static constexpr bool kStagePacked = false;
  __device__ static int slot0() { return threadIdx.x >> 4; }
  __device__ static int w_tile() { return threadIdx.x >> 6; }
  __device__ static int w_chunk() { return threadIdx.x & 63; }
  __device__ static int s_tile() {
    return threadIdx.x < MmaTile<TokenTiles, WarpTiles>::kTiles * 2 ? threadIdx.x >> 1 : 0;
  }
  __device__ static int s_chunk() { return threadIdx.x & 1; }
};

// The cp.async copies of one stage, group `group` of unit `u`, in two parts:
// the weights and scales, which depend only on the routing, and the
// activations with the stage's metadata, which in GEMM 2 are GEMM 1's output.
// kContig: the weights were packed per unit (pack = the unit's tiles), so
// the stage's tile-groups are one contiguous run; otherwise pack = 1.
// kContig: unit-packed weights, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
template <bool kContig, int TokenTiles, int WarpTiles>
__device__ __forceinline__ void issue_weights(const MmaGemmArgs& a, const UnitMeta<TokenTiles>& u, int group,
                                              unsigned char* stage) {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  constexpr int kPack = kContig ? Tile::kTiles : 1;
  const int tid = threadIdx.x;
  uint4* ws = reinterpret_cast<uint4*>(stage);
  uint4* ss = reinterpret_cast<uint4*>(stage + Tile::kWeightBytes);
  const uint4* src = u.w_src + size_t(group) * (kPack * 64);
  const size_t step = (kContig ? size_t(2) : size_t(2) * a.groups) * 64;
#pragma unroll
  for (int j = 0; j < Tile::kTiles / 2; ++j) cp_async16(ws + tid + kMmaThreads * j, src + j * step, 16);
  if (tid < Tile::kTiles * 2) cp_async16(ss + tid, u.s_src + size_t(group) * (kPack * 2), 16);
}

// kDown: GEMM 2, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
template <bool kDown, int TokenTiles, int WarpTiles>
__device__ __forceinline__ void issue_acts(const MmaGemmArgs& a, const UnitMeta<TokenTiles>& u, int group,
                                           unsigned char* stage) {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  const int tid = threadIdx.x;
  uint4* xs = reinterpret_cast<uint4*>(stage + Tile::kWeightBytes + Tile::kScaleBytes);
  int* meta = reinterpret_cast<int*>(stage + Tile::kWeightBytes + Tile::kScaleBytes + Tile::kActBytes);
  const int K = a.groups * kGroup, chunk = tid & 15;
#pragma unroll
  for (int j = 0; j < TokenTiles; ++j) {
    const int slot = (tid >> 4) + 8 * j, row = kDown ? u.route[j] : u.act_row[j];
    const __nv_bfloat16* src = row >= 0 ? a.act + size_t(row) * K + group * kGroup + chunk * 8 : a.act;
    cp_async16(xs + act_stage_uint4(chunk, slot, Tile::kTokens), src, row >= 0 ? 16 : 0);  // padding: zeros
  }
  if (tid == 0) {
    meta[0] = u.block;
    meta[1] = u.row_group;
    meta[2] = u.routes;
    meta[3] = u.split;
  }
  if (chunk == 0) {
#pragma unroll
    for (int j = 0; j < TokenTiles; ++j) meta[4 + (tid >> 4) + 8 * j] = u.route[j];
  }
}

// CtasPerSm: the CTAs per SM the kernel is built for (its register cap and its
// pipeline depth, MmaPipeline). kSplit: GEMM 2 with a split reduction; the
// kernels without it see splits = 1 at compile time (the split loop in the
// combine measured ~10% slower GEMM 2 at M=256 when it was a runtime loop).
// kDown: GEMM 2, kContig: unit-packed weights, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp, CtasPerSm:
// CTAs per SM, kSplit: split GEMM 2
template <bool kDown, bool kContig, int TokenTiles, int WarpTiles, int CtasPerSm, bool kSplit>
__global__ void __launch_bounds__(kMmaThreads, CtasPerSm) moe_mma_kernel(const MmaGemmArgs a) {
  static_assert(kDown || !kSplit, "only GEMM 2 splits its reduction");
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  using Pipe = MmaPipeline<TokenTiles, WarpTiles, CtasPerSm>;
  extern __shared__ __align__(16) unsigned char mma_smem[];
  int* combine = reinterpret_cast<int*>(mma_smem + Pipe::kStages * Tile::kStageBytes);
  uint4* minus136_frag = reinterpret_cast<uint4*>(mma_smem + Pipe::kSmemBytes - 16);
  // Read only after the main loop's first __syncthreads.
  if (threadIdx.x == 0)
    *minus136_frag = make_uint4(kBf16PairMinus136, kBf16PairMinus136, kBf16PairMinus136, kBf16PairMinus136);

  // This kernel always follows an alignment launch (cta_align is planned for moe_ws_kernel only).
  const CtaStages cs = cta_stages<kDown, kSplit, TokenTiles, WarpTiles>(a, nullptr);
  if constexpr (!kDown) pdl_launch_dependents();
  const int blocks = cs.blocks, splits = cs.splits, unit_groups = cs.unit_groups, total = cs.total;
  const double inv_k = 1.0 / a.k;  // for moe_route_token
  using Map = AllThreadsCopy<TokenTiles, WarpTiles>;

  // Producer: runs kStages-1 stages ahead of the consumer, across unit
  // boundaries. The next unit's metadata is loaded one unit early so that its
  // global reads never stall the pipeline.
  int issued = 0, p_unit = 0, p_group = cs.start_group, p_slot = 0;
  UnitMeta<TokenTiles> cur = load_unit<kDown, kContig, TokenTiles, WarpTiles, Map>(
      a, cs.routes<TokenTiles>(a), cs.unit_at(0), cs.units, blocks, splits, inv_k);
  UnitMeta<TokenTiles> next = load_unit<kDown, kContig, TokenTiles, WarpTiles, Map>(
      a, cs.routes<TokenTiles>(a), cs.unit_at(1), cs.units, blocks, splits, inv_k);
  enum Part { kAll, kWeightsOnly, kActsOnly };
  auto issue = [&](Part part) {
    if (issued < total) {
      unsigned char* stage = mma_smem + p_slot * Tile::kStageBytes;
      const int group = cur.split * unit_groups + p_group;
      if (part != kActsOnly) issue_weights<kContig, TokenTiles, WarpTiles>(a, cur, group, stage);
      if (part != kWeightsOnly) issue_acts<kDown, TokenTiles, WarpTiles>(a, cur, group, stage);
      ++issued;
      p_slot = p_slot + 1 == Pipe::kStages ? 0 : p_slot + 1;
      if (++p_group == unit_groups) {
        p_group = 0;
        ++p_unit;
        cur = next;
        next = load_unit<kDown, kContig, TokenTiles, WarpTiles, Map>(
            a, cs.routes<TokenTiles>(a), cs.unit_at(p_unit + 1), cs.units, blocks, splits, inv_k);
      }
    }
    cp_async_commit();  // empty groups keep the wait count uniform
  };
  if constexpr (kDown) {
    // The first stages' weights do not depend on GEMM 1: request them while
    // it finishes, then the activations (h) once it has.
    const int issued0 = issued, p_unit0 = p_unit, p_group0 = p_group, p_slot0 = p_slot;
    const UnitMeta<TokenTiles> cur0 = cur, next0 = next;
#pragma unroll 1
    for (int s = 0; s < Pipe::kStages - 1; ++s) issue(kWeightsOnly);
    pdl_wait();
    down_launch_dependents(a);
    issued = issued0, p_unit = p_unit0, p_group = p_group0, p_slot = p_slot0;
    cur = cur0, next = next0;
#pragma unroll 1
    for (int s = 0; s < Pipe::kStages - 1; ++s) issue(kActsOnly);
    cp_async_wait<0>();  // the prologue's two groups per stage; the loop counts one
  } else {
#pragma unroll 1
    for (int s = 0; s < Pipe::kStages - 1; ++s) issue(kAll);
  }

  float acc[WarpTiles][TokenTiles][4];
  zero_acc(acc);

  ConsumerPos pos{cs.start_group, 0, cs.start_group};
  int c_slot = 0;
#pragma unroll 1
  for (int f = 0; f < total; ++f) {
    cp_async_wait<Pipe::kStages - 2>();  // this thread's copies of stage f landed
    __syncthreads();                     // everyone's did; slot f-1 is free
    issue(kAll);                         // stage f + kStages - 1 into slot f-1
    consume_stage<kDown, kSplit, TokenTiles, WarpTiles>(a, cs, mma_smem + c_slot * Tile::kStageBytes, minus136_frag,
                                                        combine, f == total - 1, pos, acc);
    c_slot = c_slot + 1 == Pipe::kStages ? 0 : c_slot + 1;
  }
  cp_async_wait<0>();

  finish_gemm<kDown, kSplit, TokenTiles>(a, cs);
}

}  // namespace submission::moe
