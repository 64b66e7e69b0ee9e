// The quantized bad kernels' shared parts: the weights quantized on the host
// (tests/bad_kernels/quantize.h) and held on the device, and one GEMM with a
// warp per output, out[m, n] = epilogue(n, sum_k X[row(m), k] * w(n, k)).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "tests/bad_kernels/quantize.h"

namespace bad_kernels {

inline void cuda_or_throw(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("quantized kernel: ") + what + ": " + cudaGetErrorString(e));
}

template <class T>
T* upload(const std::vector<T>& v) {
  T* p = nullptr;
  cuda_or_throw(cudaMalloc(&p, v.size() * sizeof(T)), "cudaMalloc");
  cuda_or_throw(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  return p;
}

// A [rows, cols] bf16 matrix on the device, quantized in prepare: its codes,
// scales and code table on the device; Scheme::none keeps reading the bf16.
struct QuantizedWeights {
  const __nv_bfloat16* exact = nullptr;  // Scheme::none
  uint8_t* codes = nullptr;
  float* scales = nullptr;
  float* lut = nullptr;
  int group = 0;

  QuantizedWeights(const __nv_bfloat16* W, int rows, int cols, quant::Scheme scheme) {
    if (scheme == quant::Scheme::none) {
      exact = W;
      return;
    }
    std::vector<uint16_t> host(size_t(rows) * cols);
    cuda_or_throw(cudaMemcpy(host.data(), W, host.size() * 2, cudaMemcpyDeviceToHost), "download");
    const quant::Quantized q = quant::quantize(host.data(), rows, cols, scheme);
    codes = upload(q.codes);
    scales = upload(q.scales);
    lut = upload(std::vector<float>(q.lut.begin(), q.lut.end()));
    group = q.group;
  }
  ~QuantizedWeights() {
    cudaFree(codes);
    cudaFree(scales);
    cudaFree(lut);
  }
  QuantizedWeights(const QuantizedWeights&) = delete;
  QuantizedWeights& operator=(const QuantizedWeights&) = delete;
};

struct QuantizedArgs {
  const __nv_bfloat16* exact;
  const uint8_t* codes;
  const float* scales;
  const float* lut;
  int group;
};

// Row `m` of the activations: dense X[m]; pooler the last token of sequence m.
// Epilogue: dense none; pooler tanh(acc + bias[n]).
template <bool kPooler>
__global__ void quantized_gemm(const __nv_bfloat16* __restrict__ X, const int32_t* __restrict__ cu_seqlens, int M,
                               int N, int K, QuantizedArgs w, const __nv_bfloat16* __restrict__ bias,
                               __nv_bfloat16* __restrict__ out) {
  const long warp = (long(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (warp >= long(M) * N) return;
  const int m = int(warp / N), n = int(warp % N);
  const __nv_bfloat16* x = X + size_t(kPooler ? cu_seqlens[m + 1] - 1 : m) * K;
  float acc = 0;
  for (int k = lane; k < K; k += 32) {
    const size_t i = size_t(n) * K + k;
    const float wv =
        w.exact ? __bfloat162float(w.exact[i]) : w.lut[w.codes[i]] * w.scales[size_t(n) * (K / w.group) + k / w.group];
    acc += __bfloat162float(x[k]) * wv;
  }
  for (int o = 16; o; o /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, o);
  if (lane == 0) out[size_t(m) * N + n] = __float2bfloat16_rn(kPooler ? tanhf(acc + __bfloat162float(bias[n])) : acc);
}

template <bool kPooler>
void launch_quantized_gemm(const __nv_bfloat16* X, const int32_t* cu_seqlens, int M, int N, int K,
                           const QuantizedWeights& w, const __nv_bfloat16* bias, __nv_bfloat16* out, cudaStream_t s) {
  constexpr int kThreads = 256;
  const long warps = long(M) * N;
  const unsigned blocks = unsigned((warps * 32 + kThreads - 1) / kThreads);
  quantized_gemm<kPooler><<<blocks, kThreads, 0, s>>>(
      X, cu_seqlens, M, N, K, QuantizedArgs{w.exact, w.codes, w.scales, w.lut, w.group}, bias, out);
}

}  // namespace bad_kernels
