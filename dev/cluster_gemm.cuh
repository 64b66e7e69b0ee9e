// Small-M GEMM, split-K inside thread-block clusters: out[m, n] = Epi(sum_k X[m, k] W[n, k]).
// Variant `cluster_splitk_mma`, not a default: on the H200 it measured 0.87-0.94x of cuBLASLt on
// the dense shapes and lost to the direct kernel on the pooler (docs/perf-log.md, round 14).
//
// Why it exists. At M = 32 the direct kernel (submission/small_m_direct.cuh) lets every 16-row weight tile
// re-read all 32 token rows from L2 (2 bytes of activations per byte of weight), and its 16-row
// blocks come in ragged waves (qkv: 384 blocks on 264 slots). Here:
//
//   * One wave. The grid is exactly the clusters that fit on the GPU at once (occupancy API), and
//     the 16-row tiles are divided evenly among them.
//   * A cluster of S CTAs shares a range of tiles; CTA s takes the s-th of S slices of K. It
//     copies its slice of the token rows into shared memory once and every warp reads them from
//     there: token traffic from L2 is 8 TokenGroups rows x K x 2 bytes per cluster, not per 16 rows.
//   * Weights go straight from the packed copy (direct::pack_tiles' layout: per tile, 1 KB per
//     32-wide k chunk, contiguous) into MMA fragments, two batches of kClusterBatch chunks in
//     flight per warp (direct_mma.cuh explains the k permutation that makes a 16-byte load one
//     fragment).
//   * Inside a CTA the 16 warps split the slice into warp_k columns and the tiles kClusterWarps /
//     warp_k ways. Each warp leaves one fp32 partial tile per (tile, column) in shared memory.
//   * The reduction never leaves the cluster: the columns are added locally, then after a cluster
//     barrier CTA s adds, for its 1/S of the cluster's outputs, the partials of all S CTAs
//     (distributed shared memory) in a fixed order and runs the epilogue. No workspace, no
//     atomics, no second launch; bit-identical from run to run.
//
// Where its time goes (globaltimer trace per CTA, round 14): the token rows' first group lands
// ~2.5 us after the start, the weight stream then runs at ~3.2 TB/s on the 120 SMs that clusters
// of 4-8 occupy (16 warps rarely divide a cluster's tiles evenly: qkv gives 13 tiles to 16 warps),
// and the two cluster barriers with the sum cost ~3 us after the last weight byte.
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "dev/cluster_launch.h"
#include "submission/async_copy.cuh"
#include "submission/cuda_check.h"
#include "submission/direct_mma.cuh"

namespace submission::small_m {

constexpr int kClusterWarps = 16;     // one CTA per SM: 16 warps x two 4 KB batches in flight
constexpr int kClusterBatch = 4;      // chunks (1 KB of weights each) per warp batch
constexpr int kMaxClusterSlices = 8;  // the portable cluster size

template <class Rows, class Epi>
struct ClusterParams {
  const uint4* w;  // direct::pack_tiles' layout: [tile][chunk][row half][lane] 16-byte pieces
  Rows rows;
  Epi epi;
  int M, N, K;
  int n_tiles;       // 16-row tiles
  int chunks;        // 32-wide k chunks of K
  int slice_chunks;  // chunks per CTA of a cluster (the last slice may be shorter)
  int warp_k;        // warp columns over a slice
  int clusters;      // clusters per token chunk (grid.x / S)
  int max_tiles;     // most tiles any cluster holds: the partial buffer's depth
};

// A slice is cut into batches of kClusterBatch chunks; warp column wk takes batches wk,
// wk + warp_k, ... so that "group" j, the j-th batch of every column, is one contiguous run of k.
// The groups are the units in which the token rows arrive, and a column's j-th batch needs only
// group j. Groups per slice, rounded up (the shared rows are zero past the slice):
__host__ __device__ constexpr int cluster_groups(int slice_chunks, int warp_k) {
  return (slice_chunks + warp_k * kClusterBatch - 1) / (warp_k * kClusterBatch);
}

// A token row in shared memory: the groups back to back, then 64 bytes of padding, so that rows g
// and g + 1 start 64 bytes apart modulo 128 and a quarter-warp's eight 16-byte reads (rows g and
// g + 1, four units each) fall on distinct banks. In 16-byte units; a group is warp_k x
// kClusterBatch x 4 units, a multiple of 16.
__host__ __device__ constexpr int cluster_row_stride(int groups, int warp_k) {
  return groups * warp_k * kClusterBatch * 4 + 4;
}

// Shared memory: one mbarrier per group (rounded up to 16-byte units, where the token rows
// start), the slice's token rows (8 TokenGroups rows) and the partial tiles [warp_k][max_tiles][8 TokenGroups
// tokens][16 rows] fp32.
__host__ __device__ constexpr int cluster_barrier_units(int groups) { return (groups * 8 + 15) / 16; }
inline size_t cluster_smem_bytes(int ng, int slice_chunks, int warp_k, int max_tiles) {
  const int groups = cluster_groups(slice_chunks, warp_k);
  const size_t units = size_t(cluster_barrier_units(groups)) + size_t(8) * ng * cluster_row_stride(groups, warp_k);
  return units * 16 + size_t(warp_k) * max_tiles * 8 * ng * 16 * sizeof(float);
}

template <int TokenGroups, class Rows, class Epi>  // TokenGroups: 8-token groups per block
__global__ void __launch_bounds__(kClusterWarps * 32, 1) cluster_gemm_kernel(const ClusterParams<Rows, Epi> p) {
  namespace cg = cooperative_groups;
  constexpr int kCols = 8 * TokenGroups, kTileOuts = kCols * 16, kB = kClusterBatch, kThreads = kClusterWarps * 32;
  extern __shared__ __align__(16) uint4 smem[];
  __shared__ const __nv_bfloat16* xrow[kCols];
  const cg::cluster_group cluster = cg::this_cluster();
  const int S = int(cluster.num_blocks()), s = int(cluster.block_rank());
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, q = lane % 4;
  const int c = blockIdx.x / S, m0 = blockIdx.y * kCols;
  const int t0 = int(int64_t(c) * p.n_tiles / p.clusters), t1 = int(int64_t(c + 1) * p.n_tiles / p.clusters);

  // This warp's share: batches wk, wk + warp_k, ... of slice s (chunks from k0, below k1), of
  // tiles t0 + wr, t0 + wr + kWr, ...
  const int wk = warp % p.warp_k, wr = warp / p.warp_k, kWr = kClusterWarps / p.warp_k;
  const int groups = cluster_groups(p.slice_chunks, p.warp_k);
  const int k0 = s * p.slice_chunks, k1 = min(k0 + p.slice_chunks, p.chunks);
  const int group_units = p.warp_k * kB * 4;  // 16-byte units of one token row in a group
  const int row_units = cluster_row_stride(groups, p.warp_k);
  const int my_tiles = t1 - t0 > wr ? (t1 - t0 - wr + kWr - 1) / kWr : 0;
  const int steps = my_tiles * groups;

  uint64_t* const xbar = reinterpret_cast<uint64_t*>(smem);
  uint4* const xs = smem + cluster_barrier_units(groups);
  float* const part = reinterpret_cast<float*>(xs + kCols * row_units);

  // A step is one batch of one tile: group `grp` of tile `tile`. Two cursors walk the steps, one
  // issuing loads two steps ahead of the one multiplying.
  struct Step {
    int tile, grp;
  };
  auto next = [&](Step& st) {
    if (++st.grp == groups) {
      st.grp = 0;
      st.tile += kWr;
    }
  };
  auto load = [&](const Step& st, uint4(&a)[kB][1], uint4(&b)[kB][1]) {
    const int c0 = k0 + (st.grp * p.warp_k + wk) * kB;
    const direct::PackedWeights w{p.w + size_t(t0 + st.tile) * p.chunks * 64};
    direct::load_weights<kB>(w, c0, k1, 1, a, b);
  };
  float acc[TokenGroups][4] = {};
  const uint4* const xthread = xs + g * row_units + q;
  auto multiply = [&](const Step& st, const uint4(&a)[kB][1], const uint4(&b)[kB][1]) {
    mbar_wait(&xbar[st.grp], 0);  // its token rows have landed (free after the first tile)
    const uint4* xb = xthread + (st.grp * p.warp_k + wk) * kB * 4;
#pragma unroll
    for (int u = 0; u < kB; ++u) {
#pragma unroll
      for (int j = 0; j < TokenGroups; ++j) {
        const uint4 x = xb[8 * j * row_units + u * 4];
        mma_bf16(acc[j], a[u][0].x, b[u][0].x, a[u][0].y, b[u][0].y, x.x, x.y);
        mma_bf16(acc[j], a[u][0].z, b[u][0].z, a[u][0].w, b[u][0].w, x.z, x.w);
      }
    }
    if (st.grp == groups - 1) {  // the tile's last batch: park its partial, start afresh
      float* dst = part + size_t(wk * p.max_tiles + st.tile) * kTileOuts;
#pragma unroll
      for (int j = 0; j < TokenGroups; ++j)
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          dst[(8 * j + 2 * q + (i & 1)) * 16 + g + 8 * (i >> 1)] = acc[j][i];
          acc[j][i] = 0.0f;
        }
    }
  };

  // The token rows of group j, zeros past the slice, K and M: this thread's share, then its
  // arrival on the group's barrier once those copies have landed.
  auto copy_tokens = [&](int j) {
    for (int i = tid; i < kCols * group_units; i += kThreads) {
      const int r = i / group_units, u = j * group_units + i % group_units;
      const int chunk = k0 + u / 4, k = chunk * direct::kChunkK + u % 4 * 8;
      const bool ok = xrow[r] != nullptr && chunk < k1 && k < p.K;
      cp_async16(xs + r * row_units + u, ok ? static_cast<const void*>(xrow[r] + k) : p.w, ok ? 16 : 0);
    }
    cp_async_mbar_arrive(&xbar[j]);
  };
  // Group j goes out just before the weight batch that first needs it (batch j of the warp's first
  // tile), group 0 before any weight: issued all at once behind the weights, the slice's token
  // rows landed 7-9 us after the start. A warp with no tile sends its shares at once. No
  // deadlock: multiplying group j waits for every thread's share of j, which each warp sends
  // after multiplying group j - 2 at the latest.
  int sent = 0;  // groups this thread has sent its share of
  auto send_tokens_for = [&](const Step& st) {
    for (const int last = st.tile == wr ? st.grp : groups - 1; sent <= last; ++sent) copy_tokens(sent);
  };

  uint4 a0[kB][1], b0[kB][1], a1[kB][1], b1[kB][1];
  Step ld{wr, 0}, mu{wr, 0};  // tiles relative to t0
  if (tid < kCols) xrow[tid] = p.rows.row(m0 + tid);
  if (tid == 0) {
    for (int j = 0; j < groups; ++j) mbar_init(&xbar[j], kThreads);
    mbar_init_fence();
  }
  __syncthreads();
  send_tokens_for(steps > 0 ? Step{wr, 0} : Step{-1, 0});
  if (steps > 0) load(ld, a0, b0), next(ld);
  if (steps > 1) send_tokens_for(ld), load(ld, a1, b1), next(ld);

  for (int i = 0; i < steps; i += 2) {
    multiply(mu, a0, b0), next(mu);
    if (i + 2 < steps) send_tokens_for(ld), load(ld, a0, b0), next(ld);
    if (i + 1 >= steps) break;
    multiply(mu, a1, b1), next(mu);
    if (i + 3 < steps) send_tokens_for(ld), load(ld, a1, b1), next(ld);
  }

  // The warp columns' partials of each tile, added into column 0 in column order. Then (after the
  // cluster barrier's release/acquire) CTA s adds, for its 1/S of the cluster's outputs, column 0
  // of every CTA in rank order: a fixed order, so bit-identical whoever finished first. The
  // groups no warp multiplied may still be landing, so all of them are waited for first.
  for (int j = 0; j < groups; ++j) mbar_wait(&xbar[j], 0);
  __syncthreads();
  const int outs4 = (t1 - t0) * kTileOuts / 4;
  float4* const part4 = reinterpret_cast<float4*>(part);
  if (p.warp_k > 1) {
    const int column4 = p.max_tiles * kTileOuts / 4;
    for (int e = tid; e < outs4; e += kThreads) {
      float4 v = part4[e];
      for (int w = 1; w < p.warp_k; ++w) {
        const float4 x = part4[w * column4 + e];
        v = make_float4(v.x + x.x, v.y + x.y, v.z + x.z, v.w + x.w);
      }
      part4[e] = v;
    }
  }
  cluster.sync();
  const int lo = int(int64_t(s) * outs4 / S), hi = int(int64_t(s + 1) * outs4 / S);
  for (int e = lo + tid; e < hi; e += kThreads) {
    float4 x[kMaxClusterSlices];
#pragma unroll
    for (int r = 0; r < kMaxClusterSlices; ++r)  // all remote loads in flight at once
      if (r < S) x[r] = cluster.map_shared_rank(part4, r)[e];
    float4 v = x[0];
#pragma unroll
    for (int r = 1; r < kMaxClusterSlices; ++r)
      if (r < S) v = make_float4(v.x + x[r].x, v.y + x[r].y, v.z + x[r].z, v.w + x[r].w);
    // Four consecutive outputs: rows o % 16 .. + 3 of token o / 16 of tile e / (kTileOuts / 4).
    const int tl = e / (kTileOuts / 4), o = e % (kTileOuts / 4) * 4;
    const int n = (t0 + tl) * 16 + o % 16, m = m0 + o / 16;
    const float vs[4] = {v.x, v.y, v.z, v.w};
    if (m < p.M) {
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (n + i < p.N) p.epi.store(m, n + i, vs[i] + (Epi::kHasBias ? p.epi.bias(n + i) : 0.0f));
    }
  }
  // No CTA leaves while another may still read its shared memory. Execution order is all this
  // needs (the reads' values are used above), hence the relaxed arrival.
  asm volatile("barrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;\n" ::: "memory");
}

// ------------------------------------------------------------------ plan
// The split is chosen from a model of the machine, not from a table of shapes. For S CTAs per
// cluster (one K slice each) and warp_k warp columns per slice, the occupancy API says how many
// clusters fit on the GPU at once; the tiles are spread over exactly those. Then
//   time = latency
//        + the first token group's copy (nothing multiplies before it lands)
//        + max(all weight bytes / HBM bandwidth,
//              the busiest warp's bytes / (its two batches in flight / loaded latency),
//              weight and token bytes into the SMs / their ingest rate)
//        + (S > 1: two cluster barriers and the distributed-shared-memory sum)
// The busiest-warp term is what an uneven split costs: with 16 warps x 8 KB per SM in flight,
// a loaded latency of ~4 us is what holds the whole GPU to the HBM rate, so every idle warp
// slows its SM. The ingest term counts token bytes at the weights' rate: at 7 TB/s (an L2
// figure) the model picked 2 slices for qkv, whose 17 MB of token rows delayed everything
// (26.6 us); at the HBM rate it picks 4 (24.6 us). Constants: the scorer's copy bandwidth net of
// its own costs; the per-SM L2 rate (a share of the L2 when every SM pulls) and the fix-up are
// estimates, not fitted.
struct ClusterPlan {
  int slices = 0, warp_k = 0, clusters = 0, max_tiles = 0;
  int slice_chunks = 0;
  size_t smem = 0;
  double predicted_us = 1e300;
};

inline constexpr double kClusterHbmBytesPerUs = 3.9e6;
inline constexpr double kClusterIngestBytesPerUs = 3.9e6;
inline constexpr double kClusterSmL2BytesPerUs = 5.0e4;  // one SM's share of the L2 when all pull
inline constexpr double kClusterLatencyUs = 2.0;
inline constexpr double kClusterLoadedLatencyUs = 4.0;
inline constexpr double kClusterFixupUs = 0.5;

template <class Rows, class Epi>
using ClusterKernel = void (*)(ClusterParams<Rows, Epi>);

template <class Rows, class Epi>
ClusterKernel<Rows, Epi> cluster_kernel(int ng) {
  switch (ng) {
    case 1:
      return cluster_gemm_kernel<1, Rows, Epi>;
    case 2:
      return cluster_gemm_kernel<2, Rows, Epi>;
    case 3:
      return cluster_gemm_kernel<3, Rows, Epi>;
    default:
      return cluster_gemm_kernel<4, Rows, Epi>;
  }
}

// Clusters of `slices` CTAs that fit on the GPU at once with `smem` bytes of shared memory each.
template <class Rows, class Epi>
int co_resident_clusters(ClusterKernel<Rows, Epi> kernel, int slices, size_t smem) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg =
      cluster_launch_config(dim3(unsigned(slices)), dim3(kClusterWarps * 32), smem, nullptr, unsigned(slices), &attr);
  int clusters = 0;
  SUBMISSION_CUDA(cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg));
  return clusters;
}

template <class Rows, class Epi>
ClusterPlan plan_cluster(int M, int N, int K, int ng, int sms, int smem_optin) {
  const ClusterKernel<Rows, Epi> kernel = cluster_kernel<Rows, Epi>(ng);
  cudaFuncAttributes attrs{};
  SUBMISSION_CUDA(cudaFuncGetAttributes(&attrs, kernel));
  const int smem_max = smem_optin - int(attrs.sharedSizeBytes);  // less the static row pointers
  SUBMISSION_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_max));
  const int n_tiles = (N + 15) / 16, chunks = (K + direct::kChunkK - 1) / direct::kChunkK;
  // Past 8 TokenGroups tokens grid.y repeats the whole stream per token chunk, one wave after another.
  const int m_chunks = (M + 8 * ng - 1) / (8 * ng);
  const double total_bytes = double(n_tiles) * chunks * 1024 * m_chunks;
  ClusterPlan best;
  for (int slices = 1; slices <= kMaxClusterSlices && slices <= chunks; slices *= 2) {
    const int slice_chunks = (chunks + slices - 1) / slices;
    if ((slices - 1) * slice_chunks >= chunks) continue;  // a slice would be empty
    for (int warp_k = 1; warp_k <= kClusterWarps; warp_k *= 2) {
      // Start from one cluster per `slices` SMs; shrink to what the shared memory lets fit.
      int clusters = std::min(n_tiles, std::max(1, sms / slices));
      size_t smem = 0;
      for (;;) {
        const int max_tiles = (n_tiles + clusters - 1) / clusters;
        smem = cluster_smem_bytes(ng, slice_chunks, warp_k, max_tiles);
        const int fit = smem <= size_t(smem_max) ? co_resident_clusters<Rows, Epi>(kernel, slices, smem) : 0;
        if (fit >= clusters || fit == 0) {
          if (fit == 0) clusters = 0;
          break;
        }
        clusters = fit;
      }
      if (clusters == 0) continue;
      const int max_tiles = (n_tiles + clusters - 1) / clusters;
      const int groups = cluster_groups(slice_chunks, warp_k);
      const int warp_tiles = (max_tiles + kClusterWarps / warp_k - 1) / (kClusterWarps / warp_k);
      const int warp_chunks = std::min(groups * kClusterBatch, slice_chunks);
      const double warp_bytes = double(warp_tiles) * warp_chunks * 1024 * m_chunks;
      const double x_group = 8.0 * ng * warp_k * kClusterBatch * 64;
      const double x_bytes = double(clusters) * slices * 8 * ng * slice_chunks * 64 * m_chunks;
      const double stream = std::max({total_bytes / kClusterHbmBytesPerUs,
                                      warp_bytes * kClusterLoadedLatencyUs / (2.0 * kClusterBatch * 1024),
                                      (total_bytes + x_bytes) / kClusterIngestBytesPerUs});
      const double us =
          kClusterLatencyUs + x_group / kClusterSmL2BytesPerUs + stream + (slices > 1 ? kClusterFixupUs : 0.0);
      if (us < best.predicted_us) {  // strict: ties keep fewer slices, then fewer warp columns
        best = {slices, warp_k, clusters, max_tiles, slice_chunks, smem, us};
      }
    }
  }
  return best;
}

template <class Rows, class Epi>
void launch_cluster(const ClusterPlan& plan, const uint4* packed, const Rows& rows, const Epi& epi, int M, int N, int K,
                    int ng, cudaStream_t stream) {
  const int n_tiles = (N + 15) / 16, chunks = (K + direct::kChunkK - 1) / direct::kChunkK;
  const ClusterParams<Rows, Epi> p{
      packed, rows, epi, M, N, K, n_tiles, chunks, plan.slice_chunks, plan.warp_k, plan.clusters, plan.max_tiles};
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg =
      cluster_launch_config(dim3(unsigned(plan.clusters * plan.slices), unsigned((M + 8 * ng - 1) / (8 * ng))),
                            dim3(kClusterWarps * 32), plan.smem, stream, unsigned(plan.slices), &attr);
  SUBMISSION_CUDA(cudaLaunchKernelEx(&cfg, cluster_kernel<Rows, Epi>(ng), p));
}

}  // namespace submission::small_m
