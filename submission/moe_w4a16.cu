// moe_w4a16: fused MoE with int4 weights and bf16 activations under expert
// parallelism (semantics: submission.h). At most three launches per call, each
// with a reason to exist:
//   1. alignment (one CTA, or one warp for up to 32 routes): routes to this
//      rank's experts, grouped by expert into padded blocks. It must finish
//      before any weight is read: which weights to read is the routing. At
//      most 32 routes, the default has each GEMM CTA align them itself
//      (cta_align: one warp's shuffles on a few ids), and this launch goes.
//   2. GEMM 1 + SiLU-and-mul -> h. Every h row needs the full reduction over H.
//   3. GEMM 2 + weighted combine -> out. Every output needs all of h.
// The tensor-core variants chain 2 and 3 with programmatic dependent launch,
// so each grid is resident and waiting when its predecessor finishes; where
// GEMM 1 runs a wave of units or more, the default's GEMM 2 does not wait
// for GEMM 1's grid but for the GEMM 1 units each of its units reads (h_ready,
// moe_gemm_epilogue.cuh). The default GEMMs are the warp-specialised kernels of
// moe_mma_ws.cuh.
// Variants: default, and gemv (the CUDA-core fallback); dev/moe_w4a16.cu holds
// the others, plans of dev/moe_plans.cpp on kernels dev/ instantiates.
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "submission/cuda_check.h"
#include "submission/device_memory.h"
#include "submission/moe_align.cuh"
#include "submission/moe_gemm_stage.cuh"
#include "submission/moe_gemv.cuh"
#include "submission/moe_op.h"
#include "submission/moe_plan.h"
#include "submission/variants.h"

namespace submission::moe {
namespace {

// ------------------------------------------------------------ repack (prepare)
// One thread per destination word of the layout in moe_plan.h, placed by
// tile_group_words with packs of `pack` tiles: apart (codes_out, scales_out)
// or stage-packed (both into codes_out; scales_out unused). Sources: codes
// [E][rows][K/2], scales [E][rows][K/128]. `w13` selects the gate/up row
// interleave.
__global__ void moe_repack_kernel(const uint8_t* __restrict__ codes, const uint16_t* __restrict__ scales,
                                  uint32_t* codes_out, uint32_t* scales_out, int E, int tiles, int K, int I, bool w13,
                                  int pack, bool stage_packed) {
  const int groups = K / kGroup, rows = tiles * kTileRows;
  const size_t tile_groups = size_t(E) * tiles * groups;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < tile_groups * kTileGroupWords;
       i += size_t(gridDim.x) * blockDim.x) {
    const size_t tg = i / kTileGroupWords;  // (e, tile, group), group fastest
    const int q = int(i % kTileGroupWords), lane = q / 8, w = q % 8;
    const int group = int(tg % groups), tile = int(tg / groups % tiles), e = int(tg / groups / tiles);
    const TileGroupWords dst = tile_group_words(size_t(e) * tiles + tile, group, groups, pack, stage_packed);
    codes_out[dst.codes + tile_word_index(lane, w)] =
        repacked_code_word(codes + size_t(e) * rows * (K / 2), K, I, w13, tile, group, lane, w);
    if (q < kTileGroupScaleWords)
      (stage_packed ? codes_out : scales_out)[dst.scales + q] =
          repacked_scale_word(scales + size_t(e) * rows * groups, K, I, w13, tile, group, q);
  }
}

// Persistent grid: every CTA that fits at once, but no more than the units
// the largest routing can make.
int persistent_grid(const void* fn, int threads, int smem, int sms, long long max_units) {
  int per_sm = 0;
  SUBMISSION_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, threads, smem));
  if (per_sm < 1) throw std::runtime_error("moe_w4a16: kernel does not fit on an SM");
  return int(std::max(1LL, std::min<long long>(max_units, (long long)per_sm * sms)));
}

class MoeW4A16 final : public Moe {
 public:
  MoeW4A16(const MoeDims& d, const MoeWeights& w, const MoePlan& plan, int sms, PickKernel pick)
      : d_(d), w_(w), plan_(plan) {
    const size_t routes = size_t(d.M) * d.k;
    const size_t align_ints = size_t(aligned_routes_ints(d.M, plan.block_tokens, plan.max_blocks));
    align_ws_ = DeviceMemory(align_ints * sizeof(int));
    // Zeros are a valid empty routing: no read of the workspace can ever see
    // an out-of-range block, expert or route, even before the first run.
    SUBMISSION_CUDA(cudaMemset(align_ws_.as<int>(), 0, align_ints * sizeof(int)));
    routes_ = aligned_routes_at(align_ws_.as<int>(), plan.block_tokens, plan.max_blocks);
    h_ = DeviceMemory(routes * d.I * sizeof(bf16));
    align_smem_ = int(align_smem_bytes(d.E_local, d.M * d.k));
    SUBMISSION_CUDA(cudaFuncSetAttribute(moe_align_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, align_smem_));

    if (plan.kernel == MoeKernel::gemv)
      gemv_grid_ = sms * 8;
    else
      prepare_mma(sms, pick);
    SUBMISSION_CUDA(cudaDeviceSynchronize());  // repacking done before the first run
  }

  void run(const MoeIO& io, cudaStream_t stream) override {
    if (!plan_.cta_align) {  // else each GEMM CTA aligns the routes itself
      if (d_.M * d_.k <= kAlignWarpRoutes)
        moe_align_warp_kernel<<<1, 32, 0, stream>>>(io.topk_ids, d_.M, d_.k, d_.E_local, d_.ep_rank, plan_.block_tokens,
                                                    plan_.max_blocks, routes_);
      else
        moe_align_kernel<<<1, kAlignThreads, align_smem_, stream>>>(io.topk_ids, d_.M, d_.k, d_.E_local, d_.ep_rank,
                                                                    plan_.block_tokens, plan_.max_blocks, routes_);
      SUBMISSION_CUDA(cudaGetLastError());
    }
    if (plan_.kernel == MoeKernel::gemv) {
      const GemvArgs a{w_.W13,
                       reinterpret_cast<const uint16_t*>(w_.S13),
                       w_.W2,
                       reinterpret_cast<const uint16_t*>(w_.S2),
                       io.X,
                       io.topk_ids,
                       io.topk_weights,
                       routes_,
                       plan_.block_tokens,
                       h_.as<bf16>(),
                       io.out,
                       d_.M,
                       d_.H,
                       d_.I,
                       d_.k,
                       d_.ep_rank,
                       d_.E_local};
      moe_gemv_up_kernel<<<gemv_grid_, kGemvThreads, 0, stream>>>(a);
      SUBMISSION_CUDA(cudaGetLastError());
      moe_gemv_down_kernel<<<gemv_grid_, kGemvThreads, 0, stream>>>(a);
      SUBMISSION_CUDA(cudaGetLastError());
      return;
    }
    MmaGemmArgs up{w13_.as<uint4>(),
                   (up_.stage_packed ? w13_ : s13_).as<uint4>(),
                   2 * d_.I / kTileRows,
                   d_.H / kGroup,
                   1,
                   io.X,
                   routes_,
                   h_.as<bf16>(),
                   partial_.as<float>(),
                   counters_.as<int>(),
                   plan_.deferred_combine ? 1 : 0,
                   grid_arrivals_.as<unsigned long long>(),
                   plan_.stream_k_up ? 1 : 0,
                   sk_partial_.as<float4>(),
                   sk_counters_.as<int>(),
                   io.out,
                   io.topk_ids,
                   io.topk_weights,
                   d_.M,
                   d_.H,
                   d_.I,
                   d_.k,
                   d_.ep_rank,
                   d_.E_local,
                   plan_.cta_align ? 1 : 0,
                   plan_.max_blocks};
    up.chunk_stages = plan_.queue_chunk_stages;
    up.queue = queue_.as<int>();
    up.chunk_partial = chunk_partial_.as<float4>();
    up.chunk_counters = chunk_counters_.as<int>();
    up.h_ready = plan_.h_flags ? h_ready_.as<unsigned>() : nullptr;
    up.tickets = tickets_.as<unsigned>();
    up.h_row_groups = 2 * d_.I / up_.tile_rows;
    up.rotate = plan_.rotate_up ? 1 : 0;
    // GEMM 1's schedule fields (stream_k, rotate) are left as up's: GEMM 2's
    // kernels never read them (cta_stages, load_unit).
    MmaGemmArgs down = up;
    down.weights = w2_.as<uint4>();
    down.scales = (down_.stage_packed ? w2_ : s2_).as<uint4>();
    down.tiles = d_.H / kTileRows;
    down.groups = d_.I / kGroup;
    down.splits = plan_.splits_down;
    down.act = h_.as<bf16>();
    down.queue = queue_down_.as<int>();
    // GEMM 1 is chained to the alignment launch; without one it is the op's
    // first launch and waits for the caller's work as any launch does.
    launch(up_, up_grid_, up, !plan_.cta_align, stream);
    launch(down_, down_grid_, down, true, stream);
  }

 private:
  // One GEMM's weights, tiles 16-row tiles per expert over a reduction of K,
  // repacked into the layout its kernel reads (tile_group_words; stage-packed
  // leaves `scales` empty), in packs of the kernel's units where the plan
  // says so, else of 1.
  void repack(const MmaKernel& k, const uint8_t* codes, const void* scales, int tiles, int K, bool w13, int sms,
              DeviceMemory& codes_out, DeviceMemory& scales_out) {
    const size_t tile_groups = size_t(d_.E_local) * tiles * (K / kGroup);
    const size_t scale_bytes = tile_groups * kTileGroupScaleWords * 4;
    codes_out = DeviceMemory(tile_groups * kTileGroupBytes + (k.stage_packed ? scale_bytes : 0));
    scales_out = k.stage_packed ? DeviceMemory() : DeviceMemory(scale_bytes);
    const int pack = plan_.unit_contiguous ? k.tile_rows / kTileRows : 1;
    moe_repack_kernel<<<sms * 16, 256>>>(codes, static_cast<const uint16_t*>(scales), codes_out.as<uint32_t>(),
                                         scales_out.as<uint32_t>(), d_.E_local, tiles, K, d_.I, w13, pack,
                                         k.stage_packed);
    SUBMISSION_CUDA(cudaGetLastError());
  }

  void prepare_mma(int sms, PickKernel pick) {
    const int H = d_.H, I = d_.I;
    up_ = pick(plan_, false);
    down_ = pick(plan_, true);
    if (!up_.fn || !down_.fn) throw std::invalid_argument("moe_w4a16: no kernel for this plan");
    repack(up_, w_.W13, w_.S13, 2 * I / kTileRows, H, true, sms, w13_, s13_);
    repack(down_, w_.W2, w_.S2, H / kTileRows, I, false, sms, w2_, s2_);

    const int row_groups_down = H / down_.tile_rows;
    partial_ = DeviceMemory(size_t(d_.M) * d_.k * plan_.splits_down * H * sizeof(float));
    counters_ = DeviceMemory(size_t(d_.M) * row_groups_down * sizeof(int));
    SUBMISSION_CUDA(cudaMemset(counters_.as<int>(), 0, size_t(d_.M) * row_groups_down * sizeof(int)));
    grid_arrivals_ = DeviceMemory(sizeof(unsigned long long));
    SUBMISSION_CUDA(cudaMemset(grid_arrivals_.as<unsigned long long>(), 0, sizeof(unsigned long long)));
    // Both GEMMs on the SMs' largest shared-memory carve-out. Under PDL,
    // GEMM 2's CTAs become resident beside GEMM 1's, and an SM keeps the
    // carve-out it was given while any CTA stays on it; were GEMM 1's
    // smaller, such an SM could hold fewer of GEMM 2's CTAs than the
    // occupancy its persistent grid was sized by, and GEMM 2's grid barrier
    // (deferred combine) would wait for CTAs that never become resident.
    // cta_align: each CTA's routing past its pipeline.
    routing_smem_ = plan_.cta_align ? aligned_routes_ints(d_.M, plan_.block_tokens, plan_.max_blocks) * 4 : 0;
    for (const MmaKernel* k : {&up_, &down_}) {
      SUBMISSION_CUDA(
          cudaFuncSetAttribute(k->fn, cudaFuncAttributeMaxDynamicSharedMemorySize, k->smem + routing_smem_));
      SUBMISSION_CUDA(
          cudaFuncSetAttribute(k->fn, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
    }
    const long long max_units_up = (long long)plan_.max_blocks * (2 * I / up_.tile_rows);
    // On the chunk queue a CTA's work is a chunk, of which a unit has
    // ceil(groups / chunk_stages).
    const long long chunks_per_unit =
        plan_.queue_chunk_stages ? queue_chunks_per_unit(H / kGroup, plan_.queue_chunk_stages) : 1;
    up_grid_ = persistent_grid(reinterpret_cast<const void*>(up_.fn), up_.threads, up_.smem + routing_smem_, sms,
                               max_units_up * chunks_per_unit);
    if (plan_.queue_chunk_stages) {
      // A slot per chunk: each MMA warp's accumulators, 32 lanes x RT x NT float4.
      const size_t slot = size_t(kMmaThreads) * (up_.tile_rows / 64) * (plan_.block_tokens / 8) * sizeof(float4);
      if (chunks_per_unit > 1) {
        chunk_partial_ = DeviceMemory(size_t(max_units_up * chunks_per_unit) * slot);
        chunk_counters_ = DeviceMemory(size_t(max_units_up) * kMmaWarps * sizeof(int));
        SUBMISSION_CUDA(cudaMemset(chunk_counters_.as<int>(), 0, size_t(max_units_up) * kMmaWarps * sizeof(int)));
      }
    }
    if (plan_.h_flags) {  // a flag per GEMM 1 unit
      h_ready_ = DeviceMemory(size_t(max_units_up) * sizeof(unsigned));
      tickets_ = DeviceMemory(2 * sizeof(unsigned));
      SUBMISSION_CUDA(cudaMemset(h_ready_.as<unsigned>(), 0, size_t(max_units_up) * sizeof(unsigned)));
      SUBMISSION_CUDA(cudaMemset(tickets_.as<unsigned>(), 0, 2 * sizeof(unsigned)));
    }
    for (DeviceMemory* q : {&queue_, &queue_down_}) {
      *q = DeviceMemory(2 * sizeof(int));
      SUBMISSION_CUDA(cudaMemset(q->as<int>(), 0, 2 * sizeof(int)));
    }
    if (plan_.stream_k_up) {
      // One posted part per CTA at most (of its first unit; the CTA that
      // holds a unit's first stage finishes it from its registers), the
      // CTA's accumulators: 128 threads x RT x NT float4.
      const size_t frag = size_t(kMmaThreads) * (up_.tile_rows / 64) * (plan_.block_tokens / 8);
      sk_partial_ = DeviceMemory(size_t(up_grid_) * frag * sizeof(float4));
      sk_counters_ = DeviceMemory(size_t(max_units_up) * sizeof(int));
      SUBMISSION_CUDA(cudaMemset(sk_counters_.as<int>(), 0, size_t(max_units_up) * sizeof(int)));
    }
    down_grid_ = persistent_grid(reinterpret_cast<const void*>(down_.fn), down_.threads, down_.smem + routing_smem_,
                                 sms, (long long)plan_.max_blocks * (H / down_.tile_rows) * plan_.splits_down);
  }

  // chained: launched programmatically dependent on the launch before it (plan_.pdl).
  void launch(const MmaKernel& k, int grid, const MmaGemmArgs& a, bool chained, cudaStream_t stream) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(k.threads);
    cfg.dynamicSmemBytes = k.smem + routing_smem_;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = plan_.pdl && chained ? 1 : 0;
    SUBMISSION_CUDA(cudaLaunchKernelEx(&cfg, k.fn, a));
  }

  MoeDims d_;
  MoeWeights w_;
  MoePlan plan_;
  AlignedRoutes routes_{};
  int align_smem_ = 0;
  DeviceMemory align_ws_, h_;
  int gemv_grid_ = 0;
  // tensor-core path
  DeviceMemory w13_, s13_, w2_, s2_, partial_, counters_, grid_arrivals_, sk_partial_, sk_counters_;
  DeviceMemory queue_, queue_down_, chunk_partial_, chunk_counters_;  // the work queues (moe_mma_ws.cuh)
  DeviceMemory h_ready_, tickets_;  // GEMM 1 -> GEMM 2 unit by unit (plan_.h_flags; moe_gemm_epilogue.cuh)
  MmaKernel up_{}, down_{};
  int up_grid_ = 0, down_grid_ = 0;
  int routing_smem_ = 0;  // bytes of shared memory past each GEMM CTA's pipeline for cta_align
};

}  // namespace

std::unique_ptr<Moe> make_moe_op(const MoeDims& d, const MoeWeights& w, const MoePlan& plan, int sms, PickKernel pick) {
  // The gemv kernels read the codes as given with 16-byte loads.
  if (plan.kernel == MoeKernel::gemv && ((reinterpret_cast<uintptr_t>(w.W13) | reinterpret_cast<uintptr_t>(w.W2)) & 15))
    throw std::invalid_argument("moe_w4a16: variant gemv needs 16-byte aligned W13 and W2");
  return std::make_unique<MoeW4A16>(d, w, plan, sms, pick);
}

}  // namespace submission::moe

namespace submission {

namespace detail {
std::vector<std::string> moe_variants() { return {"default", "gemv"}; }
}  // namespace detail

std::unique_ptr<Moe> make_moe(const MoeDims& dims, const MoeWeights& w, const std::string& variant) {
  moe::plan_moe(dims, variant, 1);  // bad dims or names before any device query
  const int sms = device_sm_count();
  return moe::make_moe_op(dims, w, moe::plan_moe(dims, variant, sms), sms, moe::pick_upload_kernel);
}

}  // namespace submission
