// Alignment, the first launch of the op: from topk_ids (GLOBAL expert ids)
// find the routes to this rank's experts, count them per local expert and lay
// them out sorted by expert and padded to blocks of block_tokens slots, so
// that a GEMM work unit (block, rows) reads one expert's weights for all the
// routes it holds. One CTA: a decode batch has a few thousand route ids at
// most (larger batches take proportionally longer here, still correct).
//
// The layout is deterministic: within an expert, routes keep their order
// r = m*k + j (a stable counting sort), so every run places every route in the
// same slot.
#pragma once

#include <cub/block/block_scan.cuh>

#include "submission/moe_plan.h"
#include "submission/moe_ptx.cuh"

namespace submission::moe {

// The aligned routing, in device workspace. Only the first num_blocks blocks
// are meaningful.
struct AlignedRoutes {
  int* num_blocks;    // [1]
  int* block_expert;  // [max_blocks] local expert of each block, ascending
  int* block_routes;  // [max_blocks] valid slots of each block, 1..block_tokens, valid first
  int* slot_route;    // [max_blocks * block_tokens] route m*k+j of each slot, -1 for padding
  int* token_routes;  // [M] local routes of each token (0: its output row is zeros)
};

constexpr int kAlignThreads = 512;
constexpr int kAlignWarps = kAlignThreads / 32;

// count, first_block, placed: E_local ints each; the ranking table [warps][E_local].
inline size_t align_smem_bytes(int E_local) {
  return size_t(E_local) * (3 + kAlignWarps) * sizeof(int);
}

__global__ void __launch_bounds__(kAlignThreads)
    moe_align_kernel(const int32_t* __restrict__ topk_ids, int M, int k, int E_local, int ep_rank,
                     int block_tokens, AlignedRoutes out) {
  // GEMM 1's CTAs may become resident while the routing is aligned; they wait
  // for this grid's results themselves.
  pdl_launch_dependents();

  extern __shared__ int align_smem[];
  int* count = align_smem;                // routes per local expert
  int* first_block = count + E_local;     // first block of each expert
  int* placed = first_block + E_local;    // routes of each expert placed so far
  int* warp_table = placed + E_local;     // [kAlignWarps][E_local]
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int routes = M * k;

  for (int e = tid; e < E_local; e += kAlignThreads) count[e] = placed[e] = 0;
  for (int i = tid; i < kAlignWarps * E_local; i += kAlignThreads) warp_table[i] = 0;
  __syncthreads();
  for (int r = tid; r < routes; r += kAlignThreads) {
    const int e = moe_local_expert(topk_ids[r], ep_rank, E_local);
    if (e >= 0) atomicAdd(&count[e], 1);  // integer counts: order does not matter
  }
  for (int m = tid; m < M; m += kAlignThreads) {
    int n = 0;
    for (int j = 0; j < k; ++j) n += moe_local_expert(topk_ids[m * k + j], ep_rank, E_local) >= 0;
    out.token_routes[m] = n;
  }
  __syncthreads();

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
    __syncthreads();  // scan_storage is reused by the next chunk
  }
  if (tid == 0) *out.num_blocks = blocks;
  for (int e = tid; e < E_local; e += kAlignThreads) {
    const int n = count[e], b0 = first_block[e];
    for (int i = 0; i * block_tokens < n; ++i) {
      out.block_expert[b0 + i] = e;
      out.block_routes[b0 + i] = min(block_tokens, n - i * block_tokens);
    }
    const int end = (n + block_tokens - 1) / block_tokens * block_tokens;
    for (int s = n; s < end; ++s) out.slot_route[b0 * block_tokens + s] = -1;
  }

  // Stable placement, one route per thread per chunk. A route's rank within
  // its expert = routes of that expert placed by earlier chunks + those of
  // earlier warps in this chunk + those of lower lanes in its warp. The warp
  // part comes from __match_any_sync; the per-warp counts go through
  // warp_table, which one thread per expert turns into running offsets.
  for (int base = 0; base < routes; base += kAlignThreads) {
    const int r = base + tid;
    const int e = r < routes ? moe_local_expert(topk_ids[r], ep_rank, E_local) : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(peers & ((1u << lane) - 1u));
    if (e >= 0 && rank == 0) warp_table[warp * E_local + e] = __popc(peers);
    __syncthreads();
    for (int x = tid; x < E_local; x += kAlignThreads) {
      int running = placed[x];
      for (int w = 0; w < kAlignWarps; ++w) {
        const int c = warp_table[w * E_local + x];
        warp_table[w * E_local + x] = running;
        running += c;
      }
      placed[x] = running;
    }
    __syncthreads();
    if (e >= 0) out.slot_route[first_block[e] * block_tokens + warp_table[warp * E_local + e] + rank] = r;
    __syncthreads();
    for (int i = tid; i < kAlignWarps * E_local; i += kAlignThreads) warp_table[i] = 0;
    __syncthreads();
  }
}

}  // namespace submission::moe
