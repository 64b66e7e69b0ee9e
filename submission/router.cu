// The MoE router: logits = X . Wg^T in fp32, softmax, top-k and renormalisation.
//
// Fast path (T <= 16, E <= 512, k <= 16): one launch.
//   Block (s, m) of a (splits x E/16) grid computes experts [16m, 16m + 16) for every token over
//   the s-th share of H, with mma.sync m16n8k16 (experts on the M side, tokens on N, fp32
//   accumulation); its warps split that share again and are summed in warp order through shared
//   memory. The splits of a tile are then summed in split order:
//     fused_tagged:  each block stores its tile to workspace slots, every value tagged with the
//                    call's number in the same 64-bit word; the last T blocks to start each read
//                    one token's slots (re-reading any word still tagged with the previous call)
//                    and take its top k. No fence or election after the GEMM (the default; see
//                    "tagged kernel" below);
//     fused_cluster: the splits of a tile form a thread-block cluster and sum each other's tiles
//                    through distributed shared memory; the logits go to global memory once;
//     fused_slots:   each block writes its tile to a workspace slot and the last block to finish
//                    sums the slots (it reads splits x T rows);
//     fused_slots_wide, fused_tile_tree: the slots with a shorter tail (lighter fences, every
//                    slot read issued at once; the tree sums each tile in its own last split
//                    first), see "staged kernels" below.
//   In all but fused_tagged the last block to finish, elected by an atomic counter that wraps
//   back to 0 as it elects it (so every call and every graph replay starts clean), picks each
//   token's top k, one warp per token, and writes the renormalised weights.
// General path (any T, k, E up to what shared memory holds): gemm_then_topk, a logits kernel and
// a top-k kernel, two launches.
//
// Every sum is taken in a fixed order and no float atomics are used, so logits, ids and weights
// are bit-identical from run to run; among equal logits the lower expert id comes first.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "submission/cluster_launch.h"
#include "submission/cuda_check.h"
#include "submission/device_memory.h"
#include "submission/direct_mma.cuh"
#include "submission/submission.h"
#include "submission/variants.h"

namespace submission {
namespace {

namespace cg = cooperative_groups;

constexpr int kTileE = 16;      // experts per tile: the mma's M side
using direct::kChunkK;
constexpr int kPlanChunks = 2;  // chunks per warp the fused plan aims at, more warps past that
// Chunks a warp loads before it multiplies. The fused plan gives a warp one batch, so all of its
// weights are requested at once; past kMaxWarps (and in the logits kernel) the batches are
// double-buffered (direct::warp_gemm), two in flight.
constexpr int kBatch = kPlanChunks;
constexpr int kMaxWarps = 16;   // per fused block
constexpr int kMaxSplits = 8;   // the portable cluster size
constexpr int kFusedMaxT = 16;  // two n8 mma tiles; one top-k warp per token
constexpr int kFusedMaxE = 512; // 16 experts per lane in a top-k warp
constexpr int kFusedMaxK = 16;  // each of the k rounds is a step of the serial tail
constexpr int kLogitsWarps = 8;    // gemm_then_topk, first kernel
constexpr int kTopkThreads = 256;  // gemm_then_topk, second kernel

__host__ __device__ constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }

// ---------------------------------------------------------------- device helpers

// A float's bits mapped so that unsigned order is float order, -0 turned into +0 first so that
// the two zeros tie as they do in the reference. No finite logit maps to 0, which therefore
// marks an expert that is taken or does not exist.
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t u = __float_as_uint(f + 0.0f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

__device__ __forceinline__ float key_value(uint32_t key) {
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// One warp's share of a tile: experts [e0, e0 + 16) x tokens [t0, t0 + 8*NT), summed over the
// 32-wide k chunks first, first + stride, ... below end, in that order (direct::warp_gemm). W is
// Wg packed by direct::pack_tiles (chunks per tile: ceil(H/32)): a warp's load is 512 contiguous
// bytes, where rows of Wg as they are gave it 64 bytes of each of 8 rows. Rows past E, tokens
// past T and k past H read as zeros.
template <int NT>
__device__ __forceinline__ void warp_gemm(const uint4* W, const bf16* X, int T, int H, int chunks, int e0,
                                          int t0, int first, int end, int stride,
                                          float (&acc)[NT][4]) {
  const direct::PackedWeights w{W + size_t(e0 / kTileE) * chunks * 64};
  const auto token_rows = [&](const bf16* (&x)[NT]) {
    const int g = (threadIdx.x % 32) / 4;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const int tok = t0 + n * 8 + g;
      x[n] = tok < T ? X + size_t(tok) * H : nullptr;
    }
  };
  direct::warp_gemm<NT, kBatch>(w, token_rows, H, first, end, stride, acc);
}

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

// Stores a warp's accumulators as tile[expert_in_tile * Stride + token_in_tile].
template <int NT, int Stride = 8 * NT>
__device__ __forceinline__ void store_tile(float* tile, const float (&acc)[NT][4]) {
  const int lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) tile[(g + 8 * (i / 2)) * Stride + n * 8 + 2 * q + i % 2] = acc[n][i];
}

// Element o of the sum of nwarps consecutive tiles, in warp order. Every read is issued before
// the first add: a loop over nwarps compiled to batches of 8, 4 and 1 reads, three shared-memory
// latencies on the serial path after the last weight byte.
__device__ __forceinline__ float sum_tiles(const float* tiles, int tile_size, int nwarps, int o) {
  float v[kMaxWarps];
#pragma unroll
  for (int w = 0; w < kMaxWarps; ++w) v[w] = w < nwarps ? tiles[w * tile_size + o] : 0.0f;
  float s = v[0];
#pragma unroll
  for (int w = 1; w < kMaxWarps; ++w)
    if (w < nwarps) s += v[w];
  return s;
}

// The warps' tiles of a block whose sum is taken token-major (slot[t * 16 + e], the staged and
// tagged kernels): that sum reads a column of the tiles, so their rows are padded to 8 NT + 1
// words, which puts a column's 16 experts in 16 banks (8 NT words put them in 2 or 4).
template <int NT>
struct ColumnTiles {
  static constexpr int kStride = 8 * NT + 1;
  static constexpr int kSize = kTileE * kStride;  // floats per warp
  __device__ static void store(float* tiles, const float (&acc)[NT][4]) {
    store_tile<NT, kStride>(tiles + (threadIdx.x / 32) * kSize, acc);
  }
  // Expert e, token t of the sum over nwarps tiles, in warp order.
  __device__ static float sum(const float* tiles, int nwarps, int e, int t) {
    return sum_tiles(tiles, kSize, nwarps, e * kStride + t);
  }
};

// ---------------------------------------------------------------- fused kernel

struct FusedArgs {
  const uint4* W;  // Wg packed (direct::pack_tiles)
  const bf16* X;
  float* logits;
  int32_t* ids;
  float* weights;
  // fused_cluster: final logits [T][32*P]; fused_slots: one partial per split [splits][T][32*P].
  // The padding past E is zero from prepare on, and is never selected.
  float* ws;
  unsigned* counter;  // blocks finished; wraps back to 0 as the last block takes it
  int T, H, E, k;
  int chunks;  // ceil(H / kChunkK)
};

template <int P>
__device__ __forceinline__ void load_row(const float* src, float (&v)[P]) {
#pragma unroll
  for (int i = 0; i < P; i += 4) {
    // ld.global.cg: written by other blocks during this kernel, so never from L1.
    const float4 f = __ldcg(reinterpret_cast<const float4*>(src + i));
    v[i] = f.x, v[i + 1] = f.y, v[i + 2] = f.z, v[i + 3] = f.w;
  }
}

// Sorts a lane's P keys, largest first, their indices along; among equal keys the lower index
// first. A bitonic network: a compile-time sequence of compare-exchanges, all in registers.
template <int P>
__device__ __forceinline__ void sort_lane(uint32_t (&key)[P], int (&idx)[P]) {
  static_assert((P & (P - 1)) == 0, "P is a power of two");
#pragma unroll
  for (int size = 2; size <= P; size *= 2)
#pragma unroll
    for (int stride = size / 2; stride > 0; stride /= 2)
#pragma unroll
      for (int i = 0; i < P; ++i) {
        const int j = i ^ stride;
        if (j < i) continue;
        // Ranked (i, j) in blocks whose bit `size` is clear, (j, i) in the others: the bitonic
        // merges of the last size, P, leave the whole row ranked.
        const int a = (i & size) ? j : i, b = (i & size) ? i : j;
        const bool swap = key[b] > key[a] || (key[b] == key[a] && idx[b] < idx[a]);
        const uint32_t ka = key[a], kb = key[b];
        const int ia = idx[a], ib = idx[b];
        key[a] = swap ? kb : ka, key[b] = swap ? ka : kb;
        idx[a] = swap ? ib : ia, idx[b] = swap ? ia : ib;
      }
}

// Token t's top k from its logits by one warp, lane l holding experts [lP, lP + P), and the
// renormalised weights. Each lane sorts its keys once; a round is then the warp's max of the
// lanes' first keys, and the winner (the lowest lane among equal maxima: the lowest id) shifts
// its row by one. The rounds are the serial part (each max waits for the previous winner's
// shift), so they are kept free of branches: every lane runs the shift under its `win` predicate.
// At P = 8, k = 8 it takes 2.7 k cycles alone (clock64): the sort 0.4 k, ~140 a round for the max,
// ballot and select, and the weights' exps in rank order the other ~1.1 k; ~1.3 us inside the
// tagged kernel (globaltimer). Rescanning the row for its best key every round, unrolling the
// rounds, merging the lanes' sorted rows by butterfly shuffles, a two-stage top k over groups of
// 32 experts, ranking the candidates above a threshold, calling this rather than inlining it and
// summing the weights' exps by a butterfly after the rounds were all slower in the scorer, the
// last three although faster alone (docs/perf-log.md, rounds 15, 20, 37, 39, 40).
template <int P>
__device__ __forceinline__ void topk_of_row(const FusedArgs& p, int t, const float (&v)[P]) {
  const int lane = threadIdx.x % 32, base = lane * P;
  uint32_t key[P];
  int idx[P];
#pragma unroll
  for (int i = 0; i < P; ++i) key[i] = base + i < p.E ? order_key(v[i]) : 0u, idx[i] = i;
  sort_lane<P>(key, idx);

  float top = 0.0f, vmax = 0.0f, sum = 0.0f;  // lane j keeps the j-th largest logit
  for (int j = 0; j < p.k; ++j) {
    const uint32_t m = __reduce_max_sync(0xffffffffu, key[0]);
    const unsigned holders = __ballot_sync(0xffffffffu, key[0] == m);
    const bool win = lane == __ffs(holders) - 1;
    if (win) p.ids[size_t(t) * p.k + j] = base + idx[0];
#pragma unroll
    for (int i = 0; i + 1 < P; ++i) key[i] = win ? key[i + 1] : key[i], idx[i] = win ? idx[i + 1] : idx[i];
    key[P - 1] = win ? 0u : key[P - 1];
    // probs[id] / sum over the top k of probs: the softmax denominator cancels. Every lane
    // adds the same terms in the same order.
    const float x = key_value(m);
    if (j == 0) vmax = x;
    sum += expf(x - vmax);
    if (lane == j) top = x;
  }
  if (lane < p.k) p.weights[size_t(t) * p.k + lane] = expf(top - vmax) / sum;
}

// Token t's top k, by one warp, in the last block. Lane l owns experts [lP, lP + P).
template <int P, bool kCluster>
__device__ void select_topk(const FusedArgs& p, int t, int splits) {
  constexpr int kEpad = 32 * P;
  const int lane = threadIdx.x % 32, base = lane * P;
  float v[P];
  if constexpr (kCluster) {
    load_row<P>(p.ws + size_t(t) * kEpad + base, v);
  } else {
    // Every split's part of (up to) 8 of the lane's logits is loaded before any is added: one L2
    // round trip, not one per split (a runtime loop over the splits compiled to two).
    constexpr int kQuads = (P < 8 ? P : 8) / 4;
#pragma unroll
    for (int i0 = 0; i0 < P; i0 += 4 * kQuads) {
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
    for (int i = 0; i < P; ++i)
      if (base + i < p.E) p.logits[size_t(t) * p.E + base + i] = v[i];
  }
  topk_of_row<P>(p, t, v);
}

// Grid (splits, ceil(E/16)), one wave; fused_cluster launches it with clusters of (splits, 1, 1).
// blockDim.x / 32 >= T warps. The "1 block per SM" bound matters: without it ptxas saves registers
// by placing each chunk's mma between the loads, so a warp waits a memory latency per chunk
// instead of one per batch.
template <int NT, int P, bool kCluster>
__global__ void __launch_bounds__(kMaxWarps * 32, 1) router_fused_kernel(FusedArgs p) {
  constexpr int kCols = 8 * NT;  // token columns of a tile
  constexpr int kTile = kTileE * kCols;
  constexpr int kEpad = 32 * P;
  __shared__ float warp_tiles[kMaxWarps * kTile];
  __shared__ float block_tile[kTile];
  __shared__ bool last;

  const int split = blockIdx.x, splits = gridDim.x, e0 = blockIdx.y * kTileE;
  const int warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  // This block's chunks of H, as even as whole chunks allow; its warps take every nwarps-th one
  // so that each load step of the block reads one contiguous run of every row.
  const int lo = int(int64_t(split) * p.chunks / splits);
  const int hi = int(int64_t(split + 1) * p.chunks / splits);

  float acc[NT][4] = {};
  warp_gemm<NT>(p.W, p.X, p.T, p.H, p.chunks, e0, 0, lo + warp, hi, nwarps, acc);
  store_tile<NT>(warp_tiles + warp * kTile, acc);
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

  if (arrive_last(p.counter, gridDim.x * gridDim.y, &last) && warp < p.T) select_topk<P, kCluster>(p, warp, splits);

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
  FusedArgs f;  // f.ws: fused_tile_tree's final logits [T][32*P], zero padding; f.counter: the
                // grid's blocks (wide) or tiles (tree) done
  float* slots;             // [m_tiles][splits][kTile]: slot[t * 16 + e - 16m], tokens < T only
  unsigned* tile_counters;  // fused_tile_tree: splits done per tile
};

// Float4 j of a tile's slots, one per split: all loads first (one L2 round trip).
__device__ __forceinline__ void load_splits(float4 (&v)[kMaxSplits], const float* tile_slots, int tile_size,
                                            int splits, int j, bool pred) {
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
template <int NT, int P, bool kTree>
__global__ void __launch_bounds__(kMaxWarps * 32, 1) router_staged_kernel(StagedArgs sa) {
  using Tiles = ColumnTiles<NT>;
  constexpr int kCols = 8 * NT;
  constexpr int kTile = kTileE * kCols;  // a slot
  constexpr int kEpad = 32 * P;
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

  float acc[NT][4] = {};
  warp_gemm<NT>(p.W, p.X, p.T, p.H, p.chunks, m * kTileE, 0, lo + warp, hi, nwarps, acc);
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
    if (warp < p.T) select_topk<P, true>(p, warp, splits);
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
        load_splits(v[h], sa.slots + size_t(jm / groups_per_tile) * splits * kTile, kTile, splits,
                    jm % groups_per_tile, j < groups);
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
      const int base = (threadIdx.x % 32) * P;
      float v[P];
#pragma unroll
      for (int i = 0; i < P; ++i) v[i] = smem[warp * kEpad + base + i];  // unwritten past E: never selected
      topk_of_row<P>(p, warp, v);
    }
  }
}

// ---------------------------------------------------------------- tagged kernel
//
// fused_tagged: the fused kernel's GEMM and sums in the same order (the same logits as
// fused_slots), with no election after the last byte of Wg. Every slot value travels with a tag,
// the call's number, in one 64-bit store, so a reader knows a value is this call's without a
// fence or a counter after it: it reads every split's slot of its token at once and re-reads
// only a word that still holds the previous call's tag. Both the tag and the readers are settled
// when a block starts, by two accesses issued before its weight loads (their round trips overlap
// the GEMM):
//   - the tag is one more than the tag of the block's own first slot word: every block stored
//     the same tag there in the previous call (0 from prepare on), so all agree without a
//     shared counter;
//   - an arrival counter (atom.inc, which wraps back to 0 with the last arrival, so every call
//     and graph replay starts clean) ranks the blocks; the last T to arrive each read one token's
//     slots and take its top k.
// So:
//   - the serial tail after the GEMM is one L2 round trip (the slot read) and the top k, where
//     fused_slots pays a release fence, an atomic and an acquire fence before its read;
//   - the T tokens are read and ranked on T SMs at once (splits x E values each), where
//     fused_slots' last block reads splits x T x E on one SM (128 KB at dsv3 T=16).
// A reader waits for every block's slots, so the blocks after it in arrival order (the other
// readers, fewer than T) must be able to start while it waits: T + 1 resident blocks suffice,
// and the plan's grid is one wave of one block per SM. Every other block stores and exits.

struct TaggedArgs {
  FusedArgs f;      // f.ws is not used; f.counter ranks the blocks' arrivals
  uint64_t* slots;  // [T][splits][32*P] words: value bits | tag << 32
};

__device__ __forceinline__ void store_tagged(uint64_t* p, float v, uint32_t tag) {
  const uint64_t w = uint64_t(__float_as_uint(v)) | uint64_t(tag) << 32;
  asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(w) : "memory");
}

// A word another block stores during this kernel: a 64-bit access is single-copy atomic, so value
// and tag come from the same store. Where !pred, a word that holds `tag` and the value 0.
__device__ __forceinline__ uint64_t load_tagged(const uint64_t* p, bool pred, uint32_t tag) {
  uint64_t w;
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  setp.ne.b32 p, %2, 0;\n"
      "  mov.b64 %0, %3;\n"
      "  @p ld.relaxed.gpu.global.u64 %0, [%1];\n"
      "}\n"
      : "=&l"(w)
      : "l"(p), "r"(int(pred)), "l"(uint64_t(tag) << 32)
      : "memory");
  return w;
}

// The same word again where pred (a stale one), left as it is elsewhere.
__device__ __forceinline__ void reload_tagged(uint64_t& w, const uint64_t* p, bool pred) {
  asm volatile(
      "{\n"
      "  .reg .pred p;\n"
      "  setp.ne.b32 p, %2, 0;\n"
      "  @p ld.relaxed.gpu.global.u64 %0, [%1];\n"
      "}\n"
      : "+l"(w)
      : "l"(p), "r"(int(pred))
      : "memory");
}

// Grid (splits, ceil(E/16)) as the fused kernel's, one wave or not.
template <int NT, int P>
__global__ void __launch_bounds__(kMaxWarps * 32, 1) router_tagged_kernel(TaggedArgs ta) {
  using Tiles = ColumnTiles<NT>;
  constexpr int kEpad = 32 * P;
  __shared__ float warp_tiles[kMaxWarps * Tiles::kSize];
  __shared__ float row[kEpad];
  __shared__ unsigned arrival;
  __shared__ uint32_t tag_shared;
  const FusedArgs& p = ta.f;

  const int split = blockIdx.x, splits = gridDim.x, e0 = blockIdx.y * kTileE;
  const unsigned blocks = gridDim.x * gridDim.y;
  // Before the weight loads (volatile asm keeps its place), used only after the GEMM.
  uint64_t own = 0;
  unsigned order = 0;
  if (threadIdx.x == 0) {
    const uint64_t* own_word = ta.slots + size_t(split) * kEpad + e0;  // token 0's word of this block
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(own) : "l"(own_word) : "memory");
    asm volatile("atom.relaxed.gpu.global.inc.u32 %0, [%1], %2;"
                 : "=r"(order)
                 : "l"(p.counter), "r"(blocks - 1)
                 : "memory");
  }

  const int warp = threadIdx.x / 32, nwarps = blockDim.x / 32;
  const int lo = int(int64_t(split) * p.chunks / splits);
  const int hi = int(int64_t(split + 1) * p.chunks / splits);
  float acc[NT][4] = {};
  warp_gemm<NT>(p.W, p.X, p.T, p.H, p.chunks, e0, 0, lo + warp, hi, nwarps, acc);
  Tiles::store(warp_tiles, acc);
  if (threadIdx.x == 0) arrival = order, tag_shared = uint32_t(own >> 32) + 1;
  __syncthreads();

  const uint32_t tag = tag_shared;
  const int reader = int(blocks - 1 - arrival);  // 0 for the last block to arrive
  // Token-major, as the readers take them: [t][split][expert].
  for (int o = threadIdx.x; o < kTileE * p.T; o += blockDim.x) {
    const int t = o / kTileE, e = e0 + o % kTileE;
    store_tagged(ta.slots + (size_t(t) * splits + split) * kEpad + e, Tiles::sum(warp_tiles, nwarps, o % kTileE, t),
                 tag);
  }

  // Reader r takes tokens r, r + blocks, ... (more than one only when the grid has fewer blocks
  // than there are tokens).
  const int e_end = int(gridDim.y) * kTileE;  // slots past it are never written
  for (int t = reader; t < p.T; t += int(blocks)) {
    const uint64_t* src = ta.slots + size_t(t) * splits * kEpad;
    for (int e = threadIdx.x; e < e_end; e += blockDim.x) {
      uint64_t w[kMaxSplits];
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s) w[s] = load_tagged(src + s * kEpad + e, s < splits, tag);
      // Every stale word is re-read in the same round: one round trip per round, however many
      // splits are late (re-reading them one at a time cost a round trip each).
      for (;;) {
        bool stale[kMaxSplits], any = false;
#pragma unroll
        for (int s = 0; s < kMaxSplits; ++s) stale[s] = uint32_t(w[s] >> 32) != tag, any |= stale[s];
        if (!any) break;
#pragma unroll
        for (int s = 0; s < kMaxSplits; ++s) reload_tagged(w[s], src + s * kEpad + e, stale[s]);
      }
      float v = 0.0f;  // split order, from 0.0f: fused_slots' sum
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s)
        if (s < splits) v += __uint_as_float(uint32_t(w[s]));
      row[e] = v;
      if (e < p.E) p.logits[size_t(t) * p.E + e] = v;
    }
    __syncthreads();
    if (warp == 0) {
      const int base = (threadIdx.x % 32) * P;
      float v[P];
#pragma unroll
      for (int i = 0; i < P; ++i) v[i] = base + i < e_end ? row[base + i] : 0.0f;  // past E: never selected
      topk_of_row<P>(p, t, v);
    }
    __syncthreads();  // row is read before the next token overwrites it
  }
}

// ---------------------------------------------------------------- gemm_then_topk kernels

// Logits of one 16-expert x 16-token tile over all of H. Grid (ceil(T/16), ceil(E/16)). Launch
// bounds as for the fused kernel, so that a batch's loads all issue before its mma.
__global__ void __launch_bounds__(kLogitsWarps * 32, 1)
    router_logits_kernel(const uint4* W, const bf16* X, float* logits, int T, int H, int E, int chunks) {
  constexpr int kTile = kTileE * 16;
  __shared__ float warp_tiles[kLogitsWarps * kTile];
  const int t0 = blockIdx.x * 16, e0 = blockIdx.y * kTileE, warp = threadIdx.x / 32;
  float acc[2][4] = {};
  warp_gemm<2>(W, X, T, H, chunks, e0, t0, warp, chunks, kLogitsWarps, acc);
  store_tile<2>(warp_tiles + warp * kTile, acc);
  __syncthreads();
  for (int o = threadIdx.x; o < kTile; o += blockDim.x) {
    const int e = e0 + o / 16, t = t0 + o % 16;
    if (e < E && t < T) logits[size_t(t) * E + e] = sum_tiles(warp_tiles, kTile, kLogitsWarps, o);
  }
}

// Top k of one token per block: k rounds of a block-wide argmax over the token's keys in shared
// memory (E of them, dynamic). Ties go to the lowest index at every level.
__global__ void __launch_bounds__(kTopkThreads)
    router_topk_kernel(const float* logits, int32_t* ids, float* weights, int E, int k) {
  extern __shared__ uint32_t keys[];
  __shared__ uint32_t warp_best[kTopkThreads / 32];
  __shared__ int warp_at[kTopkThreads / 32];
  const int t = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const float* row = logits + size_t(t) * E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) keys[e] = order_key(row[e]);
  __syncthreads();

  int32_t* out_ids = ids + size_t(t) * k;
  float* out_w = weights + size_t(t) * k;
  for (int j = 0; j < k; ++j) {
    uint32_t best = 0;
    int at = 0;
    for (int e = threadIdx.x; e < E; e += blockDim.x)
      if (keys[e] > best) best = keys[e], at = e;
    const uint32_t m = __reduce_max_sync(0xffffffffu, best);
    const uint32_t first = __reduce_min_sync(0xffffffffu, best == m ? uint32_t(at) : 0xffffffffu);
    if (lane == 0) warp_best[warp] = m, warp_at[warp] = int(first);
    __syncthreads();
    if (threadIdx.x == 0) {
      uint32_t bm = warp_best[0];
      int ba = warp_at[0];
      for (int w = 1; w < kTopkThreads / 32; ++w)
        if (warp_best[w] > bm || (warp_best[w] == bm && warp_at[w] < ba)) bm = warp_best[w], ba = warp_at[w];
      out_ids[j] = ba;
      out_w[j] = key_value(bm);  // the logit for now; made a weight below
      keys[ba] = 0u;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    const float vmax = out_w[0];
    float sum = 0.0f;
    for (int j = 0; j < k; ++j) sum += expf(out_w[j] - vmax);
    for (int j = 0; j < k; ++j) out_w[j] = expf(out_w[j] - vmax) / sum;
  }
}

// ---------------------------------------------------------------- host side

bool fused_fits(const RouterDims& d) {
  return d.T <= kFusedMaxT && d.E <= kFusedMaxE && d.k <= kFusedMaxK;
}

// The fused kernel's shape model. One wave of blocks: each 16-expert tile is split over H as many
// ways as the SMs allow (at most a portable cluster, at most one split per chunk), so that every
// SM streams about E*H*2 / SMs bytes, all requested at once. Warps: enough that each has at most
// kPlanChunks chunks (one batch, few registers, a short mma chain), at least one per token for
// the top-k, and at most kMaxWarps; past that a warp loops over batches.
struct FusedPlan {
  int m_tiles, chunks, splits, warps, P, NT;
};

FusedPlan plan_fused(const RouterDims& d, int sm_count) {
  FusedPlan pl;
  pl.m_tiles = ceil_div(d.E, kTileE);
  pl.chunks = ceil_div(d.H, kChunkK);
  pl.splits = std::min(std::clamp(sm_count / pl.m_tiles, 1, kMaxSplits), pl.chunks);
  const int chunks_per_split = ceil_div(pl.chunks, pl.splits);
  pl.warps = std::clamp(std::max(d.T, ceil_div(chunks_per_split, kPlanChunks)), 4, kMaxWarps);
  pl.P = d.E <= 128 ? 4 : d.E <= 256 ? 8 : 16;
  pl.NT = d.T <= 8 ? 1 : 2;
  return pl;
}

using FusedKernel = void (*)(FusedArgs);

// A call's arguments: the router's, with this call's inputs and outputs.
FusedArgs with_io(FusedArgs a, const RouterIO& io) {
  a.X = io.X;
  a.logits = io.logits;
  a.ids = io.topk_ids;
  a.weights = io.topk_weights;
  return a;
}

template <int NT, bool kCluster>
FusedKernel fused_kernel_for_p(int P) {
  return P == 4 ? router_fused_kernel<NT, 4, kCluster>
       : P == 8 ? router_fused_kernel<NT, 8, kCluster>
                : router_fused_kernel<NT, 16, kCluster>;
}

template <bool kCluster>
FusedKernel fused_kernel(const FusedPlan& pl) {
  return pl.NT == 1 ? fused_kernel_for_p<1, kCluster>(pl.P) : fused_kernel_for_p<2, kCluster>(pl.P);
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
    args_ = FusedArgs{packed_.as<uint4>(), nullptr, nullptr, nullptr, nullptr, ws_.as<float>(),
                      counter_.as<unsigned>(), d.T, d.H, d.E, d.k, pl.chunks};
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
    return size_t(cluster ? 1 : pl.splits) * d.T * 32 * pl.P;
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

template <int NT, bool kTree>
StagedKernel staged_kernel_for_p(int P) {
  return P == 4 ? router_staged_kernel<NT, 4, kTree>
       : P == 8 ? router_staged_kernel<NT, 8, kTree>
                : router_staged_kernel<NT, 16, kTree>;
}

template <bool kTree>
StagedKernel staged_kernel(const FusedPlan& pl) {
  return pl.NT == 1 ? staged_kernel_for_p<1, kTree>(pl.P) : staged_kernel_for_p<2, kTree>(pl.P);
}

// A router whose kernel takes Args (a FusedArgs f and its own workspace) on the fused plan's
// grid, without clusters: the staged and tagged routers. The derived constructor fills args_.
template <class Args>
class PlainGridRouter : public Router {
 public:
  void run(const RouterIO& io, cudaStream_t stream) override {
    Args a = args_;
    a.f = with_io(a.f, io);
    kernel_<<<dim3(plan_.splits, plan_.m_tiles), plan_.warps * 32, 0, stream>>>(a);
    check_cuda(cudaGetLastError(), name_);
  }

 protected:
  PlainGridRouter(const RouterDims& d, const RouterWeights& w, const FusedPlan& pl, void (*kernel)(Args),
                  const char* name)
      : packed_(direct::pack_tiles(w.Wg, d.E, d.H)), plan_(pl), kernel_(kernel), name_(name) {}

  DeviceMemory packed_;  // Wg, direct::pack_tiles
  FusedPlan plan_;
  void (*kernel_)(Args);
  const char* name_;  // of the launch, for its error
  Args args_;
};

// fused_slots_wide (tree = false) and fused_tile_tree (tree = true).
class StagedRouter final : public PlainGridRouter<StagedArgs> {
 public:
  StagedRouter(const RouterDims& d, const RouterWeights& w, const FusedPlan& pl, bool tree)
      : PlainGridRouter(d, w, pl, tree ? staged_kernel<true>(pl) : staged_kernel<false>(pl),
                        "router_staged_kernel launch"),
        counters_((1 + size_t(pl.m_tiles)) * sizeof(unsigned)),
        slots_(size_t(pl.m_tiles) * pl.splits * kTileE * 8 * pl.NT * sizeof(float)),
        final_(size_t(d.T) * 32 * pl.P * sizeof(float)) {
    check_cuda(cudaMemset(counters_.as<void>(), 0, (1 + size_t(pl.m_tiles)) * sizeof(unsigned)), "cudaMemset");
    // Every block writes its whole slot before any block reads it; the final logits' padding
    // past E must read as zeros.
    check_cuda(cudaMemset(final_.as<void>(), 0, size_t(d.T) * 32 * pl.P * sizeof(float)), "cudaMemset");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    args_.f = FusedArgs{packed_.as<uint4>(), nullptr, nullptr, nullptr, nullptr, final_.as<float>(),
                        counters_.as<unsigned>(), d.T, d.H, d.E, d.k, pl.chunks};
    args_.slots = slots_.as<float>();
    args_.tile_counters = counters_.as<unsigned>() + 1;
  }

 private:
  DeviceMemory counters_;  // [0]: the grid's election; [1 + m]: tile m's (fused_tile_tree)
  DeviceMemory slots_;
  DeviceMemory final_;  // fused_tile_tree's final logits (tiny; allocated for both)
};

using TaggedKernel = void (*)(TaggedArgs);

template <int NT>
TaggedKernel tagged_kernel_for_p(int P) {
  return P == 4 ? router_tagged_kernel<NT, 4> : P == 8 ? router_tagged_kernel<NT, 8> : router_tagged_kernel<NT, 16>;
}

class TaggedRouter final : public PlainGridRouter<TaggedArgs> {
 public:
  TaggedRouter(const RouterDims& d, const RouterWeights& w, const FusedPlan& pl)
      : PlainGridRouter(d, w, pl, pl.NT == 1 ? tagged_kernel_for_p<1>(pl.P) : tagged_kernel_for_p<2>(pl.P),
                        "router_tagged_kernel launch"),
        counter_(sizeof(unsigned)),
        slots_(slot_words(d, pl) * sizeof(uint64_t)) {
    // Tag 0 in every slot: the first call's tag is 1.
    check_cuda(cudaMemset(counter_.as<void>(), 0, sizeof(unsigned)), "cudaMemset");
    check_cuda(cudaMemset(slots_.as<void>(), 0, slot_words(d, pl) * sizeof(uint64_t)), "cudaMemset");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    args_.f = FusedArgs{packed_.as<uint4>(), nullptr, nullptr, nullptr, nullptr, nullptr,
                        counter_.as<unsigned>(), d.T, d.H, d.E, d.k, pl.chunks};
    args_.slots = slots_.as<uint64_t>();
  }

 private:
  static size_t slot_words(const RouterDims& d, const FusedPlan& pl) { return size_t(d.T) * pl.splits * 32 * pl.P; }

  DeviceMemory counter_;
  DeviceMemory slots_;
};

class GemmThenTopkRouter final : public Router {
 public:
  GemmThenTopkRouter(const RouterDims& d, const RouterWeights& w) : d_(d), packed_(direct::pack_tiles(w.Wg, d.E, d.H)) {
    const size_t smem = size_t(d.E) * sizeof(uint32_t);
    int dev = 0, optin = 0;
    check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
    check_cuda(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
               "cudaDeviceGetAttribute");
    cudaFuncAttributes fa;
    check_cuda(cudaFuncGetAttributes(&fa, router_topk_kernel), "cudaFuncGetAttributes");
    const size_t smem_max = size_t(optin) - fa.sharedSizeBytes;
    if (smem > smem_max)
      throw std::invalid_argument("router gemm_then_topk: E=" + std::to_string(d.E) +
                                  " does not fit in shared memory");
    // The attribute belongs to the kernel, not to this object: set the device's limit, so that
    // routers of any E can run in any order.
    check_cuda(cudaFuncSetAttribute(router_topk_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(smem_max)),
               "cudaFuncSetAttribute");
  }

  void run(const RouterIO& io, cudaStream_t stream) override {
    const dim3 grid(ceil_div(d_.T, 16), ceil_div(d_.E, kTileE));
    router_logits_kernel<<<grid, kLogitsWarps * 32, 0, stream>>>(packed_.as<uint4>(), io.X, io.logits, d_.T, d_.H, d_.E,
                                                                 ceil_div(d_.H, kChunkK));
    check_cuda(cudaGetLastError(), "router_logits_kernel launch");
    router_topk_kernel<<<d_.T, kTopkThreads, size_t(d_.E) * sizeof(uint32_t), stream>>>(
        io.logits, io.topk_ids, io.topk_weights, d_.E, d_.k);
    check_cuda(cudaGetLastError(), "router_topk_kernel launch");
  }

 private:
  RouterDims d_;
  DeviceMemory packed_;  // Wg, direct::pack_tiles
};

void validate(const RouterDims& d) {
  if (d.T < 1 || d.H < 8 || d.H % 8 != 0 || d.E < 1 || d.k < 1 || d.k > d.E)
    throw std::invalid_argument("router: invalid dims T=" + std::to_string(d.T) + " H=" + std::to_string(d.H) +
                                " E=" + std::to_string(d.E) + " k=" + std::to_string(d.k));
  if (d.E > 65535 * kTileE) throw std::invalid_argument("router: E past the grid limit");
}

void require_fused_fits(const RouterDims& d, const std::string& variant) {
  if (!fused_fits(d))
    throw std::invalid_argument("router " + variant + ": needs T <= " + std::to_string(kFusedMaxT) +
                                ", E <= " + std::to_string(kFusedMaxE) + ", k <= " + std::to_string(kFusedMaxK));
}

// A one-launch router R(dims, weights, plan, extra...), where the shape fits.
template <class R, class... Extra>
std::unique_ptr<R> make_planned(const RouterDims& d, const RouterWeights& w, const std::string& variant,
                                Extra... extra) {
  require_fused_fits(d, variant);
  return std::make_unique<R>(d, w, plan_fused(d, device_sm_count()), extra...);
}

}  // namespace

namespace detail {
std::vector<std::string> router_variants() {
  return {"default",         "fused_cluster",   "fused_slots",   "fused_slots_wide",
          "fused_tile_tree", "fused_tagged",    "gemm_then_topk"};
}
}  // namespace detail

std::unique_ptr<Router> make_router(const RouterDims& dims, const RouterWeights& w,
                                    const std::string& variant) {
  validate(dims);
  if (variant == "default") {
    // One launch whenever the shape fits, with the tagged slots. Measured on the H200 (cold L2,
    // median, docs/perf-log.md round 15), fused_tagged against fused_slots: dsv3 (H=7168,
    // E=256) T=1/8/16 8.4-8.5/8.9/8.8 against 8.6-8.7/9.8/11.6 us, qwen3 (H=2048, E=128) T=8/16
    // 6.7-6.9/7.0-7.1 against 7.2-7.3/8.0-8.1 us: no election after the GEMM, and a reader per
    // token. (fused_slots had beaten fused_cluster on every shape: the cluster barrier and the
    // scheduling of 8-block clusters cost more than the slots' longer read.)
    if (!fused_fits(dims)) return std::make_unique<GemmThenTopkRouter>(dims, w);
    return make_planned<TaggedRouter>(dims, w, variant);
  }
  if (variant == "fused_cluster") {
    auto r = make_planned<FusedRouter>(dims, w, variant, true);
    if (r->max_active_clusters() < 1)
      throw std::runtime_error("router fused_cluster: the device cannot launch the cluster");
    return r;
  }
  if (variant == "fused_slots") return make_planned<FusedRouter>(dims, w, variant, false);
  if (variant == "fused_slots_wide") return make_planned<StagedRouter>(dims, w, variant, false);
  if (variant == "fused_tile_tree") return make_planned<StagedRouter>(dims, w, variant, true);
  if (variant == "fused_tagged") return make_planned<TaggedRouter>(dims, w, variant);
  if (variant == "gemm_then_topk") return std::make_unique<GemmThenTopkRouter>(dims, w);
  throw std::invalid_argument("router: unknown variant '" + variant + "'");
}

}  // namespace submission
