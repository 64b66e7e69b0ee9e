// A token's top k from its logits by one warp, and the renormalised weights: the tail every
// one-launch router kernel ends with (router_tagged.cu, dev/router.cu). Among equal logits the
// lower expert id comes first.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "submission/router_gemm.cuh"
#include "submission/router_plan.h"

namespace submission::router {

// Sorts a lane's LaneKeys keys, largest first, their indices along; among equal keys the lower index
// first. A bitonic network: a compile-time sequence of compare-exchanges, all in registers.
template <int LaneKeys>  // keys per lane: 4, 8 or 16
__device__ __forceinline__ void sort_lane(uint32_t (&key)[LaneKeys], int (&idx)[LaneKeys]) {
  static_assert((LaneKeys & (LaneKeys - 1)) == 0, "LaneKeys is a power of two");
#pragma unroll
  for (int size = 2; size <= LaneKeys; size *= 2)
#pragma unroll
    for (int stride = size / 2; stride > 0; stride /= 2)
#pragma unroll
      for (int i = 0; i < LaneKeys; ++i) {
        const int j = i ^ stride;
        if (j < i) continue;
        // Ranked (i, j) in blocks whose bit `size` is clear, (j, i) in the others: the bitonic
        // merges of the last size, LaneKeys, leave the whole row ranked.
        const int a = (i & size) ? j : i, b = (i & size) ? i : j;
        const bool swap = key[b] > key[a] || (key[b] == key[a] && idx[b] < idx[a]);
        const uint32_t ka = key[a], kb = key[b];
        const int ia = idx[a], ib = idx[b];
        key[a] = swap ? kb : ka, key[b] = swap ? ka : kb;
        idx[a] = swap ? ib : ia, idx[b] = swap ? ia : ib;
      }
}

// Token t's top k from its logits by one warp, lane l holding experts [l LaneKeys, (l + 1)
// LaneKeys), and the renormalised weights. Each lane sorts its keys once; a round is then the
// warp's max of the lanes' first keys, and the winner (the lowest lane among equal maxima: the
// lowest id) shifts its row by one, branch-free, since the rounds are the serial part. Every
// alternative tried was slower in the scorer (docs/perf-log-router.md, "Top k").
template <int LaneKeys>  // keys per lane: 4, 8 or 16
__device__ __forceinline__ void topk_of_row(const FusedArgs& p, int t, const float (&v)[LaneKeys]) {
  const int lane = threadIdx.x % 32, base = lane * LaneKeys;
  uint32_t key[LaneKeys];
  int idx[LaneKeys];
#pragma unroll
  for (int i = 0; i < LaneKeys; ++i) key[i] = base + i < p.E ? order_key(v[i]) : 0u, idx[i] = i;
  sort_lane<LaneKeys>(key, idx);

  float top = 0.0f, vmax = 0.0f, sum = 0.0f;  // lane j keeps the j-th largest logit
  for (int j = 0; j < p.k; ++j) {
    const uint32_t m = __reduce_max_sync(0xffffffffu, key[0]);
    const unsigned holders = __ballot_sync(0xffffffffu, key[0] == m);
    const bool win = lane == __ffs(holders) - 1;
    if (win) p.ids[size_t(t) * p.k + j] = base + idx[0];
#pragma unroll
    for (int i = 0; i + 1 < LaneKeys; ++i) key[i] = win ? key[i + 1] : key[i], idx[i] = win ? idx[i + 1] : idx[i];
    key[LaneKeys - 1] = win ? 0u : key[LaneKeys - 1];
    // probs[id] / sum over the top k of probs: the softmax denominator cancels. Every lane
    // adds the same terms in the same order.
    const float x = key_value(m);
    if (j == 0) vmax = x;
    sum += expf(x - vmax);
    if (lane == j) top = x;
  }
  if (lane < p.k) p.weights[size_t(t) * p.k + lane] = expf(top - vmax) / sum;
}

}  // namespace submission::router
