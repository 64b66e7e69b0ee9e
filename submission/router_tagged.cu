// The router's default where the shape fits one launch (router_plan.h: fused_fits): GEMM,
// softmax and top k in one kernel whose blocks hand their partial logits over through tagged
// slots, with no fence or election after the GEMM (docs/perf-log-router.md, round 15: 2-25%
// faster than the election of fused_slots, dev/router.cu).
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "submission/router_gemm.cuh"
#include "submission/router_plan.h"
#include "submission/router_topk.cuh"

namespace submission::router {
namespace {

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
  uint64_t* slots;  // [T][splits][32*LaneKeys] words: value bits | tag << 32
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
template <int TokenTiles,  // n8 token tiles per block: 1 (T <= 8) or 2
          int LaneKeys>    // experts per lane of a top-k warp: 4, 8 or 16 (E <= 32 LaneKeys)
__global__ void __launch_bounds__(kMaxWarps * 32, 1) router_tagged_kernel(TaggedArgs ta) {
  using Tiles = ColumnTiles<TokenTiles>;
  constexpr int kEpad = 32 * LaneKeys;
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
  float acc[TokenTiles][4] = {};
  warp_gemm<TokenTiles>(p.W, p.X, p.T, p.H, p.chunks, e0, 0, lo + warp, hi, nwarps, acc);
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
      const int base = (threadIdx.x % 32) * LaneKeys;
      float v[LaneKeys];
#pragma unroll
      for (int i = 0; i < LaneKeys; ++i) v[i] = base + i < e_end ? row[base + i] : 0.0f;  // past E: never selected
      topk_of_row<LaneKeys>(p, t, v);
    }
    __syncthreads();  // row is read before the next token overwrites it
  }
}

using TaggedKernel = void (*)(TaggedArgs);

template <int TokenTiles>  // n8 token tiles per block
TaggedKernel tagged_kernel_for(int lane_keys) {
  return lane_keys == 4   ? router_tagged_kernel<TokenTiles, 4>
         : lane_keys == 8 ? router_tagged_kernel<TokenTiles, 8>
                          : router_tagged_kernel<TokenTiles, 16>;
}

class TaggedRouter final : public PlainGridRouter<TaggedArgs> {
 public:
  TaggedRouter(const RouterDims& d, const RouterWeights& w, const FusedPlan& pl)
      : PlainGridRouter(d, w, pl,
                        pl.token_tiles == 1 ? tagged_kernel_for<1>(pl.lane_keys) : tagged_kernel_for<2>(pl.lane_keys),
                        "router_tagged_kernel launch"),
        counter_(sizeof(unsigned)),
        slots_(slot_words(d, pl) * sizeof(uint64_t)) {
    // Tag 0 in every slot: the first call's tag is 1.
    check_cuda(cudaMemset(counter_.as<void>(), 0, sizeof(unsigned)), "cudaMemset");
    check_cuda(cudaMemset(slots_.as<void>(), 0, slot_words(d, pl) * sizeof(uint64_t)), "cudaMemset");
    check_cuda(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    args_.f = FusedArgs{packed_.as<uint4>(),     nullptr, nullptr, nullptr, nullptr, nullptr,
                        counter_.as<unsigned>(), d.T,     d.H,     d.E,     d.k,     pl.chunks};
    args_.slots = slots_.as<uint64_t>();
  }

 private:
  static size_t slot_words(const RouterDims& d, const FusedPlan& pl) {
    return size_t(d.T) * pl.splits * 32 * pl.lane_keys;
  }

  DeviceMemory counter_;
  DeviceMemory slots_;
};

}  // namespace

std::unique_ptr<Router> make_tagged_router(const RouterDims& d, const RouterWeights& w, const FusedPlan& pl) {
  return std::make_unique<TaggedRouter>(d, w, pl);
}

}  // namespace submission::router
