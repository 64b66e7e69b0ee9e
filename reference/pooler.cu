// pooler: out[B, H] = tanh(hidden[last token of each sequence] . W^T + bias).
//   reference: gather, pedantic fp32 GEMM into the fp32 output, bias+tanh in fp32;
//   baseline:  gather, cuBLAS GEMM with bf16 output, bias+tanh: three launches,
//              as a serving stack runs the pooler head.
#include <cuda_bf16.h>

#include "reference/cublas_util.h"
#include "reference/reference.h"

namespace reference {
namespace {

using detail::Cublas;
using detail::device_array;
using detail::DeviceArray;

constexpr int kThreads = 256;

// One block per sequence. Rows are copied 16 bytes at a time: H % 8 == 0 and
// bf16 tensors are 16-byte aligned, so every row starts on a 16-byte boundary.
__global__ void gather_last_tokens(const bf16* __restrict__ hidden, const int32_t* __restrict__ cu_seqlens, int H,
                                   bf16* __restrict__ pooled) {
  const int b = blockIdx.x;
  const uint4* src = reinterpret_cast<const uint4*>(hidden + size_t(cu_seqlens[b + 1] - 1) * H);
  uint4* dst = reinterpret_cast<uint4*>(pooled + size_t(b) * H);
  for (int i = threadIdx.x; i < H / 8; i += blockDim.x) dst[i] = src[i];
}

// In place on the fp32 GEMM result.
__global__ void bias_tanh_f32(float* __restrict__ out, const bf16* __restrict__ bias, int n, int H) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = tanhf(out[i] + __bfloat162float(bias[i % H]));
}

__global__ void bias_tanh_bf16(const bf16* __restrict__ in, const bf16* __restrict__ bias, int n, int H,
                               bf16* __restrict__ out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16_rn(tanhf(__bfloat162float(in[i]) + __bfloat162float(bias[i % H])));
}

void check_dims(const submission::PoolerDims& d) {
  detail::require(d.B >= 1 && d.H >= 8 && d.H % 8 == 0, "pooler: needs B >= 1, H >= 8, H % 8 == 0");
}

class PoolerRef final : public PoolerReference {
 public:
  PoolerRef(const submission::PoolerDims& d, const submission::PoolerWeights& w)
      : d_(d), w_(w), pooled_(device_array<bf16>(size_t(d.B) * d.H)) {}

  void run(const bf16* hidden, const int32_t* cu_seqlens, float* out, cudaStream_t stream) override {
    const int n = d_.B * d_.H;
    gather_last_tokens<<<d_.B, 128, 0, stream>>>(hidden, cu_seqlens, d_.H, pooled_.get());
    REF_CHECK_LAUNCH();
    detail::gemm_xwt(cublas_.bind(stream), d_.B, d_.H, d_.H, pooled_.get(), w_.W, CUDA_R_16BF, out, CUDA_R_32F,
                     CUBLAS_COMPUTE_32F_PEDANTIC);
    bias_tanh_f32<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream>>>(out, w_.bias, n, d_.H);
    REF_CHECK_LAUNCH();
  }

 private:
  submission::PoolerDims d_;
  submission::PoolerWeights w_;
  DeviceArray<bf16> pooled_;
  Cublas cublas_;
};

class PoolerBaseline final : public submission::Pooler {
 public:
  PoolerBaseline(const submission::PoolerDims& d, const submission::PoolerWeights& w)
      : d_(d),
        w_(w),
        pooled_(device_array<bf16>(size_t(d.B) * d.H)),
        gemm_out_(device_array<bf16>(size_t(d.B) * d.H)) {}

  void run(const submission::PoolerIO& io, cudaStream_t stream) override {
    const int n = d_.B * d_.H;
    gather_last_tokens<<<d_.B, 128, 0, stream>>>(io.hidden, io.cu_seqlens, d_.H, pooled_.get());
    REF_CHECK_LAUNCH();
    detail::gemm_xwt(cublas_.bind(stream), d_.B, d_.H, d_.H, pooled_.get(), w_.W, CUDA_R_16BF, gemm_out_.get(),
                     CUDA_R_16BF, CUBLAS_COMPUTE_32F);
    bias_tanh_bf16<<<(n + kThreads - 1) / kThreads, kThreads, 0, stream>>>(gemm_out_.get(), w_.bias, n, d_.H, io.out);
    REF_CHECK_LAUNCH();
  }

 private:
  submission::PoolerDims d_;
  submission::PoolerWeights w_;
  DeviceArray<bf16> pooled_, gemm_out_;
  Cublas cublas_;
};

}  // namespace

std::unique_ptr<PoolerReference> make_pooler_reference(const submission::PoolerDims& d,
                                                       const submission::PoolerWeights& w) {
  check_dims(d);
  return std::make_unique<PoolerRef>(d, w);
}

std::unique_ptr<submission::Pooler> make_pooler_baseline(const submission::PoolerDims& d,
                                                         const submission::PoolerWeights& w) {
  check_dims(d);
  return std::make_unique<PoolerBaseline>(d, w);
}

}  // namespace reference
