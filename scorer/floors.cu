#include "scorer/floors.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <string>
#include <vector>

#include "scorer/random_fill.h"
#include "scorer/stats.h"

namespace scorer {
namespace {

// Each thread keeps four independent 16-byte loads in flight per step; the
// loads bypass L1 (streaming) and their XOR is stored only if it equals a value
// no input produces, so the compiler cannot drop them and nothing is written.
__global__ void stream_read_kernel(const uint4* __restrict__ p, size_t n16, const uint8_t* tail, size_t tail_bytes,
                                   unsigned* sink) {
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  unsigned acc = 0;
  for (; i + 3 * stride < n16; i += 4 * stride) {
    uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride), d = __ldcs(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n16; i += stride) {
    uint4 a = __ldcs(p + i);
    acc ^= a.x ^ a.y ^ a.z ^ a.w;
  }
  const size_t t = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (t < tail_bytes) acc ^= tail[t];
  if (acc == 0x9e3779b9u && sink) *sink = acc;
}

void check_cublas(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": " + cublasGetStatusString(s));
}

}  // namespace

double measure_read_floor_us(size_t bytes, const DeviceBuffer& buffer, ColdTimer& timer, int reps) {
  int dev = 0, sms = 0;
  SCORER_CUDA(cudaGetDevice(&dev));
  SCORER_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const size_t n16 = bytes / 16;
  const uint8_t* tail = buffer.as<uint8_t>() + n16 * 16;
  const size_t tail_bytes = bytes % 16;
  double best = 1e30;
  for (int threads : {256, 512, 1024}) {
    for (int per_sm : {1, 2, 4, 8}) {
      if (threads * per_sm > 2048) continue;
      // No more threads than 16-byte words: tiny reads use one small block.
      const size_t want = std::max<size_t>(1, (n16 + threads - 1) / threads);
      const unsigned blocks = unsigned(std::min<size_t>(size_t(sms) * per_sm, want));
      auto launch = [&] {
        stream_read_kernel<<<blocks, threads, 0, timer.stream()>>>(buffer.as<uint4>(), n16, tail, tail_bytes, nullptr);
      };
      launch();  // untimed: a first launch cannot be enqueued behind the hold
      SCORER_CUDA(cudaStreamSynchronize(timer.stream()));
      std::vector<double> t;
      for (int r = 0; r < reps; ++r) t.push_back(timer.time_us(launch));
      best = std::min(best, median(t));
    }
  }
  return best;
}

double measure_copy_gbps(cudaStream_t stream) {
  const size_t bytes = size_t(1) << 30;
  DeviceBuffer a(bytes), b(bytes);
  fill_random_bytes(a.as<uint8_t>(), bytes, 1, stream);
  cudaEvent_t e0, e1;
  SCORER_CUDA(cudaEventCreate(&e0));
  SCORER_CUDA(cudaEventCreate(&e1));
  std::vector<double> gbps;
  for (int r = 0; r < 11; ++r) {
    SCORER_CUDA(cudaEventRecord(e0, stream));
    SCORER_CUDA(cudaMemcpyAsync(b.as<uint8_t>(), a.as<uint8_t>(), bytes, cudaMemcpyDeviceToDevice, stream));
    SCORER_CUDA(cudaEventRecord(e1, stream));
    SCORER_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    SCORER_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (r > 0) gbps.push_back(2.0 * bytes / (ms * 1e-3) / 1e9);  // the first is a warm-up
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return median(gbps);
}

double measure_matrix_tflops(cudaStream_t stream) {
  const int n = 8192;
  const size_t elems = size_t(n) * n;
  DeviceBuffer a(elems * 2), b(elems * 2), c(elems * 2);
  fill_normal_bf16(a.as<__nv_bfloat16>(), elems, 2, 1.0f, stream);
  fill_normal_bf16(b.as<__nv_bfloat16>(), elems, 3, 1.0f, stream);
  cublasHandle_t h;
  check_cublas(cublasCreate(&h), "cublasCreate");
  check_cublas(cublasSetStream(h, stream), "cublasSetStream");
  cudaEvent_t e0, e1;
  SCORER_CUDA(cudaEventCreate(&e0));
  SCORER_CUDA(cudaEventCreate(&e1));
  const float alpha = 1, beta = 0;
  std::vector<double> tflops;
  for (int r = 0; r < 11; ++r) {
    SCORER_CUDA(cudaEventRecord(e0, stream));
    check_cublas(
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.as<void>(), CUDA_R_16BF, n, b.as<void>(),
                     CUDA_R_16BF, n, &beta, c.as<void>(), CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
    SCORER_CUDA(cudaEventRecord(e1, stream));
    SCORER_CUDA(cudaEventSynchronize(e1));
    float ms = 0;
    SCORER_CUDA(cudaEventElapsedTime(&ms, e0, e1));
    if (r > 0) tflops.push_back(2.0 * n * n * double(n) / (ms * 1e-3) / 1e12);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cublasDestroy(h);
  return median(tflops);
}

}  // namespace scorer
