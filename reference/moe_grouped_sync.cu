// moe_w4a16's baseline as an eager serving stack without a fused MoE kernel
// runs it, `--baseline moe=cublas_grouped_sync`: weights dequantized to bf16
// once; run aligns the routes by local expert, reads the counts back (one
// stream sync: cuBLAS's grouped GEMM takes group sizes from host memory),
// gathers, and runs each GEMM stage as one grouped cuBLAS launch over the
// experts with routes, with SiLU-and-mul between and a weighted combine after.
// Because it synchronises, the scorer times it without holding the stream and
// never captures it (reference/baselines.h); the default baseline,
// moe_batched.cu, does neither.
#include <vector>

#include "reference/moe_kernels.cuh"

namespace reference {
namespace {

using detail::Cublas;
using detail::device_array;
using detail::DeviceArray;
using namespace moe;  // the shared kernels, kThreads, kAlignThreads, Operand

// Its pointer arrays are indexed by group: the experts with routes, ascending.
// One block. Counts the routes of each local expert, then gives every local
// route a slot: experts ascending, and within an expert its routes in (token, j)
// order, so the permutation is the same on every run. Also writes the grouped
// GEMMs' pointer arrays, so that the host needs only the counts.
__global__ void __launch_bounds__(kAlignThreads)
    moe_align(const int32_t* __restrict__ topk_ids, int routes, int k, int first, int E, int H, int I, const bf16* w13,
              const bf16* w2, bf16* xg, bf16* gate_up, bf16* h, bf16* y, int32_t* __restrict__ counts,
              int32_t* __restrict__ slot_of_route, int32_t* __restrict__ slot_token, void** __restrict__ ptrs) {
  extern __shared__ int s_align[];
  int* s_count = s_align;      // [E]
  int* s_start = s_align + E;  // [E]
  moe::count_routes(topk_ids, routes, first, E, s_count, slot_of_route);
  if (threadIdx.x == 0) {
    int start = 0, g = 0;
    for (int e = 0; e < E; ++e) {
      const int n = s_count[e];
      s_start[e] = start;
      counts[e] = n;
      if (n > 0) {
        ptrs[kA1 * E + g] = const_cast<bf16*>(w13) + size_t(e) * 2 * I * H;
        ptrs[kB1 * E + g] = xg + size_t(start) * H;
        ptrs[kC1 * E + g] = gate_up + size_t(start) * 2 * I;
        ptrs[kA2 * E + g] = const_cast<bf16*>(w2) + size_t(e) * H * I;
        ptrs[kB2 * E + g] = h + size_t(start) * I;
        ptrs[kC2 * E + g] = y + size_t(start) * H;
        ++g;
      }
      start += n;
    }
  }
  __syncthreads();
  moe::rank_routes(topk_ids, routes, k, first, E, s_count, s_start, slot_of_route, slot_token);
}

class MoeGroupedSync final : public submission::Moe {
 public:
  MoeGroupedSync(const submission::MoeDims& d, const submission::MoeWeights& w)
      : d_(d),
        routes_(d.M * d.k),
        w13_(moe::dequantize<bf16>(w.W13, w.S13, size_t(d.E_local) * 2 * d.I, d.H)),
        w2_(moe::dequantize<bf16>(w.W2, w.S2, size_t(d.E_local) * d.H, d.I)),
        counts_(device_array<int32_t>(d.E_local)),
        counts_host_(detail::pinned_array<int32_t>(d.E_local)),
        slot_of_route_(device_array<int32_t>(routes_)),
        slot_token_(device_array<int32_t>(routes_)),
        ptrs_(device_array<void*>(size_t(kOperands) * d.E_local)),
        xg_(device_array<bf16>(size_t(routes_) * d.H)),
        gate_up_(device_array<bf16>(size_t(routes_) * 2 * d.I)),
        h_(device_array<bf16>(size_t(routes_) * d.I)),
        y_(device_array<bf16>(size_t(routes_) * d.H)),
        op_t_(d.E_local, CUBLAS_OP_T),
        op_n_(d.E_local, CUBLAS_OP_N),
        two_i_(d.E_local, 2 * d.I),
        h_dim_(d.E_local, d.H),
        i_dim_(d.E_local, d.I),
        group_rows_(d.E_local),
        alpha_(d.E_local, 1.0f),
        beta_(d.E_local, 0.0f),
        group_size_(d.E_local, 1) {
    REF_CUDA(cudaStreamSynchronize(nullptr));  // the dequantization, before any other stream reads it
  }

  void run(const submission::MoeIO& io, cudaStream_t stream) override {
    const int H = d_.H, I = d_.I, E = d_.E_local;
    const cublasHandle_t handle = cublas_.bind(stream);
    moe_align<<<1, kAlignThreads, moe_align_smem_bytes(E), stream>>>(
        io.topk_ids, routes_, d_.k, d_.ep_rank * E, E, H, I, w13_.get(), w2_.get(), xg_.get(), gate_up_.get(), h_.get(),
        y_.get(), counts_.get(), slot_of_route_.get(), slot_token_.get(), ptrs_.get());
    REF_CHECK_LAUNCH();
    // cuBLAS reads the group sizes from host memory: the one sync of this baseline.
    REF_CUDA(cudaMemcpyAsync(counts_host_.get(), counts_.get(), E * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
    REF_CUDA(cudaStreamSynchronize(stream));
    int groups = 0, rows = 0;
    for (int e = 0; e < E; ++e) {
      if (counts_host_[e] == 0) continue;
      group_rows_[groups++] = counts_host_[e];
      rows += counts_host_[e];
    }

    if (rows > 0) {
      void** p = ptrs_.get();
      moe::gather_rows<<<rows, 128, 0, stream>>>(io.X, slot_token_.get(), H, xg_.get());
      REF_CHECK_LAUNCH();
      // In gemm_xwt's column-major view: gate_up^T[2I, n] = W13_e^T . xg^T, and
      // y^T[H, n] = W2_e^T . h^T. Rows are dense, so lda = ldb = k and ldc = m.
      REF_CUBLAS(cublasGemmGroupedBatchedEx(
          handle, op_t_.data(), op_n_.data(), two_i_.data(), group_rows_.data(), h_dim_.data(), alpha_.data(),
          p + kA1 * E, CUDA_R_16BF, h_dim_.data(), p + kB1 * E, CUDA_R_16BF, h_dim_.data(), beta_.data(), p + kC1 * E,
          CUDA_R_16BF, two_i_.data(), groups, group_size_.data(), CUBLAS_COMPUTE_32F));
      moe::silu_mul<<<rows, kThreads, 0, stream>>>(gate_up_.get(), I, h_.get());
      REF_CHECK_LAUNCH();
      REF_CUBLAS(cublasGemmGroupedBatchedEx(
          handle, op_t_.data(), op_n_.data(), h_dim_.data(), group_rows_.data(), i_dim_.data(), alpha_.data(),
          p + kA2 * E, CUDA_R_16BF, i_dim_.data(), p + kB2 * E, CUDA_R_16BF, i_dim_.data(), beta_.data(), p + kC2 * E,
          CUDA_R_16BF, h_dim_.data(), groups, group_size_.data(), CUBLAS_COMPUTE_32F));
    }
    moe::combine<<<d_.M, kThreads, 0, stream>>>(y_.get(), slot_of_route_.get(), io.topk_weights, d_.k, H, io.out);
    REF_CHECK_LAUNCH();
  }

 private:
  submission::MoeDims d_;
  int routes_;                   // M * k
  DeviceArray<bf16> w13_, w2_;   // [E_local, 2I, H], [E_local, H, I]
  DeviceArray<int32_t> counts_;  // [E_local] routes per local expert
  detail::PinnedArray<int32_t> counts_host_;
  DeviceArray<int32_t> slot_of_route_;      // [M*k] slot of each route, -1 if not local
  DeviceArray<int32_t> slot_token_;         // [M*k] token of each slot
  DeviceArray<void*> ptrs_;                 // [kOperands, E_local]
  DeviceArray<bf16> xg_, gate_up_, h_, y_;  // per slot: [., H], [., 2I], [., I], [., H]
  // Per-group arguments of cublasGemmGroupedBatchedEx, on the host as it requires;
  // only group_rows_ changes between runs.
  std::vector<cublasOperation_t> op_t_, op_n_;
  std::vector<int> two_i_, h_dim_, i_dim_, group_rows_;
  std::vector<float> alpha_, beta_;
  std::vector<int> group_size_;
  Cublas cublas_;
};

}  // namespace

std::unique_ptr<submission::Moe> make_moe_grouped_sync_baseline(const submission::MoeDims& d,
                                                                const submission::MoeWeights& w) {
  moe::check_baseline_dims(d);
  return std::make_unique<MoeGroupedSync>(d, w);
}

}  // namespace reference
