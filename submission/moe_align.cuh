// Alignment, the first launch of the op: from topk_ids (GLOBAL expert ids)
// find the routes to this rank's experts, count them per local expert and lay
// them out sorted by expert and padded to blocks of block_tokens slots, so
// that a GEMM work unit (block, rows) reads one expert's weights for all the
// routes it holds. One CTA: a decode batch has a few thousand route ids at
// most (larger batches take proportionally longer here, still correct); at
// most 32 routes, one warp (moe_align_warp_kernel).
//
// The layout is deterministic: within an expert, routes keep their order
// r = m*k + j (a stable counting sort), so every run places every route in the
// same slot.
#pragma once

#include <cub/block/block_scan.cuh>

#include "submission/moe_plan.h"
#include "submission/moe_ptx.cuh"

namespace submission::moe {

// The layout it fills: AlignedRoutes (moe_plan.h).

constexpr int kAlignThreads = 512;
constexpr int kAlignWarps = kAlignThreads / 32;
// Routes whose local expert is kept in shared memory after the first read
// (16 KB); a larger batch re-reads the rest from topk_ids.
constexpr int kAlignCachedRoutes = 4096;

// count, first_block, placed: E_local ints each; the ranking table
// [warps][E_local]; the cached route experts.
inline size_t align_smem_bytes(int E_local, int routes) {
  return (size_t(E_local) * (3 + kAlignWarps) + (routes < kAlignCachedRoutes ? routes : kAlignCachedRoutes)) *
         sizeof(int);
}

// Its cost is on every call's critical path (GEMM 1 waits for it), so each
// phase is kept to a few hundred cycles: every slot is set to padding up
// front with coalesced stores (per-expert padding loops were scattered
// stores, ~3.8 k cycles at qwen3 M=256), each route's local expert is read
// from global memory once, and a chunk's per-warp counts are turned into
// offsets from registers, two barriers per chunk (clock64 trace, qwen3
// M=256: 17.6 k cycles in all before). At the largest E_local the dims
// allow (2048) the table and the cache take 172 KB of shared memory.
// Static, like the warp kernel below: the GPU tests include this header
// beside the op's own file to compare the two kernels' layouts.
static __global__ void __launch_bounds__(kAlignThreads)
    moe_align_kernel(const int32_t* __restrict__ topk_ids, int M, int k, int E_local, int ep_rank, int block_tokens,
                     int max_blocks, AlignedRoutes out) {
  // GEMM 1's CTAs may become resident while the routing is aligned; they wait
  // for this grid's results themselves.
  pdl_launch_dependents();

  extern __shared__ int align_smem[];
  int* count = align_smem;                                 // routes per local expert
  int* first_block = count + E_local;                      // first block of each expert
  int* placed = first_block + E_local;                     // routes of each expert placed so far
  int* warp_table = placed + E_local;                      // [kAlignWarps][E_local], zero between chunks
  int* route_expert = warp_table + kAlignWarps * E_local;  // local expert of route r < cached, -1: off-rank
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int routes = M * k, cached = routes < kAlignCachedRoutes ? routes : kAlignCachedRoutes;
  auto expert_of = [&](int r) {
    return r < cached ? route_expert[r] : moe_local_expert(topk_ids[r], ep_rank, E_local);
  };

  for (int e = tid; e < E_local; e += kAlignThreads) count[e] = placed[e] = 0;
  for (int i = tid; i < kAlignWarps * E_local; i += kAlignThreads) warp_table[i] = 0;
  // Every slot starts as padding; the placement below overwrites the routes'
  // slots (this CTA's stores, ordered by the barriers in between).
  for (int i = tid; i < max_blocks * block_tokens; i += kAlignThreads) out.slot_route[i] = -1;
  __syncthreads();
  for (int r = tid; r < routes; r += kAlignThreads) {
    const int e = moe_local_expert(topk_ids[r], ep_rank, E_local);
    if (r < cached) route_expert[r] = e;
    if (e >= 0) atomicAdd(&count[e], 1);  // integer counts: order does not matter
  }
  __syncthreads();
  for (int m = tid; m < M; m += kAlignThreads) {
    int n = 0;
#pragma unroll 8
    for (int j = 0; j < k; ++j) n += expert_of(m * k + j) >= 0;
    out.token_routes[m] = n;
  }

  // First block of each expert: exclusive scan of its block count, E_local
  // values in chunks of the CTA size.
  using Scan = cub::BlockScan<int, kAlignThreads>;
  __shared__ typename Scan::TempStorage scan_storage;
  int blocks = 0;
  for (int base = 0; base < E_local; base += kAlignThreads) {
    const int e = base + tid;
    const int n = e < E_local ? (count[e] + block_tokens - 1) / block_tokens : 0;
    int before, chunk_total;
    Scan(scan_storage).ExclusiveSum(n, before, chunk_total);
    if (e < E_local) first_block[e] = blocks + before;
    blocks += chunk_total;
    __syncthreads();  // scan_storage is reused by the next chunk; first_block is read below
  }
  if (tid == 0) *out.num_blocks = blocks;
  for (int e = tid; e < E_local; e += kAlignThreads) {
    const int n = count[e], b0 = first_block[e];
    for (int i = 0; i * block_tokens < n; ++i) {
      out.block_expert[b0 + i] = e;
      out.block_routes[b0 + i] = min(block_tokens, n - i * block_tokens);
    }
  }

  // Stable placement, one route per thread per chunk. A route's rank within
  // its expert = routes of that expert placed by earlier chunks + those of
  // earlier warps in this chunk + those of lower lanes in its warp. The warp
  // part comes from __match_any_sync. A warp's count of an expert goes to
  // warp_table, where one thread per expert turns it into the warp's offset;
  // the lane that wrote it zeroes it once its warp has placed its routes.
  for (int base = 0; base < routes; base += kAlignThreads) {
    const int r = base + tid;
    const int e = r < routes ? expert_of(r) : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(peers & ((1u << lane) - 1u));
    int* entry = warp_table + warp * E_local + (e >= 0 ? e : 0);
    if (e >= 0 && rank == 0) *entry = __popc(peers);
    __syncthreads();
    for (int x = tid; x < E_local; x += kAlignThreads) {
      int c[kAlignWarps];
#pragma unroll
      for (int w = 0; w < kAlignWarps; ++w) c[w] = warp_table[w * E_local + x];
      int running = placed[x];
#pragma unroll
      for (int w = 0; w < kAlignWarps; ++w) {
        if (c[w]) warp_table[w * E_local + x] = running;  // the others stay zero
        running += c[w];
      }
      placed[x] = running;
    }
    __syncthreads();
    if (e >= 0) out.slot_route[first_block[e] * block_tokens + *entry + rank] = r;
    __syncwarp();  // every lane of the warp has read its offset
    if (e >= 0 && rank == 0) *entry = 0;
  }
}

// moe_align_kernel's layout, bit for bit, for at most kAlignWarpRoutes
// routes, by the calling warp: lane r holds route r, and every step is a
// register shuffle. The CTA kernel's fixed cost (its shared-memory set-up,
// the scan and eight CTA barriers, ~7.7 k cycles at M = 1 under ncu) sits on
// every call's critical path, because GEMM 1 reads no weight before the
// alignment has finished. `out` may lie in shared memory: a GEMM CTA
// aligning its own routes (cta_align) reads them after its next barrier.
__device__ __forceinline__ void align_routes_warp(const int32_t* __restrict__ topk_ids, int M, int k, int E_local,
                                                  int ep_rank, int block_tokens, int max_blocks,
                                                  const AlignedRoutes& out) {
  const unsigned all = 0xffffffffu;
  const int lane = threadIdx.x & 31, routes = M * k;
  const int e = lane < routes ? moe_local_expert(topk_ids[lane], ep_rank, E_local) : -1;
  for (int i = lane; i < max_blocks * block_tokens; i += 32) out.slot_route[i] = -1;
  // The routes of the same expert: this route's rank among them (routes keep
  // their order r, as in the CTA kernel's stable placement) and their count.
  const unsigned peers = __match_any_sync(all, e);
  const int rank = __popc(peers & ((1u << lane) - 1u)), n = __popc(peers);
  // The expert's first block: the blocks of every lower expert, each counted
  // once, by the expert's first route.
  const int own_blocks = e >= 0 && rank == 0 ? (n + block_tokens - 1) / block_tokens : 0;
  int first = 0, blocks = 0;
  for (int l = 0; l < routes; ++l) {
    const int el = __shfl_sync(all, e, l), bl = __shfl_sync(all, own_blocks, l);
    blocks += bl;
    if (el < e) first += bl;
  }
  __syncwarp();  // the padding stores come before the routes' stores to the same slots
  if (e >= 0) out.slot_route[first * block_tokens + rank] = lane;
  for (int i = 0; i < own_blocks; ++i) {
    out.block_expert[first + i] = e;
    out.block_routes[first + i] = min(block_tokens, n - i * block_tokens);
  }
  if (lane == 0) *out.num_blocks = blocks;
  // Token m's routes are lanes m*k .. m*k + k - 1 (m*k < 32).
  const unsigned local = __ballot_sync(all, e >= 0);
  const unsigned token_mask = k >= 32 ? all : (1u << k) - 1u;
  for (int m = lane; m < M; m += 32) out.token_routes[m] = __popc((local >> (m * k)) & token_mask);
}

// The one-warp alignment as its own launch (the variants without cta_align).
static __global__ void __launch_bounds__(32)
    moe_align_warp_kernel(const int32_t* __restrict__ topk_ids, int M, int k, int E_local, int ep_rank,
                          int block_tokens, int max_blocks, AlignedRoutes out) {
  pdl_launch_dependents();  // as moe_align_kernel
  align_routes_warp(topk_ids, M, k, E_local, ep_rank, block_tokens, max_blocks, out);
}

}  // namespace submission::moe
