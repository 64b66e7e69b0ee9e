// moe_w4a16's reference: weights dequantized to fp32 once; run reads the
// routing back to the host and, expert by expert, gathers its tokens in fp32,
// runs pedantic fp32 GEMMs (h rounded to bf16 as the op says) and adds the
// weighted result into the fp32 output. (The baselines: moe_batched.cu,
// moe_grouped_sync.cu.)
#include <algorithm>
#include <vector>

#include "reference/moe_kernels.cuh"

namespace reference {
namespace {

using detail::Cublas;
using detail::device_array;
using detail::DeviceArray;
using moe::kThreads;

// dst[i, :] = fp32(X[tokens[i], :]), one block per row.
__global__ void gather_rows_f32(const bf16* __restrict__ X, const int32_t* __restrict__ tokens, int H,
                                float* __restrict__ dst) {
  const bf16* src = X + size_t(tokens[blockIdx.x]) * H;
  for (int c = threadIdx.x; c < H; c += blockDim.x) dst[size_t(blockIdx.x) * H + c] = __bfloat162float(src[c]);
}

// out[tokens[i], :] += weights[i] * y[i, :]. A token appears at most once per
// expert (ids are distinct per token), so rows of one launch never collide.
__global__ void scatter_add(const float* __restrict__ y, const int32_t* __restrict__ tokens,
                            const float* __restrict__ weights, int H, float* __restrict__ out) {
  float* dst = out + size_t(tokens[blockIdx.x]) * H;
  const float w = weights[blockIdx.x];
  for (int c = threadIdx.x; c < H; c += blockDim.x) dst[c] += w * y[size_t(blockIdx.x) * H + c];
}

class MoeRef final : public MoeReference {
 public:
  MoeRef(const submission::MoeDims& d, const submission::MoeWeights& w)
      : d_(d),
        w13_(moe::dequantize<float>(w.W13, w.S13, size_t(d.E_local) * 2 * d.I, d.H)),
        w2_(moe::dequantize<float>(w.W2, w.S2, size_t(d.E_local) * d.H, d.I)),
        x_(device_array<float>(size_t(d.M) * d.H)),
        gate_up_(device_array<float>(size_t(d.M) * 2 * d.I)),
        h_(device_array<float>(size_t(d.M) * d.I)),
        y_(device_array<float>(size_t(d.M) * d.H)),
        route_token_(device_array<int32_t>(size_t(d.M) * d.k)),
        route_weight_(device_array<float>(size_t(d.M) * d.k)),
        ids_(size_t(d.M) * d.k),
        weights_(size_t(d.M) * d.k),
        tokens_(ids_.size()),
        token_weights_(ids_.size()),
        start_(d.E_local + 1) {
    REF_CUDA(cudaStreamSynchronize(nullptr));  // the dequantization, before any other stream reads it
  }

  void run(const bf16* X, const int32_t* topk_ids, const float* topk_weights, float* out,
           cudaStream_t stream) override {
    const int M = d_.M, H = d_.H, I = d_.I, E = d_.E_local, first = d_.ep_rank * d_.E_local;
    const size_t routes = ids_.size();
    REF_CUDA(cudaMemcpyAsync(ids_.data(), topk_ids, routes * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
    REF_CUDA(cudaMemcpyAsync(weights_.data(), topk_weights, routes * sizeof(float), cudaMemcpyDeviceToHost, stream));
    REF_CUDA(cudaStreamSynchronize(stream));

    // The local routes bucketed by expert, each bucket in route order.
    std::fill(start_.begin(), start_.end(), 0);
    for (size_t r = 0; r < routes; ++r)
      if (const int e = ids_[r] - first; e >= 0 && e < E) ++start_[e + 1];
    for (int e = 0; e < E; ++e) start_[e + 1] += start_[e];
    std::vector<int> next(start_.begin(), start_.end() - 1);
    for (size_t r = 0; r < routes; ++r) {
      if (const int e = ids_[r] - first; e >= 0 && e < E) {
        tokens_[next[e]] = int32_t(r / d_.k);
        token_weights_[next[e]++] = weights_[r];
      }
    }
    const size_t local = size_t(start_[E]);
    REF_CUDA(
        cudaMemcpyAsync(route_token_.get(), tokens_.data(), local * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
    REF_CUDA(cudaMemcpyAsync(route_weight_.get(), token_weights_.data(), local * sizeof(float), cudaMemcpyHostToDevice,
                             stream));
    REF_CUDA(cudaMemsetAsync(out, 0, size_t(M) * H * sizeof(float), stream));

    const cublasHandle_t handle = cublas_.bind(stream);
    for (int e = 0; e < E; ++e) {
      const int n = start_[e + 1] - start_[e];
      if (n == 0) continue;
      const int32_t* tokens = route_token_.get() + start_[e];
      gather_rows_f32<<<n, kThreads, 0, stream>>>(X, tokens, H, x_.get());
      REF_CHECK_LAUNCH();
      detail::gemm_xwt(handle, n, 2 * I, H, x_.get(), w13_.get() + size_t(e) * 2 * I * H, CUDA_R_32F, gate_up_.get(),
                       CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC);
      moe::silu_mul<<<n, kThreads, 0, stream>>>(gate_up_.get(), I, h_.get());
      REF_CHECK_LAUNCH();
      detail::gemm_xwt(handle, n, H, I, h_.get(), w2_.get() + size_t(e) * H * I, CUDA_R_32F, y_.get(), CUDA_R_32F,
                       CUBLAS_COMPUTE_32F_PEDANTIC);
      scatter_add<<<n, kThreads, 0, stream>>>(y_.get(), tokens, route_weight_.get() + start_[e], H, out);
      REF_CHECK_LAUNCH();
    }
  }

 private:
  submission::MoeDims d_;
  DeviceArray<float> w13_, w2_;             // [E_local, 2I, H], [E_local, H, I]
  DeviceArray<float> x_, gate_up_, h_, y_;  // one expert's rows: at most M
  DeviceArray<int32_t> route_token_;        // local routes by expert: token
  DeviceArray<float> route_weight_;         //   and its routing weight
  std::vector<int32_t> ids_;                // host copies of the routing
  std::vector<float> weights_;
  std::vector<int32_t> tokens_;       // host side of route_token_
  std::vector<float> token_weights_;  //   and route_weight_
  std::vector<int> start_;            // [E_local + 1] bucket starts
  Cublas cublas_;
};

}  // namespace

std::unique_ptr<MoeReference> make_moe_reference(const submission::MoeDims& d, const submission::MoeWeights& w) {
  moe::check_dims(d);
  return std::make_unique<MoeRef>(d, w);
}

}  // namespace reference
