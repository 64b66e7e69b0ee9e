// moe_w4a16's default baseline, as a serving engine that captures its MoE in a
// CUDA graph runs it with cuBLAS alone: no host synchronisation, so that it is
// timed like the candidate (held stream, graph replay). Weights dequantized to
// bf16 once; per call:
//   1. one block aligns the routes by local expert into blocks of B rows (the
//      moe_align_block_size plan serving engines use): each expert with routes
//      takes ceil(n/B) blocks, its routes in (token, j) order, the rest of its
//      last block padding; it writes the GEMMs' pointer arrays on the device;
//   2. a gather of each slot's token row (zeros for padding);
//   3. one cublasGemmBatchedEx per GEMM stage over a fixed number of entries
//      known on the host, the upper bound of blocks (moe_batched_max_blocks),
//      with SiLU-and-mul between and a weighted combine after.
// The entries beyond the blocks in use must still be valid GEMMs, since cuBLAS
// runs every entry in full. Each repeats the expert weights and activations of
// a block in use and writes a scratch block no one reads; they are laid out
// right after that block in the batch, so that their weight reads find in L2
// what the block's own entry has just read, rather than a distinct expert
// from memory (pointing them at an idle expert would re-read up to 58 MB of
// dsv3 weights each). Their cost is that L2 traffic, and is largest where few
// of the local experts are touched: expert parallelism at small M.
#include <algorithm>

#include "reference/moe_kernels.cuh"

namespace reference {
namespace {

using detail::Cublas;
using detail::device_array;
using detail::DeviceArray;
using namespace moe;  // the shared kernels, kThreads, kAlignThreads, Operand

struct Buffers {
  const bf16 *w13, *w2;
  bf16 *xg, *gate_up, *h, *y, *scratch;
};

__device__ void set_entry(void** ptrs, int entries, int entry, const Buffers& b, int e, int block, int B, int H, int I,
                          bool spare) {
  ptrs[kA1 * entries + entry] = const_cast<bf16*>(b.w13) + size_t(e) * 2 * I * H;
  ptrs[kB1 * entries + entry] = b.xg + size_t(block) * B * H;
  ptrs[kC1 * entries + entry] = spare ? b.scratch : b.gate_up + size_t(block) * B * 2 * I;
  ptrs[kA2 * entries + entry] = const_cast<bf16*>(b.w2) + size_t(e) * H * I;
  ptrs[kB2 * entries + entry] = b.h + size_t(block) * B * I;
  ptrs[kC2 * entries + entry] = spare ? b.scratch : b.y + size_t(block) * B * H;
}

// One block. Counts each local expert's routes, lays out its blocks (experts
// ascending), writes the pointer arrays (each block in use followed by its
// share of the spare entries), gives every local route its slot and marks
// padding slots with token -1; *used_rows = the rows of the blocks in use.
__global__ void __launch_bounds__(kAlignThreads)
    align_blocks(const int32_t* __restrict__ topk_ids, int routes, int k, int first, int E, int H, int I, int B,
                 int entries, Buffers buf, int32_t* __restrict__ slot_of_route, int32_t* __restrict__ slot_token,
                 int* __restrict__ used_rows, void** __restrict__ ptrs) {
  extern __shared__ int s_align[];
  int* s_count = s_align;      // [E] routes
  int* s_start = s_align + E;  // [E] first slot
  moe::count_routes(topk_ids, routes, first, E, s_count, slot_of_route);
  if (threadIdx.x == 0) {
    int blocks = 0;
    for (int e = 0; e < E; ++e) {
      s_start[e] = blocks * B;
      blocks += (s_count[e] + B - 1) / B;
    }
    if (blocks > entries) __trap();  // the host's bound is wrong: a scorer bug, never silent
    *used_rows = blocks * B;
    const int spare = entries - blocks;
    int entry = 0;
    for (int e = 0, block = 0; e < E; ++e)
      for (int j = 0; j < (s_count[e] + B - 1) / B; ++j, ++block) {
        const int copies = 1 + spare / blocks + (block < spare % blocks);
        for (int c = 0; c < copies; ++c) set_entry(ptrs, entries, entry++, buf, e, block, B, H, I, c > 0);
      }
    // No local route at all: every entry a harmless copy of expert 0's block 0.
    for (; entry < entries; ++entry) set_entry(ptrs, entries, entry, buf, 0, 0, B, H, I, true);
  }
  __syncthreads();
  moe::rank_routes(topk_ids, routes, k, first, E, s_count, s_start, slot_of_route, slot_token);
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const int end = s_start[e] + (s_count[e] + B - 1) / B * B;
    for (int s = s_start[e] + s_count[e]; s < end; ++s) slot_token[s] = -1;
  }
}

class MoeBatched final : public submission::Moe {
 public:
  MoeBatched(const submission::MoeDims& d, const submission::MoeWeights& w)
      : d_(d),
        B_(moe_batched_block_rows(d.M)),
        entries_(moe_batched_max_blocks(d)),
        slots_(size_t(entries_) * B_),
        w13_(moe::dequantize<bf16>(w.W13, w.S13, size_t(d.E_local) * 2 * d.I, d.H)),
        w2_(moe::dequantize<bf16>(w.W2, w.S2, size_t(d.E_local) * d.H, d.I)),
        slot_of_route_(device_array<int32_t>(size_t(d.M) * d.k)),
        slot_token_(device_array<int32_t>(slots_)),
        used_rows_(device_array<int>(1)),
        ptrs_(device_array<void*>(size_t(kOperands) * entries_)),
        xg_(device_array<bf16>(slots_ * d.H)),
        gate_up_(device_array<bf16>(slots_ * 2 * d.I)),
        h_(device_array<bf16>(slots_ * d.I)),
        y_(device_array<bf16>(slots_ * d.H)),
        scratch_(device_array<bf16>(size_t(B_) * std::max(2 * d.I, d.H))) {
    // Where no route is local, the spare entries read block 0 of xg and h,
    // which no call writes then: zeros rather than uninitialised memory.
    REF_CUDA(cudaMemset(xg_.get(), 0, size_t(B_) * d.H * sizeof(bf16)));
    REF_CUDA(cudaMemset(h_.get(), 0, size_t(B_) * d.I * sizeof(bf16)));
    REF_CUDA(cudaStreamSynchronize(nullptr));  // the dequantization, before any other stream reads it
  }

  void run(const submission::MoeIO& io, cudaStream_t stream) override {
    const int H = d_.H, I = d_.I, E = d_.E_local, n = entries_;
    const Buffers buf{w13_.get(), w2_.get(), xg_.get(), gate_up_.get(), h_.get(), y_.get(), scratch_.get()};
    align_blocks<<<1, kAlignThreads, moe_align_smem_bytes(E), stream>>>(
        io.topk_ids, d_.M * d_.k, d_.k, d_.ep_rank * E, E, H, I, B_, n, buf, slot_of_route_.get(), slot_token_.get(),
        used_rows_.get(), ptrs_.get());
    REF_CHECK_LAUNCH();
    moe::gather_rows<<<unsigned(slots_), 128, 0, stream>>>(io.X, slot_token_.get(), H, xg_.get(), used_rows_.get());
    REF_CHECK_LAUNCH();
    // In gemm_xwt's column-major view, per entry: gate_up^T[2I, B] = W13_e^T . xg^T
    // and y^T[H, B] = W2_e^T . h^T; rows are dense, so lda = ldb = k and ldc = m.
    const cublasHandle_t handle = cublas_.bind(stream);
    const float one = 1.0f, zero = 0.0f;
    void* const* p = ptrs_.get();
    REF_CUBLAS(cublasGemmBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, 2 * I, B_, H, &one, p + kA1 * n, CUDA_R_16BF, H,
                                   p + kB1 * n, CUDA_R_16BF, H, &zero, p + kC1 * n, CUDA_R_16BF, 2 * I, n,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    moe::silu_mul<<<unsigned(slots_), kThreads, 0, stream>>>(gate_up_.get(), I, h_.get(), used_rows_.get());
    REF_CHECK_LAUNCH();
    REF_CUBLAS(cublasGemmBatchedEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, H, B_, I, &one, p + kA2 * n, CUDA_R_16BF, I,
                                   p + kB2 * n, CUDA_R_16BF, I, &zero, p + kC2 * n, CUDA_R_16BF, H, n,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    moe::combine<<<d_.M, kThreads, 0, stream>>>(y_.get(), slot_of_route_.get(), io.topk_weights, d_.k, H, io.out);
    REF_CHECK_LAUNCH();
  }

 private:
  submission::MoeDims d_;
  int B_;                                   // rows per block
  int entries_;                             // GEMM entries: the most blocks a routing can take
  size_t slots_;                            // entries_ * B_
  DeviceArray<bf16> w13_, w2_;              // [E_local, 2I, H], [E_local, H, I]
  DeviceArray<int32_t> slot_of_route_;      // [M*k] slot of each route, -1 if not local
  DeviceArray<int32_t> slot_token_;         // [slots] token of each slot, -1 for padding
  DeviceArray<int> used_rows_;              // [1] rows of the blocks in use
  DeviceArray<void*> ptrs_;                 // [kOperands, entries]
  DeviceArray<bf16> xg_, gate_up_, h_, y_;  // per slot: [., H], [., 2I], [., I], [., H]
  DeviceArray<bf16> scratch_;               // [B, max(2I, H)] what spare entries write
  Cublas cublas_;
};

}  // namespace

std::unique_ptr<submission::Moe> make_moe_batched_baseline(const submission::MoeDims& d,
                                                           const submission::MoeWeights& w) {
  moe::check_baseline_dims(d);
  return std::make_unique<MoeBatched>(d, w);
}

}  // namespace reference
