// The shared pieces of moe_w4a16's two grouped GEMMs, part 2: the unit epilogues (h for GEMM 1,
// the partials and the weighted combine for GEMM 2), GEMM 1 -> GEMM 2 hand-over unit by unit,
// stream-K, and the schedule of a CTA's stages. Part 1: moe_gemm_stage.cuh.
#pragma once

#include <cuda_bf16.h>

#include <type_traits>

#include "submission/moe_gemm_stage.cuh"

namespace submission::moe {

// GEMM 1 epilogue: accumulator rows g (gate) and g+8 (up) of a tile belong to
// the same output i (see w13_source_row), so h needs no data exchange.
template <int TokenTiles, int WarpTiles>  // TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
__device__ __forceinline__ void store_h(const MmaGemmArgs& a, const int* meta,
                                        const float (&acc)[WarpTiles][TokenTiles][4]) {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int row_group = meta[1], routes = meta[2];
  const int* route = meta + 4;
#pragma unroll
  for (int rt = 0; rt < WarpTiles; ++rt) {
    const int i = (row_group * Tile::kTiles + warp * WarpTiles + rt) * 8 + g;
#pragma unroll
    for (int nt = 0; nt < TokenTiles; ++nt)
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
// however the token's rows divide into routes and splits (docs/perf-log.md,
// round 21). Routes to other ranks (no row written) add an exact 0.
template <class V>  // V: float or float4
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
template <int TokenTiles, int WarpTiles>  // TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
__device__ __forceinline__ void store_partials(const MmaGemmArgs& a, const int* meta,
                                               const float (&acc)[WarpTiles][TokenTiles][4], int splits) {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int row_group = meta[1], routes = meta[2], split = meta[3];
  const int* route = meta + 4;
#pragma unroll
  for (int rt = 0; rt < WarpTiles; ++rt) {
    const int n = (row_group * Tile::kTiles + warp * WarpTiles + rt) * kTileRows + g;
#pragma unroll
    for (int nt = 0; nt < TokenTiles; ++nt)
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
// each completed token's rows, with the MMA warps stopped: hence
// combine_all_tokens where GEMM 2 has many units (docs/perf-log.md, round 18).
template <int TokenTiles, int WarpTiles>  // TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
__device__ __forceinline__ void count_and_combine(const MmaGemmArgs& a, const int* token_routes, const int* meta,
                                                  int row_groups, int splits, int* combine) {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
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
    for (int r = tid; r < Tile::kRows; r += kMmaThreads) {
      const int n = row_group * Tile::kRows + r;
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

template <bool kSplit>  // kSplit: split GEMM 2
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
// streams the same number of weight bytes whatever the unit count. A unit cut
// by a range boundary is finished by the CTA that holds its first stage (see
// stream_k_fixup). Each CTA gets at least kStreamKMinStages stages, below
// which the parts' fix-ups cost more than the idle SMs they fill
// (docs/perf-log.md, rounds 8 and 27).
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
// slot and add their stage count, without waiting (a CTA that had to learn
// whether it arrived last stalled its MMA warps; round 11). The finisher waits until the
// count holds the other stages, adds the parts in CTA order to its own
// (deterministic), runs GEMM 1's epilogue and resets the count for the next
// call. Every CTA of the grid is resident (persistent grid), so the wait
// ends.
template <int TokenTiles, int WarpTiles>  // TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
__device__ __forceinline__ void stream_k_fixup(const MmaGemmArgs& a, const int* meta,
                                               float (&acc)[WarpTiles][TokenTiles][4], const StreamK& sk, int unit,
                                               int groups, int stages, unsigned ticket) {
  constexpr int kFrag = kMmaThreads * WarpTiles * TokenTiles;  // float4 per slot
  const int tid = threadIdx.x;
  const long long u0 = (long long)unit * groups;
  int* counter = a.sk_counters + unit;
  const int first_c = sk.cta_of(u0);
  if (first_c != int(blockIdx.x)) {
    float4* mine = a.sk_partial + size_t(blockIdx.x) * kFrag + tid * WarpTiles * TokenTiles;
#pragma unroll
    for (int rt = 0; rt < WarpTiles; ++rt)
#pragma unroll
      for (int nt = 0; nt < TokenTiles; ++nt)
        __stcg(mine + rt * TokenTiles + nt,
               make_float4(acc[rt][nt][0], acc[rt][nt][1], acc[rt][nt][2], acc[rt][nt][3]));
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
    const float4* part = a.sk_partial + size_t(c) * kFrag + tid * WarpTiles * TokenTiles;
#pragma unroll
    for (int rt = 0; rt < WarpTiles; ++rt)
#pragma unroll
      for (int nt = 0; nt < TokenTiles; ++nt) {
        const float4 v = __ldcg(part + rt * TokenTiles + nt);
        acc[rt][nt][0] += v.x, acc[rt][nt][1] += v.y, acc[rt][nt][2] += v.z, acc[rt][nt][3] += v.w;
      }
  }
  store_h<TokenTiles, WarpTiles>(a, meta, acc);
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
  // The routing this CTA reads (blocks of 8 TokenTiles routes).
  template <int TokenTiles>  // TokenTiles: 8-token tiles
  __device__ AlignedRoutes routes(const MmaGemmArgs& a) const {
    return own_routing ? aligned_routes_at(own_routing, 8 * TokenTiles, a.max_blocks) : a.routes;
  }
};
// Both GEMM kernels start here, after cta_align_routes and a CTA barrier. GEMM 1
// needs the alignment for everything. GEMM 2 reads the routing before its
// wait: under PDL it starts only once every GEMM 1 CTA has passed its own
// wait, so an alignment launch has completed and been flushed by then; it
// waits before reading GEMM 1's output (h): for GEMM 1's grid, or with
// h_ready for the units it reads (wait_h).
// kDown: GEMM 2, kSplit: split GEMM 2, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
template <bool kDown, bool kSplit, int TokenTiles, int WarpTiles>
__device__ __forceinline__ CtaStages cta_stages(const MmaGemmArgs& a, int* own_routing) {
  CtaStages c;
  if constexpr (!kDown) pdl_wait();
  c.ticket = call_ticket(a);  // in GEMM 1 before it lets GEMM 2 launch (after this)
  c.own_routing = own_routing;
  c.blocks = routing_load(c.routes<TokenTiles>(a).num_blocks);
  c.row_groups = a.tiles / (kMmaWarps * WarpTiles);
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
// kDown: GEMM 2, kSplit: split GEMM 2, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
template <bool kDown, bool kSplit, int TokenTiles, int WarpTiles>
__device__ __forceinline__ void finish_unit(const MmaGemmArgs& a, const int* meta,
                                            float (&acc)[WarpTiles][TokenTiles][4], const CtaStages& cs, int c_unit,
                                            int stages, int row_groups, int splits, int* combine) {
  if constexpr (kDown) {
    store_partials<TokenTiles, WarpTiles>(a, meta, acc, splits);
    if (!a.deferred_combine)
      count_and_combine<TokenTiles, WarpTiles>(a, cs.routes<TokenTiles>(a).token_routes, meta, row_groups, splits,
                                               combine);
  } else if (stages == cs.unit_groups) {
    store_h<TokenTiles, WarpTiles>(a, meta, acc);
    publish_h(a, meta, cs.ticket);
  } else {
    stream_k_fixup<TokenTiles, WarpTiles>(a, meta, acc, cs.sk, cs.unit_at(c_unit), cs.unit_groups, stages, cs.ticket);
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
// kDown: GEMM 2, kSplit: split GEMM 2, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
template <bool kDown, bool kSplit, int TokenTiles, int WarpTiles>
__device__ __forceinline__ void end_stages(const MmaGemmArgs& a, const CtaStages& cs, const int* meta, int n,
                                           bool cta_last, int* combine, ConsumerPos& pos,
                                           float (&acc)[WarpTiles][TokenTiles][4]) {
  pos.group += n;
  if (pos.group == cs.unit_groups || cta_last) {
    finish_unit<kDown, kSplit, TokenTiles, WarpTiles>(a, meta, acc, cs, pos.unit, pos.group - pos.first_group,
                                                      cs.row_groups, cs.splits, combine);
    pos.group = pos.first_group = 0;
    ++pos.unit;
    zero_acc(acc);
  }
}
// One stage's MMAs into acc, then its end (end_stages). The stage's slot is
// read until this returns.
// kDown: GEMM 2, kSplit: split GEMM 2, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
template <bool kDown, bool kSplit, int TokenTiles, int WarpTiles>
__device__ __forceinline__ void consume_stage(const MmaGemmArgs& a, const CtaStages& cs, const unsigned char* stage,
                                              const uint4* minus136_frag, int* combine, bool cta_last, ConsumerPos& pos,
                                              float (&acc)[WarpTiles][TokenTiles][4]) {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  const int* meta = reinterpret_cast<const int*>(stage + Tile::kWeightBytes + Tile::kScaleBytes + Tile::kActBytes);
  compute_stage<TokenTiles, WarpTiles>(stage, meta[2], minus136_frag, acc);
  end_stages<kDown, kSplit, TokenTiles, WarpTiles>(a, cs, meta, 1, cta_last, combine, pos, acc);
}
// consume_stage for two consecutive stages of one unit, the first not the
// unit's last (the caller checks): only the second may end the unit.
// kDown: GEMM 2, kSplit: split GEMM 2, TokenTiles: 8-token tiles, WarpTiles: 16-row tiles per warp
template <bool kDown, bool kSplit, int TokenTiles, int WarpTiles>
__device__ __forceinline__ void consume_two_stages(const MmaGemmArgs& a, const CtaStages& cs,
                                                   const unsigned char* stage0, const unsigned char* stage1,
                                                   const uint4* minus136_frag, int* combine, bool cta_last,
                                                   ConsumerPos& pos, float (&acc)[WarpTiles][TokenTiles][4]) {
  using Tile = MmaTile<TokenTiles, WarpTiles>;
  const int* meta = reinterpret_cast<const int*>(stage1 + Tile::kWeightBytes + Tile::kScaleBytes + Tile::kActBytes);
  compute_two_stages<TokenTiles, WarpTiles>(stage0, stage1, meta[2], minus136_frag, acc);
  end_stages<kDown, kSplit, TokenTiles, WarpTiles>(a, cs, meta, 2, cta_last, combine, pos, acc);
}

// A GEMM CTA's last step, after its last unit: GEMM 2's deferred combine, or
// GEMM 1's zeros for the tokens with no local route.
template <bool kDown, bool kSplit, int TokenTiles>  // kDown: GEMM 2, kSplit: split GEMM 2, TokenTiles: 8-token tiles
__device__ __forceinline__ void finish_gemm(const MmaGemmArgs& a, const CtaStages& cs) {
  if constexpr (kDown) {
    if (a.deferred_combine) combine_all_tokens<kSplit>(a);
    retire_ticket(a, cs.ticket);
  } else {
    zero_unrouted_tokens(a, cs.routes<TokenTiles>(a).token_routes);
  }
}

}  // namespace submission::moe
