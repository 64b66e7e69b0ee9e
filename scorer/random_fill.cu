#include "scorer/random_fill.h"

#include "scorer/cuda_check.h"

namespace scorer {
namespace {

__device__ __forceinline__ uint64_t dmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// 24-bit uniform in (0, 1): never 0, so log() below is finite.
__device__ __forceinline__ float uniform01(uint64_t bits) {
  return (float((bits >> 40) & 0xffffff) + 0.5f) * (1.0f / 16777216.0f);
}

__global__ void normal_bf16_kernel(__nv_bfloat16* p, size_t n, uint64_t seed, float sd) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t h = dmix64(seed ^ dmix64(i));
    float u1 = uniform01(h), u2 = uniform01(h << 24);
    float z = sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2);  // Box-Muller
    p[i] = __float2bfloat16_rn(z * sd);
  }
}

__global__ void uniform_bf16_kernel(__nv_bfloat16* p, size_t n, uint64_t seed, float lo, float hi) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = __float2bfloat16_rn(lo + (hi - lo) * uniform01(dmix64(seed ^ dmix64(i))));
}

__global__ void bytes_kernel(uint8_t* p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    p[i] = uint8_t(dmix64(seed ^ dmix64(i)) >> 32);
}

constexpr int kThreads = 256;
unsigned grid_for(size_t n) { return unsigned(std::min<size_t>((n + kThreads - 1) / kThreads, 132 * 16)); }

}  // namespace

void fill_normal_bf16(__nv_bfloat16* p, size_t n, uint64_t seed, float sd, cudaStream_t s) {
  if (!n) return;
  normal_bf16_kernel<<<grid_for(n), kThreads, 0, s>>>(p, n, seed, sd);
  SCORER_CUDA(cudaGetLastError());
}

void fill_uniform_bf16(__nv_bfloat16* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t s) {
  if (!n) return;
  uniform_bf16_kernel<<<grid_for(n), kThreads, 0, s>>>(p, n, seed, lo, hi);
  SCORER_CUDA(cudaGetLastError());
}

void fill_random_bytes(uint8_t* p, size_t n, uint64_t seed, cudaStream_t s) {
  if (!n) return;
  bytes_kernel<<<grid_for(n), kThreads, 0, s>>>(p, n, seed);
  SCORER_CUDA(cudaGetLastError());
}

uint64_t hash_string(const char* s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; ++s) h = (h ^ uint8_t(*s)) * 0x100000001b3ull;
  return h;
}

}  // namespace scorer
