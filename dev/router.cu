// The router's dev variants: the one-launch designs the tagged default (submission/router_tagged.cu)
// replaced, kept for comparison (docs/perf-log-router.md, rounds 15-40).
//   fused_slots:      each block writes its tile to a workspace slot and the last block to finish,
//                     elected by an atomic counter that wraps back to 0, sums the slots (it reads
//                     splits x T rows) and takes every token's top k, one warp per token;
//   fused_cluster:    the splits of a tile form a thread-block cluster and sum each other's tiles
//                     through distributed shared memory; the logits go to global memory once;
//   fused_slots_wide: the slots with a shorter tail (lighter fences, every slot read at once);
//   fused_tile_tree:  that, with each tile summed in its own last split first.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "dev/cluster_launch.h"
#include "dev/variants.h"
#include "submission/router_gemm.cuh"
#include "submission/router_plan.h"
#include "submission/router_topk.cuh"

namespace submission::router {
namespace {

namespace cg = cooperative_groups;

// 16 bytes written by other blocks during this kernel (so from L2, never L1), or zeros where
// !pred: predicated like load_readonly, so that a thread's loads all issue before it adds.
__device__ __forceinline__ float4 load_cg4(const float* p, bool pred) {
  float4 v;
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  setp.ne.b32 p, %5, 0;\n"
      "  mov.f32 %0, 0f00000000;\n"
      "  mov.f32 %1, 0f00000000;\n"
      "  mov.f32 %2, 0f00000000;\n"
      "  mov.f32 %3, 0f00000000;\n"
      "  @p ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\n"
      "}\n"
      : "=&f"(v.x), "=&f"(v.y), "=&f"(v.z), "=&f"(v.w)
      : "l"(p), "r"(int(pred))
      : "memory");
  return v;
}

// Arrival of this block at a counter of n arrivals; true, in every thread, for the block that
// arrives last. The barrier orders the block's stores before thread 0's release fence; the
// winner's acquire fence orders every other block's stores before the block's later reads (the
// release/acquire fence pattern of the PTX memory model). The counter wraps back to 0 as it
// elects the last block, so every call and every graph replay starts clean.
__device__ __forceinline__ bool arrive_last(unsigned* counter, unsigned n, bool* flag) {
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned old;
    asm volatile("fence.acq_rel.gpu;" ::: "memory");
    asm volatile("atom.relaxed.gpu.global.inc.u32 %0, [%1], %2;" : "=r"(old) : "l"(counter), "r"(n - 1) : "memory");
    if (old == n - 1) asm volatile("fence.acq_rel.gpu;" ::: "memory");
    *flag = old == n - 1;
  }
  __syncthreads();
  return *flag;
}

template <int LaneKeys>  // keys per lane: 4, 8 or 16
__device__ __forceinline__ void load_row(const float* src, float (&v)[LaneKeys]) {
#pragma unroll
  for (int i = 0; i < LaneKeys; i += 4) {
    // ld.global.cg: written by other blocks during this kernel, so never from L1.
    const float4 f = __ldcg(reinterpret_cast<const float4*>(src + i));
    v[i] = f.x, v[i + 1] = f.y, v[i + 2] = f.z, v[i + 3] = f.w;
  }
}

// Token t's top k, by one warp, in the last block. Lane l owns experts [lP, lP + LaneKeys).
template <int LaneKeys,   // experts per lane: 4, 8 or 16
          bool kCluster>  // the logits are final in ws (fused_cluster), else one partial per split
__device__ void select_topk(const FusedArgs& p, int t, int splits) {
  constexpr int kEpad = 32 * LaneKeys;
  const int lane = threadIdx.x % 32, base = lane * LaneKeys;
  float v[LaneKeys];
  if constexpr (kCluster) {
    load_row<LaneKeys>(p.ws + size_t(t) * kEpad + base, v);
  } else {
    // Every split's part of (up to) 8 of the lane's logits is loaded before any is added: one L2
    // round trip, not one per split (a runtime loop over the splits compiled to two).
    constexpr int kQuads = (LaneKeys < 8 ? LaneKeys : 8) / 4;
#pragma unroll
    for (int i0 = 0; i0 < LaneKeys; i0 += 4 * kQuads) {
      float4 part[kMaxSplits][kQuads];
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s)
#pragma unroll
        for (int q = 0; q < kQuads; ++q)
          part[s][q] = load_cg4(p.ws + (size_t(s) * p.T + t) * kEpad + base + i0 + 4 * q, s < splits);
#pragma unroll
      for (int q = 0; q < kQuads; ++q) {
        float4 a = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int s = 0; s < kMaxSplits; ++s)
          if (s < splits) a.x += part[s][q].x, a.y += part[s][q].y, a.z += part[s][q].z, a.w += part[s][q].w;
        v[i0 + 4 * q] = a.x, v[i0 + 4 * q + 1] = a.y, v[i0 + 4 * q + 2] = a.z, v[i0 + 4 * q + 3] = a.w;
      }
    }
#pragma unroll
    for (int i = 0; i < LaneKeys; ++i)
      if (base + i < p.E) p.logits[size_t(t) * p.E + base + i] = v[i];
  }
  topk_of_row<LaneKeys>(p, t, v);
}

// Grid (splits, ceil(E/16)), one wave; fused_cluster launches it with clusters of (splits, 1, 1).
// blockDim.x / 32 >= T warps. The "1 block per SM" bound matters: without it ptxas saves registers
// by placing each chunk's mma between the loads, so a warp waits a memory latency per chunk
// instead of one per batch.
template <int TokenTiles,  // n8 token tiles per block: 1 (T <= 8) or 2
          int LaneKeys,    // experts per lane of a top-k warp: 4, 8 or 16 (E <= 32 LaneKeys)
          bool kCluster>   // the splits sum through distributed shared memory (fused_cluster)
__global__ void __launch_bounds__(kMaxWarps * 32, 1) router_fused_kernel(FusedArgs p) {
  constexpr int kCols = 8 * TokenTiles;  // token columns of a tile
  constexpr int kTile = kTileE * kCols;
  constexpr int kEpad = 32 * LaneKeys;
  __shared__ float warp_tiles[kMaxWarps * kTile];
  __shared__ float block_tile[kTile];
  __shared__ bool last;

  const int split = blockIdx.x, splits = gridDim.x, e0 = blockIdx.y * kTileE;
  const int warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  // This block's chunks of H, as even as whole chunks allow; its warps take every nwarps-th one
  // so that each load step of the block reads one contiguous run of every row.
  const int lo = int(int64_t(split) * p.chunks / splits);
  const int hi = int(int64_t(split + 1) * p.chunks / splits);

  float acc[TokenTiles][4] = {};
  warp_gemm<TokenTiles>(p.W, p.X, p.T, p.H, p.chunks, e0, 0, lo + warp, hi, nwarps, acc);
  store_tile<TokenTiles>(warp_tiles + warp * kTile, acc);
  __syncthreads();
  for (int o = threadIdx.x; o < kTile; o += blockDim.x) {
    const float s = sum_tiles(warp_tiles, kTile, nwarps, o);
    if constexpr (kCluster) {
      block_tile[o] = s;
    } else {
      const int e = e0 + o / kCols, t = o % kCols;
      if (e < p.E && t < p.T) p.ws[(size_t(split) * p.T + t) * kEpad + e] = s;
    }
  }

  if constexpr (kCluster) {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();  // every split's block_tile is complete and visible to the cluster
    // Each rank finishes its own share of the tile, summing the ranks' tiles in rank order.
    const int rank = int(cluster.block_rank());
    const int share = ceil_div(kTile, splits);
    for (int i = threadIdx.x; i < share; i += blockDim.x) {
      const int o = rank * share + i;
      if (o >= kTile) break;
      float s = *cluster.map_shared_rank(block_tile + o, 0);
      for (int r = 1; r < splits; ++r) s += *cluster.map_shared_rank(block_tile + o, r);
      const int e = e0 + o / kCols, t = o % kCols;
      if (e < p.E && t < p.T) {
        p.logits[size_t(t) * p.E + e] = s;
        p.ws[size_t(t) * kEpad + e] = s;
      }
    }
    // Done reading the peers' shared memory; each block waits for all of these before it exits.
    cluster.barrier_arrive();
  }

  if (arrive_last(p.counter, gridDim.x * gridDim.y, &last) && warp < p.T)
    select_topk<LaneKeys, kCluster>(p, warp, splits);

  if constexpr (kCluster) cg::this_cluster().barrier_wait();
}

// ---------------------------------------------------------------- staged kernels
//
// fused_slots_wide and fused_tile_tree: the fused kernel's GEMM, with the splits' partial tiles
// in workspace slots, and a shorter tail after the last byte of Wg:
//   - the election is fence.acq_rel + a relaxed atomic (the release/acquire pattern), not two
//     sequentially consistent fences;
//   - every slot read is issued by many threads at once, each loading all splits of a float4
//     before it adds any, so a read costs one L2 round trip rather than one per split.
// fused_slots_wide: the last block of the grid sums every slot into shared memory and its warps
//   take the top k from there. It reads splits x T x E floats (128 KB at dsv3 T=16) on one SM.
// fused_tile_tree: the last of a tile's splits sums that tile's slots (splits x T x 16 floats)
//   and writes its final logits; the last tile to finish takes the top k from those (T x E
//   floats). One more election, but the reads are spread over the tiles' SMs and 8x smaller.

struct StagedArgs {
  FusedArgs f;              // f.ws: fused_tile_tree's final logits [T][32*LaneKeys], zero padding; f.counter: the
                            // grid's blocks (wide) or tiles (tree) done
  float* slots;             // [m_tiles][splits][kTile]: slot[t * 16 + e - 16m], tokens < T only
  unsigned* tile_counters;  // fused_tile_tree: splits done per tile
};

// Float4 j of a tile's slots, one per split: all loads first (one L2 round trip).
__device__ __forceinline__ void load_splits(float4 (&v)[kMaxSplits], const float* tile_slots, int tile_size, int splits,
                                            int j, bool pred) {
#pragma unroll
  for (int s = 0; s < kMaxSplits; ++s) v[s] = load_cg4(tile_slots + s * tile_size + 4 * j, pred && s < splits);
}

// Their sum in split order (the order fused_slots uses, and the same for every expert).
__device__ __forceinline__ float4 sum_splits(const float4 (&v)[kMaxSplits], int splits) {
  float4 r = v[0];
#pragma unroll
  for (int s = 1; s < kMaxSplits; ++s)
    if (s < splits) r.x += v[s].x, r.y += v[s].y, r.z += v[s].z, r.w += v[s].w;
  return r;
}

// Grid, block and GEMM as router_fused_kernel.
template <int TokenTiles,  // n8 token tiles per block: 1 (T <= 8) or 2
          int LaneKeys,    // experts per lane of a top-k warp: 4, 8 or 16 (E <= 32 LaneKeys)
          bool kTree>      // each tile summed in its own last split first (fused_tile_tree)
__global__ void __launch_bounds__(kMaxWarps * 32, 1) router_staged_kernel(StagedArgs sa) {
  using Tiles = ColumnTiles<TokenTiles>;
  constexpr int kCols = 8 * TokenTiles;
  constexpr int kTile = kTileE * kCols;  // a slot
  constexpr int kEpad = 32 * LaneKeys;
  // The warps' tiles until the block's sum is taken, then (fused_slots_wide) the last block's
  // logits [T][kEpad].
  constexpr int kWarpTiles = kMaxWarps * Tiles::kSize;
  constexpr int kSmem = (kTree || kWarpTiles >= kCols * kEpad) ? kWarpTiles : kCols * kEpad;
  __shared__ __align__(16) float smem[kSmem];
  __shared__ bool last;
  const FusedArgs& p = sa.f;

  const int split = blockIdx.x, splits = gridDim.x, m = blockIdx.y;
  const int warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  const int lo = int(int64_t(split) * p.chunks / splits);
  const int hi = int(int64_t(split + 1) * p.chunks / splits);

  float acc[TokenTiles][4] = {};
  warp_gemm<TokenTiles>(p.W, p.X, p.T, p.H, p.chunks, m * kTileE, 0, lo + warp, hi, nwarps, acc);
  Tiles::store(smem, acc);
  __syncthreads();
  // Token-major, so that a float4 of a slot is 4 experts of one token and the readers fetch the
  // T real tokens only (the warps' tiles hold the padding tokens too). Rows past E are zeros.
  float* slot = sa.slots + (size_t(m) * splits + split) * kTile;
  for (int o = threadIdx.x; o < kTileE * p.T; o += blockDim.x)
    slot[o] = Tiles::sum(smem, nwarps, o % kTileE, o / kTileE);
  // Float4s per tile that the readers take: 4 per token.
  const int groups_per_tile = 4 * p.T;

  if constexpr (kTree) {
    if (!arrive_last(sa.tile_counters + m, splits, &last)) return;
    const float* tile_slots = sa.slots + size_t(m) * splits * kTile;
    for (int j = threadIdx.x; j < groups_per_tile; j += blockDim.x) {
      float4 v[kMaxSplits];
      load_splits(v, tile_slots, kTile, splits, j, true);
      const float4 s = sum_splits(v, splits);
      const int t = j / 4, e = m * kTileE + 4 * (j % 4);
      // The whole float4 (e + 3 < 16 * m_tiles <= 32P): past E it is zeros, as the padding is.
      *reinterpret_cast<float4*>(p.ws + size_t(t) * kEpad + e) = s;
      const float r[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (e + i < p.E) p.logits[size_t(t) * p.E + e + i] = r[i];
    }
    if (!arrive_last(p.counter, gridDim.y, &last)) return;
    if (warp < p.T) select_topk<LaneKeys, true>(p, warp, splits);
  } else {
    if (!arrive_last(p.counter, gridDim.x * gridDim.y, &last)) return;
    // Two float4s per thread and step, all their loads in flight together.
    const int groups = int(gridDim.y) * groups_per_tile;
    for (int j0 = threadIdx.x; j0 < groups; j0 += 2 * blockDim.x) {
      float4 v[2][kMaxSplits];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = j0 + h * int(blockDim.x);
        const int jm = j < groups ? j : 0;
        load_splits(v[h], sa.slots + size_t(jm / groups_per_tile) * splits * kTile, kTile, splits, jm % groups_per_tile,
                    j < groups);
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int j = j0 + h * int(blockDim.x);
        if (j >= groups) break;
        const float4 s = sum_splits(v[h], splits);
        const int jt = j % groups_per_tile;
        const int t = jt / 4, e = (j / groups_per_tile) * kTileE + 4 * (jt % 4);
        *reinterpret_cast<float4*>(smem + t * kEpad + e) = s;  // e + 3 < 16 * m_tiles <= 32P
        const float r[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
        for (int i = 0; i < 4; ++i)
          if (e + i < p.E) p.logits[size_t(t) * p.E + e + i] = r[i];
      }
    }
    __syncthreads();
    if (warp < p.T) {
      const int base = (threadIdx.x % 32) * LaneKeys;
      float v[LaneKeys];
#pragma unroll
      for (int i = 0; i < LaneKeys; ++i) v[i] = smem[warp * kEpad + base + i];  // unwritten past E: never selected
      topk_of_row<LaneKeys>(p, warp, v);
    }
  }
}

using FusedKernel = void (*)(FusedArgs);

template <int TokenTiles,  // n8 token tiles per block
          bool kCluster>   // the splits sum through distributed shared memory
FusedKernel fused_kernel_for(int lane_keys) {
  return lane_keys == 4   ? router_fused_kernel<TokenTiles, 4, kCluster>
         : lane_keys == 8 ? router_fused_kernel<TokenTiles, 8, kCluster>
                          : router_fused_kernel<TokenTiles, 16, kCluster>;
}

template <bool kCluster>  // the splits sum through distributed shared memory
FusedKernel fused_kernel(const FusedPlan& pl) {
  return pl.token_tiles == 1 ? fused_kernel_for<1, kCluster>(pl.lane_keys)
                             : fused_kernel_for<2, kCluster>(pl.lane_keys);
}

class FusedRouter final : public Router {
 public:
  FusedRouter(const RouterDims& d, const RouterWeights& w, const FusedPlan& pl, bool cluster)
      : packed_(direct::pack_tiles(w.Wg, d.E, d.H)),
        plan_(pl),
        cluster_(cluster),
        kernel_(cluster ? fused_kernel<true>(pl) : fused_kernel<false>(pl)),
        counter_(sizeof(unsigned)),
        ws_(ws_floats(d, pl, cluster) * sizeof(float)) {
    check_cuda(cudaMemset(counter_.as<void>(), 0, sizeof(unsigned)), "cudaMemset");
    check_cuda(cudaMemset(ws_.as<void>(), 0, ws_floats(d, pl, cluster) * sizeof(float)), "cudaMemset");
    // The memsets run on the legacy stream; finish them before any call on the scorer's stream.
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    args_ = FusedArgs{packed_.as<uint4>(),     nullptr, nullptr, nullptr, nullptr, ws_.as<float>(),
                      counter_.as<unsigned>(), d.T,     d.H,     d.E,     d.k,     pl.chunks};
  }

  // How many clusters of this launch the device can hold at once (0 if none, or not a cluster
  // launch). It depends on how the die's SMs are split into GPCs, so it is asked, not assumed.
  int max_active_clusters() const {
    if (!cluster_) return 0;
    cudaLaunchAttribute attr;
    cudaLaunchConfig_t cfg = config(nullptr, &attr);
    int clusters = 0;
    const cudaError_t e = cudaOccupancyMaxActiveClusters(&clusters, kernel_, &cfg);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();  // not sticky; leave no error for the caller's next check
      return 0;
    }
    return clusters;
  }

  void run(const RouterIO& io, cudaStream_t stream) override {
    const FusedArgs a = with_io(args_, io);
    cudaLaunchAttribute attr;
    const cudaLaunchConfig_t cfg = config(stream, &attr);
    check_cuda(cudaLaunchKernelEx(&cfg, kernel_, a), "router_fused_kernel launch");
  }

 private:
  static size_t ws_floats(const RouterDims& d, const FusedPlan& pl, bool cluster) {
    return size_t(cluster ? 1 : pl.splits) * d.T * 32 * pl.lane_keys;
  }

  cudaLaunchConfig_t config(cudaStream_t stream, cudaLaunchAttribute* attr) const {
    return cluster_launch_config(dim3(plan_.splits, plan_.m_tiles), dim3(plan_.warps * 32), 0, stream,
                                 cluster_ ? unsigned(plan_.splits) : 0u, attr);
  }

  DeviceMemory packed_;  // Wg, direct::pack_tiles
  FusedPlan plan_;
  bool cluster_;
  FusedKernel kernel_;
  DeviceMemory counter_;
  DeviceMemory ws_;
  FusedArgs args_;
};

using StagedKernel = void (*)(StagedArgs);

template <int TokenTiles,  // n8 token tiles per block
          bool kTree>      // each tile summed in its own last split first
StagedKernel staged_kernel_for(int lane_keys) {
  return lane_keys == 4   ? router_staged_kernel<TokenTiles, 4, kTree>
         : lane_keys == 8 ? router_staged_kernel<TokenTiles, 8, kTree>
                          : router_staged_kernel<TokenTiles, 16, kTree>;
}

template <bool kTree>  // each tile summed in its own last split first
StagedKernel staged_kernel(const FusedPlan& pl) {
  return pl.token_tiles == 1 ? staged_kernel_for<1, kTree>(pl.lane_keys) : staged_kernel_for<2, kTree>(pl.lane_keys);
}

// fused_slots_wide (tree = false) and fused_tile_tree (tree = true).
class StagedRouter final : public PlainGridRouter<StagedArgs> {
 public:
  StagedRouter(const RouterDims& d, const RouterWeights& w, const FusedPlan& pl, bool tree)
      : PlainGridRouter(d, w, pl, tree ? staged_kernel<true>(pl) : staged_kernel<false>(pl),
                        "router_staged_kernel launch"),
        counters_((1 + size_t(pl.m_tiles)) * sizeof(unsigned)),
        slots_(size_t(pl.m_tiles) * pl.splits * kTileE * 8 * pl.token_tiles * sizeof(float)),
        final_(size_t(d.T) * 32 * pl.lane_keys * sizeof(float)) {
    check_cuda(cudaMemset(counters_.as<void>(), 0, (1 + size_t(pl.m_tiles)) * sizeof(unsigned)), "cudaMemset");
    // Every block writes its whole slot before any block reads it; the final logits' padding
    // past E must read as zeros.
    check_cuda(cudaMemset(final_.as<void>(), 0, size_t(d.T) * 32 * pl.lane_keys * sizeof(float)), "cudaMemset");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    args_.f = FusedArgs{packed_.as<uint4>(),      nullptr, nullptr, nullptr, nullptr, final_.as<float>(),
                        counters_.as<unsigned>(), d.T,     d.H,     d.E,     d.k,     pl.chunks};
    args_.slots = slots_.as<float>();
    args_.tile_counters = counters_.as<unsigned>() + 1;
  }

 private:
  DeviceMemory counters_;  // [0]: the grid's election; [1 + m]: tile m's (fused_tile_tree)
  DeviceMemory slots_;
  DeviceMemory final_;  // fused_tile_tree's final logits (tiny; allocated for both)
};

void require_fused_fits(const RouterDims& d, const std::string& variant) {
  if (!fused_fits(d))
    throw std::invalid_argument("router " + variant + ": needs T <= " + std::to_string(kFusedMaxT) +
                                ", E <= " + std::to_string(kFusedMaxE) + ", k <= " + std::to_string(kFusedMaxK));
}

// A one-launch router R(dims, weights, plan, extra...), where the shape fits.
template <class R,         // the router class
          class... Extra>  // its constructor's arguments past the plan
std::unique_ptr<R> make_planned(const RouterDims& d, const RouterWeights& w, const std::string& variant,
                                Extra... extra) {
  require_fused_fits(d, variant);
  return std::make_unique<R>(d, w, plan_fused(d, device_sm_count()), extra...);
}

}  // namespace
}  // namespace submission::router

namespace submission::dev {

std::vector<std::string> dev_router_variants() {
  return {"fused_cluster", "fused_slots", "fused_slots_wide", "fused_tile_tree"};
}

std::unique_ptr<Router> make_dev_router(const RouterDims& dims, const RouterWeights& w, const std::string& variant) {
  using namespace router;
  const DimsError e = dims_error(dims);  // the submission's checks first, as for every variant
  if (!e.field.empty()) throw std::invalid_argument("router: field " + e.field + ": " + e.why);
  if (dims.E > 65535 * kTileE) throw std::invalid_argument("router: E past the grid limit");
  if (variant == "fused_cluster") {
    auto r = make_planned<FusedRouter>(dims, w, variant, true);
    if (r->max_active_clusters() < 1)
      throw std::runtime_error("router fused_cluster: the device cannot launch the cluster");
    return r;
  }
  if (variant == "fused_slots") return make_planned<FusedRouter>(dims, w, variant, false);
  if (variant == "fused_slots_wide") return make_planned<StagedRouter>(dims, w, variant, false);
  if (variant == "fused_tile_tree") return make_planned<StagedRouter>(dims, w, variant, true);
  throw std::invalid_argument("router: unknown variant '" + variant + "'");
}

}  // namespace submission::dev
