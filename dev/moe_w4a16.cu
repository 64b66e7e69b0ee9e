// moe_w4a16's dev variants: their plans (dev/moe_plans.h), on the upload's
// kernels where it has them (submission/moe_gemm_kernels.cu) and on the ones instantiated here
// otherwise: the CTA-copies kernel (moe_mma_cta_copies.cuh, 3 or 6 CTAs per SM), the
// warp-specialised kernel at 4 CTAs per SM (mma_ws4) and GEMM 1 on the work queue (mma_queue).
#include <stdexcept>
#include <string>
#include <vector>

#include "dev/moe_mma_cta_copies.cuh"
#include "dev/moe_plans.h"
#include "dev/variants.h"
#include "submission/device_memory.h"
#include "submission/moe_mma_ws.cuh"
#include "submission/moe_op.h"

namespace submission::moe {
namespace {

template <bool kDown,      // GEMM 2 (down), else GEMM 1 (gate_up)
          bool kContig,    // weights packed per unit (one contiguous run a stage)
          bool kSplit,     // GEMM 2 with a split reduction
          int TokenTiles,  // 8-route token tiles per block
          int WarpTiles,   // 16-row tiles per warp
          int CtasPerSm>   // CTAs per SM: the register cap and the pipeline depth
MmaKernel cta_copies_kernel() {
  return {moe_mma_kernel<kDown, kContig, TokenTiles, WarpTiles, CtasPerSm, kSplit>,
          MmaPipeline<TokenTiles, WarpTiles, CtasPerSm>::kSmemBytes, MmaTile<TokenTiles, WarpTiles>::kRows, kMmaThreads,
          false};
}

template <bool kDown, bool kSplit,                       // as cta_copies_kernel's
          bool kQueue,                                   // the GEMM on the work queue
          int TokenTiles, int WarpTiles, int CtasPerSm>  // as cta_copies_kernel's
MmaKernel ws_kernel() {
  return {moe_ws_kernel<kDown, TokenTiles, WarpTiles, CtasPerSm, kSplit, kQueue>,
          WsPipeline<TokenTiles, WarpTiles, CtasPerSm>::kSmemBytes, MmaTile<TokenTiles, WarpTiles>::kRows, kWsThreads,
          true};
}

// The kernel of a block size and unit rows that the upload does not hold.
template <bool kDown, bool kContig, bool kSplit,  // as cta_copies_kernel's
          int TokenTiles>                         // 8-route token tiles per block
MmaKernel dev_kernel_rows(const MoePlan& p, int tile_rows, int ctas) {
  if (TokenTiles == 8 && tile_rows == 128) throw std::invalid_argument("moe_w4a16: no 128-row kernel for blocks of 64");
  constexpr int kRt128 = TokenTiles < 8 ? 2 : 1;  // WarpTiles of 128-row units
  if (p.warp_specialized) {
    if constexpr (kContig) {
      if (!kDown && p.queue_chunk_stages) {
        if (ctas != 3) throw std::invalid_argument("moe_w4a16: the work queue runs at 3 CTAs per SM");
        return tile_rows == 128 ? ws_kernel<false, false, true, TokenTiles, kRt128, 3>()
                                : ws_kernel<false, false, true, TokenTiles, 1, 3>();
      }
      if constexpr (ws_max_ctas_per_sm(8 * TokenTiles) == 4) {
        if (ctas == 4)
          return tile_rows == 128 ? ws_kernel<kDown, kSplit, false, TokenTiles, kRt128, 4>()
                                  : ws_kernel<kDown, kSplit, false, TokenTiles, 1, 4>();
      }
      throw std::invalid_argument("moe_w4a16: no warp-specialised kernel for this block size and CTAs per SM");
    }
    throw std::invalid_argument("moe_w4a16: the warp-specialised kernel reads unit-packed weights");
  }
  if constexpr (kContig && kSplit) {
    throw std::invalid_argument("moe_w4a16: a split GEMM 2 on unit-packed weights needs the warp-specialised kernel");
  } else {
    if (ctas == 6) {
      if constexpr (!kContig && mma_max_ctas_per_sm(8 * TokenTiles, kMmaWarps * kRt128) == 6) {
        if (tile_rows == 128) return cta_copies_kernel<kDown, kContig, kSplit, TokenTiles, kRt128, 6>();
      }
      if constexpr (!kContig && mma_max_ctas_per_sm(8 * TokenTiles, kMmaWarps) == 6) {
        if (tile_rows != 128) return cta_copies_kernel<kDown, kContig, kSplit, TokenTiles, 1, 6>();
      }
      throw std::invalid_argument("moe_w4a16: no kernel for this block size and layout with 6 CTAs per SM");
    }
    if (ctas != 3) throw std::invalid_argument("moe_w4a16: no kernel for this many CTAs per SM");
    return tile_rows == 128 ? cta_copies_kernel<kDown, kContig, kSplit, TokenTiles, kRt128, 3>()
                            : cta_copies_kernel<kDown, kContig, kSplit, TokenTiles, 1, 3>();
  }
}

template <bool kDown, bool kContig, bool kSplit>  // as cta_copies_kernel's
MmaKernel dev_kernel_tokens(const MoePlan& p, int tile_rows, int ctas) {
  switch (p.block_tokens) {
    case 8:
      return dev_kernel_rows<kDown, kContig, kSplit, 1>(p, tile_rows, ctas);
    case 16:
      return dev_kernel_rows<kDown, kContig, kSplit, 2>(p, tile_rows, ctas);
    case 32:
      return dev_kernel_rows<kDown, kContig, kSplit, 4>(p, tile_rows, ctas);
    case 64:
      return dev_kernel_rows<kDown, kContig, kSplit, 8>(p, tile_rows, ctas);
  }
  throw std::invalid_argument("moe_w4a16: no kernel for this block size");
}

MmaKernel pick_dev_kernel(const MoePlan& p, bool down) {
  const MmaKernel upload = pick_upload_kernel(p, down);
  if (upload.fn) return upload;
  const int ctas = down ? p.ctas_down : p.ctas_up, tile_rows = down ? p.tile_rows_down : p.tile_rows_up;
  if (down && p.queue_down)
    throw std::invalid_argument("moe_w4a16: the work queue runs on the warp-specialised kernel, 3 CTAs per SM");
  if (!down)
    return p.unit_contiguous ? dev_kernel_tokens<false, true, false>(p, tile_rows, ctas)
                             : dev_kernel_tokens<false, false, false>(p, tile_rows, ctas);
  if (p.splits_down > 1) {
    if (p.unit_contiguous && !p.warp_specialized)
      throw std::invalid_argument("moe_w4a16: no split kernel for contiguous units");
    return p.unit_contiguous ? dev_kernel_tokens<true, true, true>(p, tile_rows, ctas)
                             : dev_kernel_tokens<true, false, true>(p, tile_rows, ctas);
  }
  return p.unit_contiguous ? dev_kernel_tokens<true, true, false>(p, tile_rows, ctas)
                           : dev_kernel_tokens<true, false, false>(p, tile_rows, ctas);
}

}  // namespace
}  // namespace submission::moe

namespace submission::dev {

std::vector<std::string> dev_moe_variants() { return moe::dev_moe_plan_names(); }

std::unique_ptr<Moe> make_dev_moe(const MoeDims& dims, const MoeWeights& w, const std::string& variant) {
  moe::plan_moe_variant(dims, variant, 1);  // bad dims or names before any device query
  const int sms = device_sm_count();
  return moe::make_moe_op(dims, w, moe::plan_moe_variant(dims, variant, sms), sms, moe::pick_dev_kernel);
}

}  // namespace submission::dev
