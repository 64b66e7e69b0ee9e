// router: logits[T, E] = X . Wg^T in fp32, then top-k of softmax(logits) with
// the chosen probabilities renormalised.
//   reference: the logits only, pedantic fp32 GEMM (the scorer derives top-k);
//   baseline:  cublasGemmEx with fp32 output, then one softmax/top-k kernel.
#include <climits>

#include "reference/cublas_util.h"
#include "reference/reference.h"

namespace reference {
namespace {

using detail::Cublas;

constexpr int kTopkThreads = 128;
constexpr int kTopkWarps = kTopkThreads / 32;

struct Best {
  float v;
  int i;
};

// Larger logit wins; equal logits go to the lower expert id.
__device__ Best better(Best a, Best b) { return (b.v > a.v || (b.v == a.v && b.i < a.i)) ? b : a; }

// One block per token: k passes of a block arg-max over the experts not yet
// taken. The weights need only the chosen logits: the softmax denominator
// cancels in the renormalisation, leaving exp(l - lmax) / sum over the top k.
__global__ void __launch_bounds__(kTopkThreads)
    softmax_topk(const float* __restrict__ logits, int E, int k, int32_t* __restrict__ topk_ids,
                 float* __restrict__ topk_weights) {
  extern __shared__ float smem[];
  float* s_logit = smem;                                                 // [E]
  float* s_top = smem + E;                                               // [k] chosen logits
  unsigned char* s_taken = reinterpret_cast<unsigned char*>(s_top + k);  // [E]
  __shared__ Best s_warp[kTopkWarps];

  const int t = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    s_logit[e] = logits[size_t(t) * E + e];
    s_taken[e] = 0;
  }
  __syncthreads();

  for (int j = 0; j < k; ++j) {
    // INT_MAX loses every tie, so even a -inf logit is picked over "none".
    Best b{-INFINITY, INT_MAX};
    for (int e = threadIdx.x; e < E; e += blockDim.x)
      if (!s_taken[e]) b = better(b, {s_logit[e], e});
    for (int off = 16; off > 0; off /= 2)
      b = better(b, {__shfl_xor_sync(0xffffffffu, b.v, off), __shfl_xor_sync(0xffffffffu, b.i, off)});
    if (lane == 0) s_warp[warp] = b;
    __syncthreads();
    if (threadIdx.x == 0) {
      for (int w = 1; w < kTopkWarps; ++w) b = better(b, s_warp[w]);
      topk_ids[size_t(t) * k + j] = b.i;
      s_top[j] = b.v;
      if (b.i < E) s_taken[b.i] = 1;  // only NaN logits leave nothing to take
    }
    __syncthreads();
  }

  for (int j = threadIdx.x; j < k; j += blockDim.x) {
    float sum = 0.0f;
    for (int i = 0; i < k; ++i) sum += expf(s_top[i] - s_top[0]);
    topk_weights[size_t(t) * k + j] = expf(s_top[j] - s_top[0]) / sum;
  }
}

void check_dims(const submission::RouterDims& d) {
  detail::require(d.T >= 1 && d.H >= 8 && d.H % 8 == 0 && d.k >= 1 && d.k <= d.E,
                  "router: needs T >= 1, H >= 8, H % 8 == 0, 1 <= k <= E");
}

class RouterBaseline final : public submission::Router {
 public:
  RouterBaseline(const submission::RouterDims& d, const submission::RouterWeights& w)
      : d_(d), w_(w), smem_(router_topk_smem_bytes(d.E, d.k)) {}

  void run(const submission::RouterIO& io, cudaStream_t stream) override {
    detail::gemm_xwt(cublas_.bind(stream), d_.T, d_.E, d_.H, io.X, w_.Wg, CUDA_R_16BF, io.logits, CUDA_R_32F,
                     CUBLAS_COMPUTE_32F);
    softmax_topk<<<d_.T, kTopkThreads, smem_, stream>>>(io.logits, d_.E, d_.k, io.topk_ids, io.topk_weights);
    REF_CHECK_LAUNCH();
  }

 private:
  submission::RouterDims d_;
  submission::RouterWeights w_;
  size_t smem_;
  Cublas cublas_;
};

}  // namespace

std::unique_ptr<RouterReference> make_router_reference(const submission::RouterDims& d,
                                                       const submission::RouterWeights& w) {
  check_dims(d);
  return std::make_unique<detail::PedanticGemmReference<RouterReference>>(d.T, d.E, d.H, w.Wg);
}

std::unique_ptr<submission::Router> make_router_baseline(const submission::RouterDims& d,
                                                         const submission::RouterWeights& w) {
  check_dims(d);
  detail::require(router_topk_smem_bytes(d.E, d.k) <= kBaselineSmemBytes,
                  "router baseline: E too large for one block's row");
  return std::make_unique<RouterBaseline>(d, w);
}

}  // namespace reference
