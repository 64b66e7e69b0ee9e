// The warp-specialised form of moe_mma_kernel: the same units, stages, MMAs
// and epilogues (moe_mma.cuh), but one producer warp issues every copy (the
// weights and scales as bulk copies, the TMA's non-tensor form; the
// activations by cp.async), all completing on the stage's "full" mbarrier,
// and the four MMA warps only wait for full stages, compute, and hand each
// slot back on its "empty" mbarrier.
//
// Why: split into copies alone and MMAs alone (docs/perf-log.md, round 9),
// moe_mma_kernel's GEMMs take 75-100% of their time in each half, and the
// two overlap poorly (dsv3 m8 GEMM 1: 47 us whole, 38 copies only, 37 MMAs
// only). There every thread issues cp.async between its MMAs and the CTA
// meets at a barrier per stage, so a slow warp holds the copies back and the
// copies hold the MMAs back. Here the MMA warps' instruction stream holds no
// copy work, a slot is released per warp, and the copy engine, not 128
// threads' outstanding requests, keeps the weight stream in flight.
#pragma once

#include "submission/moe_mma.cuh"

namespace submission::moe {

constexpr int kWsThreads = kMmaThreads + 32;  // 4 MMA warps, then the producer warp

// C CTAs per SM: 3, or 4 where the MMA warps fit 96 registers
// (ws_max_ctas_per_sm in moe_plan.h).
template <int NT, int RT, int C>
struct WsPipeline {
  using T = MmaTile<NT, RT>;
  static constexpr int kStages = mma_stages(T::kTokens, T::kTiles, C, ws_tail_bytes(T::kTokens));
  static constexpr int kBarBytes = 2 * 8 * kStages;  // full[kStages], then empty[kStages]
  static constexpr int kSmemBytes = kStages * T::kStageBytes + kBarBytes + mma_tail_bytes(T::kTokens);
  static_assert(kStages >= 3, "pipeline too shallow");
  static_assert(kSmemBytes <= mma_smem_budget(C), "");
};

// The producer's copies. A stage's weights and its scales are one bulk copy
// each: these kernels read weights packed per unit (tile_group_index with
// packs of the unit's tiles), so each is one contiguous run. The activation rows
// go by cp.async, lane L copying 16-byte chunks L % 4 + 4i of slots
// L/4 + 8j: as 64-byte bulk pieces (the stage's layout interleaves rows per
// 32-wide k piece) they were up to 128 copy requests a stage, and the copy
// unit's request rate, not DRAM, set the kernel's pace (mixtral m64's GEMM 1
// ran 2x slower than moe_mma_kernel's). cp.async also zero-fills the
// padding slots.
template <int NT, int RT>
struct ProducerCopy {
  __device__ static int slot0() { return (threadIdx.x & 31) >> 2; }
  __device__ static int w_tile() { return 0; }
  __device__ static int w_chunk() { return 0; }
  __device__ static int s_tile() { return 0; }
  __device__ static int s_chunk() { return 0; }
};
// Arrivals a stage's full barrier expects: the producer's arrive.expect_tx
// for the bulk copies, then each producer lane's cp.async arrival.
constexpr int kWsFullArrivals = 1 + 32;

// A stage's metadata, then its weights and scales, announced in bytes.
template <int NT, int RT>
__device__ __forceinline__ void ws_issue_weights(const UnitMeta<NT>& u, int group, unsigned char* stage,
                                                 uint64_t* full, uint64_t evict_first) {
  using T = MmaTile<NT, RT>;
  const int lane = threadIdx.x & 31;
  int* meta = reinterpret_cast<int*>(stage + T::kWeightBytes + T::kScaleBytes + T::kActBytes);
  if ((lane & 3) == 0) {
#pragma unroll
    for (int j = 0; j < NT; ++j) meta[4 + (lane >> 2) + 8 * j] = u.route[j];
  }
  if (lane == 0) {
    meta[0] = u.block;
    meta[1] = u.row_group;
    meta[2] = u.routes;
    meta[3] = u.split;
  }
  __syncwarp();  // the metadata is written before the arrival that publishes it
  if (lane == 0) {
    mbar_arrive_expect_tx(full, T::kWeightBytes + T::kScaleBytes);
    bulk_copy(stage, u.w_src + size_t(group) * T::kTiles * 64, T::kWeightBytes, full, evict_first);
    bulk_copy(stage + T::kWeightBytes, u.s_src + size_t(group) * T::kTiles * 2, T::kScaleBytes, full, evict_first);
  }
}

template <bool kDown, int NT, int RT>
__device__ __forceinline__ void ws_issue_acts(const MmaGemmArgs& a, const UnitMeta<NT>& u, int group,
                                              unsigned char* stage, uint64_t* full) {
  using T = MmaTile<NT, RT>;
  const int lane = threadIdx.x & 31;
  uint4* xs = reinterpret_cast<uint4*>(stage + T::kWeightBytes + T::kScaleBytes);
  const int K = a.groups * kGroup;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int slot = (lane >> 2) + 8 * j, row = kDown ? u.route[j] : u.act_row[j];
    const __nv_bfloat16* src = row >= 0 ? a.act + size_t(row) * K + group * kGroup : a.act;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int chunk = (lane & 3) + 4 * i;
      cp_async16(xs + act_stage_uint4(chunk, slot, T::kTokens), src + chunk * 8, row >= 0 ? 16 : 0);  // padding: zeros
    }
  }
  cp_async_mbar_arrive(full);
}

template <bool kDown, int NT, int RT, int C, bool kSplit>
__global__ void __launch_bounds__(kWsThreads, C) moe_ws_kernel(const MmaGemmArgs a) {
  static_assert(kDown || !kSplit, "only GEMM 2 splits its reduction");
  using T = MmaTile<NT, RT>;
  using P = WsPipeline<NT, RT, C>;
  extern __shared__ __align__(16) unsigned char mma_smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(mma_smem + P::kStages * T::kStageBytes);
  uint64_t* empty = full + P::kStages;
  int* combine = reinterpret_cast<int*>(empty + P::kStages);
  uint4* minus136_frag = reinterpret_cast<uint4*>(mma_smem + P::kSmemBytes - 16);
  if (threadIdx.x == 0) {
    for (int s = 0; s < P::kStages; ++s) {
      mbar_init(full + s, kWsFullArrivals);
      mbar_init(empty + s, kMmaWarps);  // one arrival per MMA warp
    }
    mbar_init_fence();
    *minus136_frag = make_uint4(kBf16PairMinus136, kBf16PairMinus136, kBf16PairMinus136, kBf16PairMinus136);
  }
  // With cta_align, past the pipeline's P::kSmemBytes: the launch adds aligned_routes_ints.
  int* const own_routing = cta_align_routes<NT>(a, reinterpret_cast<int*>(mma_smem + P::kSmemBytes));
  __syncthreads();  // the last CTA-wide barrier: the producer warp leaves the MMA warps' barriers

  const CtaStages cs = cta_stages<kDown, kSplit, NT, RT>(a, own_routing);
  const int blocks = cs.blocks, splits = cs.splits, unit_groups = cs.unit_groups, total = cs.total;

  if (threadIdx.x >= kMmaThreads) {
    // Producer warp: up to kStages stages ahead of the slowest MMA warp,
    // across unit boundaries; the next unit's metadata loaded a unit early.
    const double inv_k = 1.0 / a.k;
    using Map = ProducerCopy<NT, RT>;
    const uint64_t evict_first = l2_evict_first_policy();
    int p_unit = 0, p_group = cs.start_group, p_slot = 0;
    uint32_t p_phase = 0;
    UnitMeta<NT> cur = load_unit<kDown, true, NT, RT, Map>(a, cs.routes<NT>(a),
        cs.unit_at(0), cs.units, blocks, splits, inv_k);
    UnitMeta<NT> next = load_unit<kDown, true, NT, RT, Map>(a, cs.routes<NT>(a),
        cs.unit_at(1), cs.units, blocks, splits, inv_k);
    auto advance = [&]() {
      if (++p_slot == P::kStages) p_slot = 0, p_phase ^= 1;
      if (++p_group == unit_groups) {
        p_group = 0;
        ++p_unit;
        cur = next;
        next = load_unit<kDown, true, NT, RT, Map>(a, cs.routes<NT>(a),
            cs.unit_at(p_unit + 1), cs.units, blocks, splits, inv_k);
      }
    };
    auto stage_at = [&]() { return mma_smem + p_slot * T::kStageBytes; };
    int first = 0;
    if constexpr (kDown) {
      // The first slots' weights do not depend on GEMM 1: request them while
      // it finishes, then their activations (h) once it has.
      first = total < P::kStages ? total : P::kStages;
      const int p_unit0 = p_unit, p_group0 = p_group;
      const UnitMeta<NT> cur0 = cur, next0 = next;
      for (int i = 0; i < first; ++i) {
        ws_issue_weights<NT, RT>(cur, cur.split * unit_groups + p_group, stage_at(), full + p_slot, evict_first);
        advance();
      }
      pdl_wait();
      down_launch_dependents(a);
      p_unit = p_unit0, p_group = p_group0, p_slot = 0, p_phase = 0;
      cur = cur0, next = next0;
      for (int i = 0; i < first; ++i) {
        ws_issue_acts<kDown, NT, RT>(a, cur, cur.split * unit_groups + p_group, stage_at(), full + p_slot);
        advance();
      }
    }
    for (int i = first; i < total; ++i) {
      mbar_wait(empty + p_slot, p_phase ^ 1);  // a fresh barrier passes parity 1 at once
      const int group = cur.split * unit_groups + p_group;
      ws_issue_weights<NT, RT>(cur, group, stage_at(), full + p_slot, evict_first);
      ws_issue_acts<kDown, NT, RT>(a, cur, group, stage_at(), full + p_slot);
      advance();
    }
    cp_async_wait<0>();  // no copy of this thread's outlives it
    return;
  }

  // MMA warps. In GEMM 2 they read GEMM 1's output only through the
  // producer's copies, issued after its wait, so they need no wait of their own.
  if constexpr (kDown) down_launch_dependents(a);
  float acc[RT][NT][4];
  zero_acc(acc);
  ConsumerPos pos{cs.start_group, 0, cs.start_group};
  int c_slot = 0;
  uint32_t c_phase = 0;
  // Small tiles (one warp's MMA chain per stage is short) take two landed
  // stages of a unit at once, so that their instruction streams overlap;
  // not at 4 CTAs per SM, whose 96 registers the pair spills.
  constexpr bool kPairStages = NT * RT <= 2 && C == 3;
#pragma unroll 1
  for (int f = 0; f < total;) {
    mbar_wait(full + c_slot, c_phase);
    const int n_slot = c_slot + 1 == P::kStages ? 0 : c_slot + 1;
    const uint32_t n_phase = c_slot + 1 == P::kStages ? c_phase ^ 1 : c_phase;
    bool pair = false;
    if constexpr (kPairStages) {
      // Only if every lane's own test saw the stage landed: each lane then
      // holds its own acquire of it, with no wait added (a wait per lane
      // after lane 0's test cost 0.5-1% on the paired shapes).
      pair = __all_sync(0xffffffffu, f + 1 < total && pos.group + 1 < cs.unit_groups &&
                                         mbar_test(full + n_slot, n_phase));
    }
    if (pair) {
      consume_two_stages<kDown, kSplit, NT, RT>(a, cs, mma_smem + c_slot * T::kStageBytes,
                                                mma_smem + n_slot * T::kStageBytes, minus136_frag, combine,
                                                f + 1 == total - 1, pos, acc);
    } else {
      consume_stage<kDown, kSplit, NT, RT>(a, cs, mma_smem + c_slot * T::kStageBytes, minus136_frag, combine,
                                           f == total - 1, pos, acc);
    }
    __syncwarp();  // every lane is done with the slots (and their metadata)
    if ((threadIdx.x & 31) == 0) {
      mbar_arrive(empty + c_slot);
      if (pair) mbar_arrive(empty + n_slot);
    }
    c_slot = n_slot, c_phase = n_phase;
    ++f;
    if (pair) {
      if (++c_slot == P::kStages) c_slot = 0, c_phase ^= 1;
      ++f;
    }
  }
  if constexpr (kDown) {
    if (a.deferred_combine) combine_all_tokens<kSplit>(a);
  } else {
    zero_unrouted_tokens(a, cs.routes<NT>(a).token_routes);
  }
}

}  // namespace submission::moe
