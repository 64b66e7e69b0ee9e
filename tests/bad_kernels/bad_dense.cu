#include "tests/bad_kernels/bad_dense.h"

#include <map>
#include <stdexcept>

namespace bad_kernels {
namespace {

using submission::bf16;

__global__ void naive_dense(const bf16* X, const bf16* W, bf16* out, int M, int N, int K, int skip_last) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= M * N - skip_last) return;
  const int m = i / N, n = i % N;
  float acc = 0;
  for (int k = 0; k < K; ++k) acc += __bfloat162float(X[size_t(m) * K + k]) * __bfloat162float(W[size_t(n) * K + k]);
  out[i] = __float2bfloat16_rn(acc);
}

__global__ void write_one(bf16* p) { *p = __float2bfloat16_rn(1.0f); }
__global__ void trap_kernel() { __trap(); }
__global__ void hang_kernel(volatile int* never_set) {
  while (*never_set == 0) {
  }
}

class BadDense final : public submission::Dense {
 public:
  BadDense(const submission::DenseDims& d, const submission::DenseWeights& w, Misbehaviour m) : d_(d), w_(w), m_(m) {
    if (cudaMalloc(&zero_, sizeof(int)) != cudaSuccess || cudaMemset(zero_, 0, sizeof(int)) != cudaSuccess ||
        cudaMalloc(&cache_, size_t(d.M) * d.N * sizeof(bf16)) != cudaSuccess ||
        cudaStreamCreateWithFlags(&own_, cudaStreamNonBlocking) != cudaSuccess)
      throw std::runtime_error("bad_dense: prepare failed");
  }
  ~BadDense() override {
    cudaFree(zero_);
    cudaFree(cache_);
    cudaStreamDestroy(own_);
  }

  void run(const submission::DenseIO& io, cudaStream_t s) override {
    const int n = d_.M * d_.N, threads = 128, blocks = (n + threads - 1) / threads;
    auto gemm = [&](bf16* out, cudaStream_t on, int skip) {
      naive_dense<<<blocks, threads, 0, on>>>(io.X, w_.W, out, d_.M, d_.N, d_.K, skip);
    };
    switch (m_) {
      case Misbehaviour::none:
        gemm(io.out, s, 0);
        break;
      case Misbehaviour::illegal_address:
        write_one<<<1, 1, 0, s>>>(io.out + (size_t(1) << 40));
        break;
      case Misbehaviour::trap:
        trap_kernel<<<1, 1, 0, s>>>();
        break;
      case Misbehaviour::hang:
        hang_kernel<<<1, 1, 0, s>>>(zero_);
        break;
      case Misbehaviour::own_stream:
        gemm(io.out, own_, 0);
        break;
      case Misbehaviour::cached_result:
        if (!cached_) gemm(cache_, s, 0);
        cached_ = true;
        cudaMemcpyAsync(io.out, cache_, size_t(n) * sizeof(bf16), cudaMemcpyDeviceToDevice, s);
        break;
      case Misbehaviour::partial_write:
        gemm(io.out, s, 1);
        break;
      case Misbehaviour::write_past_end:
        gemm(io.out, s, 0);
        write_one<<<1, 1, 0, s>>>(io.out + n);
        break;
      case Misbehaviour::device_sync:
        gemm(io.out, s, 0);
        cudaDeviceSynchronize();
        break;
    }
  }

 private:
  submission::DenseDims d_;
  submission::DenseWeights w_;
  Misbehaviour m_;
  int* zero_ = nullptr;
  bf16* cache_ = nullptr;
  bool cached_ = false;
  cudaStream_t own_ = nullptr;
};

}  // namespace

bool parse_misbehaviour(const std::string& name, Misbehaviour* m) {
  static const std::map<std::string, Misbehaviour> names = {{"none", Misbehaviour::none},
                                                            {"illegal_address", Misbehaviour::illegal_address},
                                                            {"trap", Misbehaviour::trap},
                                                            {"hang", Misbehaviour::hang},
                                                            {"own_stream", Misbehaviour::own_stream},
                                                            {"cached_result", Misbehaviour::cached_result},
                                                            {"partial_write", Misbehaviour::partial_write},
                                                            {"write_past_end", Misbehaviour::write_past_end},
                                                            {"device_sync", Misbehaviour::device_sync}};
  auto it = names.find(name);
  if (it == names.end()) return false;
  *m = it->second;
  return true;
}

std::unique_ptr<submission::Dense> make_bad_dense(const submission::DenseDims& dims, const submission::DenseWeights& w,
                                                  Misbehaviour m) {
  return std::make_unique<BadDense>(dims, w, m);
}

}  // namespace bad_kernels
