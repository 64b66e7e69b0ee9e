// The default's GEMM kernel for both GEMMs of moe_w4a16: the units, stages, MMAs and epilogues
// of moe_gemm_stage.cuh and moe_gemm_epilogue.cuh, with one producer warp issuing every copy
// (weights and scales by bulk copy, activations by cp.async) onto the stage's "full" mbarrier
// while four MMA warps compute and hand each slot back on its "empty" one. Why: with every
// thread copying (dev/moe_mma_cta_copies.cuh) copies and MMAs overlapped poorly
// (docs/perf-log.md, rounds 9-10).
#pragma once

#include "submission/moe_gemm_epilogue.cuh"

namespace submission::moe {

constexpr int kWsThreads = kMmaThreads + 32;  // 4 MMA warps, then the producer warp

// CtasPerSm: 3, or 4 where the MMA warps fit 96 registers
// (ws_max_ctas_per_sm in dev/moe_plans.h; the upload runs 3).
// TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp, CtasPerSm: CTAs per SM
template <int TokenTiles, int WarpTiles, int CtasPerSm>
struct WsPipeline {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  static constexpr int kStages = mma_stages(Tile::kTokens, Tile::kTiles, CtasPerSm, ws_tail_bytes(Tile::kTokens));
  static constexpr int kBarBytes = 2 * 8 * kStages;  // full[kStages], then empty[kStages]
  static constexpr int kSmemBytes = kStages * Tile::kStageBytes + kBarBytes + mma_tail_bytes(Tile::kTokens);
  static_assert(kStages >= 3, "pipeline too shallow");
  static_assert(kSmemBytes <= mma_smem_budget(CtasPerSm), "");
};

// The producer's copies. A stage's weights and scales are one bulk copy:
// these kernels read weights stage-packed per unit (tile_group_words with
// packs of the unit's tiles), so the stage's codes, then its scales, are one
// contiguous run laid out as the stage is. The activation rows
// go by cp.async, lane L copying 16-byte chunks L % 4 + 4i of slots
// L/4 + 8j: as 64-byte bulk pieces (the stage's layout interleaves rows per
// 32-wide k piece) they were up to 128 copy requests a stage, and the copy
// unit's request rate, not DRAM, set the kernel's pace (mixtral m64's GEMM 1
// ran 2x slower than moe_mma_kernel's). cp.async also zero-fills the
// padding slots of the token tiles that hold a route.
template <int TokenTiles, int WarpTiles>  // TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
struct ProducerCopy {
  static constexpr bool kStagePacked = true;
  __device__ static int slot0() { return (threadIdx.x & 31) >> 2; }
  __device__ static int w_tile() { return 0; }
  __device__ static int w_chunk() { return 0; }
  __device__ static int s_tile() { return 0; }
  __device__ static int s_chunk() { return 0; }
};
// Arrivals a stage's full barrier expects: the producer's arrive.expect_tx
// for the bulk copies, then each producer lane's cp.async arrival.
constexpr int kWsFullArrivals = 1 + 32;

// GEMM 1's producer lets GEMM 2 launch (PDL), once, when it has requested
// its ring's first kStages stages (`issued` of them so far), or, with fewer
// in all, when it has no more to request (`last`). GEMM 2's CTAs that fit
// beside GEMM 1's then align their routing and request their first weights
// while GEMM 1 streams, not while its first stages are on their way. Let in
// at GEMM 1's start, at qwen3 M=1 (GEMM 1 on 216 of the 396 CTA slots,
// GEMM 2 on the rest) they delayed GEMM 1's first stages by ~0.5 us and its
// end by ~1 us (docs/perf-log.md, round 80). Where GEMM 1 fills every slot,
// GEMM 2's CTAs become resident only as GEMM 1's leave, long after this.
template <bool kDown, int kStages>  // kDown: GEMM 2
__device__ __forceinline__ void up_launch_dependents_after(int issued, bool last) {
  if (!kDown && (last ? issued < kStages : issued == kStages)) pdl_launch_dependents();
}

// A stage's metadata, then its weights and scales, announced in bytes.
// meta[3] = tag: the unit's split, or on GEMM 1's work queue the stage's chunk.
template <int TokenTiles, int WarpTiles>  // TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
__device__ __forceinline__ void ws_issue_weights(const UnitMeta<TokenTiles>& u, int group, unsigned char* stage,
                                                 uint64_t* full, uint64_t evict_first, int tag) {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  const int lane = threadIdx.x & 31;
  int* meta = reinterpret_cast<int*>(stage + Tile::kWeightBytes + Tile::kScaleBytes + Tile::kActBytes);
  if ((lane & 3) == 0) {
#pragma unroll
    for (int j = 0; j < TokenTiles; ++j) meta[4 + (lane >> 2) + 8 * j] = u.route[j];
  }
  if (lane == 0) {
    meta[0] = u.block;
    meta[1] = u.row_group;
    meta[2] = u.routes;
    meta[3] = tag;
  }
  __syncwarp();  // the metadata is written before the arrival that publishes it
  if (lane == 0) {
    constexpr int kBytes = Tile::kWeightBytes + Tile::kScaleBytes;
    mbar_arrive_expect_tx(full, kBytes);
    bulk_copy(stage, u.w_src + size_t(group) * (kBytes / 16), kBytes, full, evict_first);
  }
}

// The reduction group of the producer's i-th stage of unit u, whose stages
// are the groups [u.split * unit_groups, + unit_groups). Where the plan
// rotates GEMM 1 (MoePlan::rotate_up), each unit starts at a group of its
// own, u.rot, and wraps: the units that run at the same time and read a
// token's row (every row group of its experts) then read different pieces of
// it, where in step they all read the same 256 bytes, held by one L2 slice,
// at once. The MMA warps only count a unit's stages; the sum over the groups
// in another order rounds differently, as accurately and the same on every
// run.
template <int TokenTiles>  // TokenTiles: 8-token tiles
__device__ __forceinline__ int stage_group(const UnitMeta<TokenTiles>& u, int i, int unit_groups) {
  const int g = i + u.rot;
  return u.split * unit_groups + (g < unit_groups ? g : g - unit_groups);
}

// kDown: GEMM 2, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
template <bool kDown, int TokenTiles, int WarpTiles>
__device__ __forceinline__ void ws_issue_acts(const MmaGemmArgs& a, const UnitMeta<TokenTiles>& u, int group,
                                              unsigned char* stage, uint64_t* full) {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  const int lane = threadIdx.x & 31;
  uint4* xs = reinterpret_cast<uint4*>(stage + Tile::kWeightBytes + Tile::kScaleBytes);
  const int K = a.groups * kGroup;
#pragma unroll
  for (int j = 0; j < TokenTiles; ++j) {
    // Token tiles past the block's routes: the MMAs skip them (with_route_tiles),
    // so their slots are left as they are (a block has at least one route).
    if (j > 0 && 8 * j >= u.routes) break;
    const int slot = (lane >> 2) + 8 * j, row = kDown ? u.route[j] : u.act_row[j];
    const __nv_bfloat16* src = row >= 0 ? a.act + size_t(row) * K + group * kGroup : a.act;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int chunk = (lane & 3) + 4 * i;
      cp_async16(xs + act_stage_uint4(chunk, slot, Tile::kTokens), src + chunk * 8,
                 row >= 0 ? 16 : 0);  // padding: zeros
    }
  }
  cp_async_mbar_arrive(full);
}

// The activations of stage i of unit u (reduction group `group`): in GEMM 2
// with flags, before the unit's first copy of h (i = 0), the wait for the
// GEMM 1 units that hold all of the unit's h (wait_h). Both producers issue
// through here.
// kDown: GEMM 2, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
template <bool kDown, int TokenTiles, int WarpTiles>
__device__ __forceinline__ void ws_issue_unit_acts(const MmaGemmArgs& a, const UnitMeta<TokenTiles>& u, int i,
                                                   int group, int unit_groups, unsigned ticket, unsigned char* stage,
                                                   uint64_t* full) {
  if (kDown && a.h_ready != nullptr && i == 0) wait_h(a, u.block, u.split * unit_groups, unit_groups, ticket);
  ws_issue_acts<kDown, TokenTiles, WarpTiles>(a, u, group, stage, full);
}

// ------------------------------------------------------------ the work queue
// Why: stream-K and round-robin units give the CTAs equal stages, but they
// stream at rates up to a third apart (docs/perf-log.md, round 46: mixtral
// M=1's GEMM 1 CTAs end between 29 and 45 us), and each GEMM waits for its
// last CTA. On the queue a CTA's producer warp takes its next piece of work
// from a grid-wide counter when it gets to it, so the CTAs that stream
// faster take more. GEMM 2 takes whole units (its splits are units
// already). GEMM 1 takes chunks of a.chunk_stages stages of a unit: a unit
// of several chunks is finished without any wait, each MMA warp posting
// its accumulators of a chunk to the chunk's slot and counting the chunk
// for (unit, warp); the warp that counts the unit's last chunk adds the
// unit's slots in chunk order (the same bits whichever CTA gets there last)
// and writes its tiles' h. That counter resets itself; the queue is reset by
// the last CTA to leave.
struct ChunkQueue {
  int per_unit;  // chunks of a unit
  int total;     // chunks of all units: unit u's are u * per_unit ..
  int stages;    // a chunk's stages
  __device__ int unit(int q) const { return q / per_unit; }
  __device__ int first_group(int q) const { return q % per_unit * stages; }
  __device__ int length(int q, int unit_groups) const { return min(stages, unit_groups - first_group(q)); }
};
template <bool kDown>  // kDown: GEMM 2
__device__ __forceinline__ ChunkQueue chunk_queue(const MmaGemmArgs& a, const CtaStages& cs) {
  if constexpr (kDown) return {1, cs.units, cs.unit_groups};
  const int per_unit = queue_chunks_per_unit(cs.unit_groups, a.chunk_stages);
  return {per_unit, cs.units * per_unit, a.chunk_stages};
}

// kDown: GEMM 2, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp, CtasPerSm: CTAs per SM
template <bool kDown, int TokenTiles, int WarpTiles, int CtasPerSm>
__device__ __forceinline__ void queue_producer(const MmaGemmArgs& a, const CtaStages& cs, const ChunkQueue& cq,
                                               unsigned char* smem, uint64_t* full, uint64_t* empty) {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  using Pipe = WsPipeline<TokenTiles, WarpTiles, CtasPerSm>;
  const int lane = threadIdx.x & 31;
  const double inv_k = 1.0 / a.k;
  const uint64_t evict_first = l2_evict_first_policy();
  auto unit_meta = [&](int q) {
    return load_unit<kDown, true, TokenTiles, WarpTiles, ProducerCopy<TokenTiles, WarpTiles>>(
        a, cs.routes<TokenTiles>(a), cq.unit(q), cs.units, cs.blocks, cs.splits, inv_k);
  };
  auto stage_at = [&](int slot) { return smem + slot * Tile::kStageBytes; };
  // GEMM 2's metadata says the unit's split (store_partials); GEMM 1's the chunk.
  auto tag = [&](const UnitMeta<TokenTiles>& u, int q) { return kDown ? u.split : q; };
  int slot = 0, issued = 0;
  uint32_t phase = 0;
  int q = 0;
  if (lane == 0) q = atomicAdd(a.queue, 1);
  q = __shfl_sync(0xffffffffu, q, 0);
  UnitMeta<TokenTiles> u = unit_meta(q);
  int early = 0;  // GEMM 2: stages of the first unit whose weights went before the PDL wait
  if constexpr (kDown) {
    // The first slots' weights do not depend on GEMM 1: request them while
    // it finishes, their activations (h) once it has.
    if (q < cq.total) early = min(Pipe::kStages, cq.length(q, cs.unit_groups));
    for (int i = 0; i < early; ++i)
      ws_issue_weights<TokenTiles, WarpTiles>(u, stage_group(u, i, cs.unit_groups), stage_at(i), full + i, evict_first,
                                              tag(u, q));
    if (a.h_ready == nullptr) pdl_wait();  // else wait_h, unit by unit
    down_launch_dependents(a);
  }
  // The next piece is taken two stages before the current one's end, so that
  // the atomic's round trip and the next unit's routing reads overlap the
  // waits for free slots (taken at the end, they stalled the copies for two
  // round trips each time), while a CTA holds no piece another could start
  // sooner.
  while (q < cq.total) {
    const int g0 = cq.first_group(q), g1 = g0 + cq.length(q, cs.unit_groups);
    const int g_take = max(g0, g1 - 2);
    int taken = 0, next_q = cq.total;
    UnitMeta<TokenTiles> next_u;
    for (int g = g0; g < g1; ++g) {
      if (g == g_take && lane == 0) taken = atomicAdd(a.queue, 1);
      if (g == g1 - 1) {
        next_q = __shfl_sync(0xffffffffu, taken, 0);
        next_u = unit_meta(next_q);
      }
      const int group = stage_group(u, g, cs.unit_groups);
      if (early > 0) {
        --early;  // its slot is taken and its weights requested
      } else {
        mbar_wait(empty + slot, phase ^ 1);  // a fresh barrier passes parity 1 at once
        ws_issue_weights<TokenTiles, WarpTiles>(u, group, stage_at(slot), full + slot, evict_first, tag(u, q));
      }
      // GEMM 2 takes whole units (g0 = 0), GEMM 1 on the queue waits for no flag.
      ws_issue_unit_acts<kDown, TokenTiles, WarpTiles>(a, u, g, group, cs.unit_groups, cs.ticket, stage_at(slot),
                                                       full + slot);
      up_launch_dependents_after<kDown, Pipe::kStages>(++issued, false);
      if (++slot == Pipe::kStages) slot = 0, phase ^= 1;
    }
    q = next_q;
    u = next_u;
  }
  up_launch_dependents_after<kDown, Pipe::kStages>(issued, true);
  // The end: a slot whose metadata says so, completed by plain arrivals.
  mbar_wait(empty + slot, phase ^ 1);
  if (lane == 0)
    reinterpret_cast<int*>(stage_at(slot) + Tile::kWeightBytes + Tile::kScaleBytes + Tile::kActBytes)[0] = -1;
  __syncwarp();
  mbar_arrive(full + slot);
  if (lane == 0) {
    mbar_arrive(full + slot);  // kWsFullArrivals = 1 + 32
    // Every CTA's last take happens before its count; the last to count
    // resets both for the next call, whose grid of this GEMM starts only
    // after this one has completed (the PDL waits of the launches between).
    __threadfence();
    if (atomicAdd(a.queue + 1, 1) == int(gridDim.x) - 1) a.queue[0] = a.queue[1] = 0;
  }
  cp_async_wait<0>();  // no copy of this thread's outlives it
}

// The end of chunk q in one MMA warp (meta: its last stage's), see above.
// acc is left undefined (the caller zeroes it for the next chunk).
template <int TokenTiles, int WarpTiles>  // TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
__device__ __forceinline__ void finish_chunk(const MmaGemmArgs& a, const ChunkQueue& cq, int q, const int* meta,
                                             float (&acc)[WarpTiles][TokenTiles][4]) {
  if (cq.per_unit == 1) {
    store_h<TokenTiles, WarpTiles>(a, meta, acc);
    return;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // [chunk][warp][rt * TokenTiles + nt][lane]: a warp's 16-byte stores of one fragment are contiguous.
  auto slot = [&](int chunk) {
    return a.chunk_partial + (size_t(chunk) * kMmaWarps + warp) * (WarpTiles * TokenTiles * 32) + lane;
  };
  float4* mine = slot(q);
#pragma unroll
  for (int rt = 0; rt < WarpTiles; ++rt)
#pragma unroll
    for (int nt = 0; nt < TokenTiles; ++nt)
      __stcg(mine + (rt * TokenTiles + nt) * 32,
             make_float4(acc[rt][nt][0], acc[rt][nt][1], acc[rt][nt][2], acc[rt][nt][3]));
  __syncwarp();  // every lane's slot is stored before lane 0 releases it
  const int unit = cq.unit(q);
  int* counter = a.chunk_counters + size_t(unit) * kMmaWarps + warp;
  int before = 0;
  if (lane == 0) {
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    before = atomicAdd(counter, 1);
  }
  if (__shfl_sync(0xffffffffu, before, 0) != cq.per_unit - 1) return;
  if (lane == 0) {
    *counter = 0;
    asm volatile("fence.acq_rel.gpu;" ::: "memory");  // acquire: the other chunks' slots
  }
  __syncwarp();
  // Every slot from memory, this chunk's too (the warp's own stores, so
  // visible to it): the sum reuses acc's registers; a separate sum spilled
  // the 32-route kernels.
  const int q0 = unit * cq.per_unit;
  for (int c = q0; c < q0 + cq.per_unit; ++c) {
    const float4* part = slot(c);
#pragma unroll
    for (int rt = 0; rt < WarpTiles; ++rt)
#pragma unroll
      for (int nt = 0; nt < TokenTiles; ++nt) {
        const float4 v = __ldcg(part + (rt * TokenTiles + nt) * 32);
        const bool first = c == q0;
        acc[rt][nt][0] = first ? v.x : acc[rt][nt][0] + v.x;
        acc[rt][nt][1] = first ? v.y : acc[rt][nt][1] + v.y;
        acc[rt][nt][2] = first ? v.z : acc[rt][nt][2] + v.z;
        acc[rt][nt][3] = first ? v.w : acc[rt][nt][3] + v.w;
      }
  }
  store_h<TokenTiles, WarpTiles>(a, meta, acc);
}

// The MMA warps on the queue: the stages as they land until the producer's
// end slot, each of GEMM 1's chunks ended by finish_chunk, each of GEMM 2's
// units by its store (and combine) as in moe_ws_kernel.
// kDown: GEMM 2, kSplit: split GEMM 2, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp, CtasPerSm: CTAs per
// SM
template <bool kDown, bool kSplit, int TokenTiles, int WarpTiles, int CtasPerSm>
__device__ __forceinline__ void queue_consumer(const MmaGemmArgs& a, const CtaStages& cs, const ChunkQueue& cq,
                                               unsigned char* smem, uint64_t* full, uint64_t* empty,
                                               const uint4* minus136_frag, int* combine) {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  using Pipe = WsPipeline<TokenTiles, WarpTiles, CtasPerSm>;
  constexpr bool kPairStages = TokenTiles * WarpTiles <= 2 && CtasPerSm == 3;  // as in moe_ws_kernel
  float acc[WarpTiles][TokenTiles][4];
  zero_acc(acc);
  int slot = 0, in_chunk = 0, length = 0;
  uint32_t phase = 0;
  auto meta_of = [&](int s) {
    return reinterpret_cast<const int*>(smem + s * Tile::kStageBytes + Tile::kWeightBytes + Tile::kScaleBytes +
                                        Tile::kActBytes);
  };
#pragma unroll 1
  for (;;) {
    mbar_wait(full + slot, phase);
    const int* meta = meta_of(slot);
    if (meta[0] < 0) break;
    const int q = meta[3];  // GEMM 1: the chunk (GEMM 2: the split)
    if (in_chunk == 0) length = kDown ? cs.unit_groups : cq.length(q, cs.unit_groups);
    const int n_slot = slot + 1 == Pipe::kStages ? 0 : slot + 1;
    const uint32_t n_phase = slot + 1 == Pipe::kStages ? phase ^ 1 : phase;
    bool pair = false;
    if constexpr (kPairStages)
      pair = __all_sync(0xffffffffu, in_chunk + 1 < length && mbar_test(full + n_slot, n_phase));
    const unsigned char* stage = smem + slot * Tile::kStageBytes;
    if (pair)
      compute_two_stages<TokenTiles, WarpTiles>(stage, smem + n_slot * Tile::kStageBytes, meta[2], minus136_frag, acc);
    else
      compute_stage<TokenTiles, WarpTiles>(stage, meta[2], minus136_frag, acc);
    in_chunk += pair ? 2 : 1;
    if (in_chunk == length) {
      if constexpr (kDown)
        finish_unit<true, kSplit, TokenTiles, WarpTiles>(a, meta, acc, cs, 0, length, cs.row_groups, cs.splits,
                                                         combine);
      else
        finish_chunk<TokenTiles, WarpTiles>(a, cq, q, meta, acc);
      zero_acc(acc);
      in_chunk = 0;
    }
    __syncwarp();  // every lane is done with the slots (and their metadata)
    if ((threadIdx.x & 31) == 0) {
      mbar_arrive(empty + slot);
      if (pair) mbar_arrive(empty + n_slot);
    }
    slot = n_slot, phase = n_phase;
    if (pair) {
      if (++slot == Pipe::kStages) slot = 0, phase ^= 1;
    }
  }
  finish_gemm<kDown, kSplit, TokenTiles>(a, cs);
}

// kQueue: the GEMM on the work queue (above) instead of CtaStages' schedule.
// kDown: GEMM 2, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp, CtasPerSm: CTAs per SM, kSplit: split
// GEMM 2, kQueue: on the work queue
template <bool kDown, int TokenTiles, int WarpTiles, int CtasPerSm, bool kSplit, bool kQueue = false>
__global__ void __launch_bounds__(kWsThreads, CtasPerSm) moe_ws_kernel(const MmaGemmArgs a) {
  static_assert(kDown || !kSplit, "only GEMM 2 splits its reduction");
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  using Pipe = WsPipeline<TokenTiles, WarpTiles, CtasPerSm>;
  extern __shared__ __align__(16) unsigned char mma_smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(mma_smem + Pipe::kStages * Tile::kStageBytes);
  uint64_t* empty = full + Pipe::kStages;
  int* combine = reinterpret_cast<int*>(empty + Pipe::kStages);
  uint4* minus136_frag = reinterpret_cast<uint4*>(mma_smem + Pipe::kSmemBytes - 16);
  if (threadIdx.x == 0) {
    for (int s = 0; s < Pipe::kStages; ++s) {
      mbar_init(full + s, kWsFullArrivals);
      mbar_init(empty + s, kMmaWarps);  // one arrival per MMA warp
    }
    mbar_init_fence();
    *minus136_frag = make_uint4(kBf16PairMinus136, kBf16PairMinus136, kBf16PairMinus136, kBf16PairMinus136);
  }
  // With cta_align, past the pipeline's Pipe::kSmemBytes: the launch adds aligned_routes_ints.
  int* const own_routing = cta_align_routes<TokenTiles>(a, reinterpret_cast<int*>(mma_smem + Pipe::kSmemBytes));
  __syncthreads();  // the last CTA-wide barrier: the producer warp leaves the MMA warps' barriers

  const CtaStages cs = cta_stages<kDown, kSplit, TokenTiles, WarpTiles>(a, own_routing);
  if constexpr (kDown) {
    // No local route: GEMM 1 wrote every token's zeros, so GEMM 2 has nothing to store or
    // combine, and skips its queue, grid barrier and the combine's reads (perf log round 100). The
    // routing is the same in every CTA, so none waits at a barrier for the others. The grid
    // still ends after GEMM 1's, as the op must.
    if (cs.blocks == 0) {
      pdl_wait();
      return;
    }
  }
  if constexpr (kQueue) {
    const ChunkQueue cq = chunk_queue<kDown>(a, cs);
    if (threadIdx.x >= kMmaThreads) {
      queue_producer<kDown, TokenTiles, WarpTiles, CtasPerSm>(a, cs, cq, mma_smem, full, empty);
    } else {
      if constexpr (kDown) down_launch_dependents(a);  // as below
      queue_consumer<kDown, kSplit, TokenTiles, WarpTiles, CtasPerSm>(a, cs, cq, mma_smem, full, empty, minus136_frag,
                                                                      combine);
    }
    return;
  }
  const int blocks = cs.blocks, splits = cs.splits, unit_groups = cs.unit_groups, total = cs.total;

  if (threadIdx.x >= kMmaThreads) {
    // Producer warp: up to kStages stages ahead of the slowest MMA warp,
    // across unit boundaries; the next unit's metadata loaded a unit early.
    const double inv_k = 1.0 / a.k;
    using Map = ProducerCopy<TokenTiles, WarpTiles>;
    const uint64_t evict_first = l2_evict_first_policy();
    int p_unit = 0, p_group = cs.start_group, p_slot = 0;
    uint32_t p_phase = 0;
    UnitMeta<TokenTiles> cur = load_unit<kDown, true, TokenTiles, WarpTiles, Map>(
        a, cs.routes<TokenTiles>(a), cs.unit_at(0), cs.units, blocks, splits, inv_k);
    UnitMeta<TokenTiles> next = load_unit<kDown, true, TokenTiles, WarpTiles, Map>(
        a, cs.routes<TokenTiles>(a), cs.unit_at(1), cs.units, blocks, splits, inv_k);
    auto advance = [&]() {
      if (++p_slot == Pipe::kStages) p_slot = 0, p_phase ^= 1;
      if (++p_group == unit_groups) {
        p_group = 0;
        ++p_unit;
        cur = next;
        next = load_unit<kDown, true, TokenTiles, WarpTiles, Map>(a, cs.routes<TokenTiles>(a), cs.unit_at(p_unit + 1),
                                                                  cs.units, blocks, splits, inv_k);
      }
    };
    auto stage_at = [&]() { return mma_smem + p_slot * Tile::kStageBytes; };
    int first = 0;
    if constexpr (kDown) {
      // The first slots' weights do not depend on GEMM 1: request them while
      // it finishes, then their activations (h) once it has.
      first = total < Pipe::kStages ? total : Pipe::kStages;
      const int p_unit0 = p_unit, p_group0 = p_group;
      const UnitMeta<TokenTiles> cur0 = cur, next0 = next;
      for (int i = 0; i < first; ++i) {
        ws_issue_weights<TokenTiles, WarpTiles>(cur, stage_group(cur, p_group, unit_groups), stage_at(), full + p_slot,
                                                evict_first, cur.split);
        advance();
      }
      if (a.h_ready == nullptr) pdl_wait();  // else wait_h, unit by unit
      down_launch_dependents(a);
      p_unit = p_unit0, p_group = p_group0, p_slot = 0, p_phase = 0;
      cur = cur0, next = next0;
      for (int i = 0; i < first; ++i) {
        ws_issue_unit_acts<kDown, TokenTiles, WarpTiles>(a, cur, p_group, stage_group(cur, p_group, unit_groups),
                                                         unit_groups, cs.ticket, stage_at(), full + p_slot);
        advance();
      }
    }
    for (int i = first; i < total; ++i) {
      mbar_wait(empty + p_slot, p_phase ^ 1);  // a fresh barrier passes parity 1 at once
      const int group = stage_group(cur, p_group, unit_groups);
      ws_issue_weights<TokenTiles, WarpTiles>(cur, group, stage_at(), full + p_slot, evict_first, cur.split);
      ws_issue_unit_acts<kDown, TokenTiles, WarpTiles>(a, cur, p_group, group, unit_groups, cs.ticket, stage_at(),
                                                       full + p_slot);
      up_launch_dependents_after<kDown, Pipe::kStages>(i + 1, false);
      advance();
    }
    up_launch_dependents_after<kDown, Pipe::kStages>(total, true);
    cp_async_wait<0>();  // no copy of this thread's outlives it
    return;
  }

  // MMA warps. In GEMM 2 they read GEMM 1's output only through the
  // producer's copies, issued after its wait (pdl_wait or wait_h), so they need no wait of their own.
  if constexpr (kDown) down_launch_dependents(a);
  float acc[WarpTiles][TokenTiles][4];
  zero_acc(acc);
  ConsumerPos pos{cs.start_group, 0, cs.start_group};
  int c_slot = 0;
  uint32_t c_phase = 0;
  // Small tiles (one warp's MMA chain per stage is short) take two landed
  // stages of a unit at once, so that their instruction streams overlap;
  // not at 4 CTAs per SM, whose 96 registers the pair spills.
  constexpr bool kPairStages = TokenTiles * WarpTiles <= 2 && CtasPerSm == 3;
#pragma unroll 1
  for (int f = 0; f < total;) {
    mbar_wait(full + c_slot, c_phase);
    const int n_slot = c_slot + 1 == Pipe::kStages ? 0 : c_slot + 1;
    const uint32_t n_phase = c_slot + 1 == Pipe::kStages ? c_phase ^ 1 : c_phase;
    bool pair = false;
    if constexpr (kPairStages) {
      // Only if every lane's own test saw the stage landed: each lane then
      // holds its own acquire of it, with no wait added (a wait per lane
      // after lane 0's test cost 0.5-1% on the paired shapes).
      pair =
          __all_sync(0xffffffffu, f + 1 < total && pos.group + 1 < cs.unit_groups && mbar_test(full + n_slot, n_phase));
    }
    if (pair) {
      consume_two_stages<kDown, kSplit, TokenTiles, WarpTiles>(a, cs, mma_smem + c_slot * Tile::kStageBytes,
                                                               mma_smem + n_slot * Tile::kStageBytes, minus136_frag,
                                                               combine, f + 1 == total - 1, pos, acc);
    } else {
      consume_stage<kDown, kSplit, TokenTiles, WarpTiles>(a, cs, mma_smem + c_slot * Tile::kStageBytes, minus136_frag,
                                                          combine, f == total - 1, pos, acc);
    }
    __syncwarp();  // every lane is done with the slots (and their metadata)
    if ((threadIdx.x & 31) == 0) {
      mbar_arrive(empty + c_slot);
      if (pair) mbar_arrive(empty + n_slot);
    }
    c_slot = n_slot, c_phase = n_phase;
    ++f;
    if (pair) {
      if (++c_slot == Pipe::kStages) c_slot = 0, c_phase ^= 1;
      ++f;
    }
  }
  finish_gemm<kDown, kSplit, TokenTiles>(a, cs);
}

}  // namespace submission::moe
