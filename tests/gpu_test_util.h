// Small helpers for the GPU suites: device buffers that poison themselves,
// random host data, and CUDA error checks that fail the test case.
#pragma once

#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cstdlib>

#include "dev/variants.h"
#include "reference/bf16_host.h"

namespace gpu_test {

// The variants a test runs for op: every one (dev/variants.h), or only "default" where the
// environment sets GPU_TESTS_DEFAULT_ONLY (make sanitize: the tools run kernels 10-100x slower).
inline std::vector<std::string> variants_under_test(const std::string& op) {
  if (std::getenv("GPU_TESTS_DEFAULT_ONLY")) return {"default"};
  return submission::dev::variants(op);
}

inline bool gpu_available(std::string* why) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = std::string("no usable CUDA device (") + cudaGetErrorString(e) + ")";
    return false;
  }
  if (n == 0) {
    *why = "no CUDA device";
    return false;
  }
  return true;
}

#define GT_CUDA(call)                                                                      \
  do {                                                                                     \
    cudaError_t e_ = (call);                                                               \
    REQUIRE_MESSAGE(e_ == cudaSuccess, #call ": " << std::string(cudaGetErrorString(e_))); \
  } while (0)

// A device copy of a host vector, freed on scope exit.
template <class T>
struct DeviceBuffer {
  T* ptr = nullptr;
  size_t n = 0;
  explicit DeviceBuffer(size_t count) : n(count) { GT_CUDA(cudaMalloc(&ptr, bytes() ? bytes() : 1)); }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() { cudaFree(ptr); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  size_t bytes() const { return n * sizeof(T); }
  void upload(const std::vector<T>& host) { GT_CUDA(cudaMemcpy(ptr, host.data(), bytes(), cudaMemcpyHostToDevice)); }
  std::vector<T> download() const {
    std::vector<T> h(n);
    GT_CUDA(cudaMemcpy(h.data(), ptr, bytes(), cudaMemcpyDeviceToHost));
    return h;
  }
  // Every byte 0xff: NaN as bf16 and fp32, -1 as int32, so unwritten output shows.
  void poison() { GT_CUDA(cudaMemset(ptr, 0xff, bytes())); }
};

// Syncs and requires that nothing failed since the last check.
inline void sync_and_check(const char* what) {
  cudaError_t launch = cudaGetLastError();
  cudaError_t sync = cudaDeviceSynchronize();
  REQUIRE_MESSAGE(launch == cudaSuccess, (std::string(what) + ": " + cudaGetErrorString(launch)));
  REQUIRE_MESSAGE(sync == cudaSuccess, (std::string(what) + ": " + cudaGetErrorString(sync)));
}

// bf16 bit patterns of N(0, sd^2) values.
inline std::vector<uint16_t> random_bf16(size_t n, std::mt19937_64& rng, double sd = 1.0) {
  std::normal_distribution<float> d(0.0f, float(sd));
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = ref::float_to_bf16(d(rng));
  return v;
}

}  // namespace gpu_test
