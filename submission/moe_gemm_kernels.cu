// The GEMM kernels of the upload's moe_w4a16 (moe_op.h: pick_upload_kernel), instantiated here
// apart from the op's host code: the warp-specialised kernel (moe_mma_ws.cuh) per block size and
// unit rows, GEMM 2 with and without a split reduction, on the CtaStages schedule or the queue.
#include <stdexcept>

#include "submission/moe_mma_ws.cuh"
#include "submission/moe_op.h"

namespace submission::moe {
namespace {

template <bool kDown,      // GEMM 2 (down), else GEMM 1 (gate_up)
          bool kSplit,     // GEMM 2 with a split reduction
          bool kQueue,     // the GEMM on the work queue
          int TokenTiles,  // 8-route token tiles per block
          int WarpTiles>   // 16-row tiles per warp
MmaKernel ws_kernel() {
  return {moe_ws_kernel<kDown, TokenTiles, WarpTiles, 3, kSplit, kQueue>,
          WsPipeline<TokenTiles, WarpTiles, 3>::kSmemBytes, MmaTile<TokenTiles, WarpTiles>::kRows, kWsThreads, true};
}

template <bool kDown, bool kSplit, bool kQueue,  // as ws_kernel's
          int TokenTiles>                        // 8-route token tiles per block
MmaKernel ws_kernel_rows(int tile_rows) {
  constexpr int kRt128 = TokenTiles < 8 ? 2 : 1;  // WarpTiles of 128-row units (none with blocks of 64, refused below)
  return tile_rows == 128 ? ws_kernel<kDown, kSplit, kQueue, TokenTiles, kRt128>()
                          : ws_kernel<kDown, kSplit, kQueue, TokenTiles, 1>();
}

template <bool kDown, bool kSplit, bool kQueue>  // as ws_kernel's
MmaKernel ws_kernel_tokens(int block_tokens, int tile_rows) {
  if (block_tokens == 64 && tile_rows == 128)
    throw std::invalid_argument("moe_w4a16: no 128-row kernel for blocks of 64");
  switch (block_tokens) {
    case 8:
      return ws_kernel_rows<kDown, kSplit, kQueue, 1>(tile_rows);
    case 16:
      return ws_kernel_rows<kDown, kSplit, kQueue, 2>(tile_rows);
    case 32:
      return ws_kernel_rows<kDown, kSplit, kQueue, 4>(tile_rows);
    case 64:
      return ws_kernel_rows<kDown, kSplit, kQueue, 8>(tile_rows);
  }
  throw std::invalid_argument("moe_w4a16: no kernel for this block size");
}

}  // namespace

MmaKernel pick_upload_kernel(const MoePlan& p, bool down) {
  const int ctas = down ? p.ctas_down : p.ctas_up;
  if (!p.warp_specialized || !p.unit_contiguous || ctas != 3 || (!down && p.queue_chunk_stages)) return {};
  if (!down) return ws_kernel_tokens<false, false, false>(p.block_tokens, p.tile_rows_up);
  const bool split = p.splits_down > 1;
  if (p.queue_down)
    return split ? ws_kernel_tokens<true, true, true>(p.block_tokens, p.tile_rows_down)
                 : ws_kernel_tokens<true, false, true>(p.block_tokens, p.tile_rows_down);
  return split ? ws_kernel_tokens<true, true, false>(p.block_tokens, p.tile_rows_down)
               : ws_kernel_tokens<true, false, false>(p.block_tokens, p.tile_rows_down);
}

}  // namespace submission::moe
