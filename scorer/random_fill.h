// Seeded random tensors drawn on the device: counter-based (each element a hash
// of the seed and its index), so a tensor is the same for the same seed on any
// run, and drawing gigabytes of weights takes milliseconds.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace scorer {

void fill_normal_bf16(__nv_bfloat16* p, size_t n, uint64_t seed, float sd, cudaStream_t s);
void fill_uniform_bf16(__nv_bfloat16* p, size_t n, uint64_t seed, float lo, float hi, cudaStream_t s);
void fill_random_bytes(uint8_t* p, size_t n, uint64_t seed, cudaStream_t s);  // each nibble uniform 0..15

// splitmix64, the mixing step used for every seed derivation on the host too.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline uint64_t derive_seed(uint64_t seed, uint64_t tag) { return mix64(seed ^ mix64(tag)); }
uint64_t hash_string(const char* s);  // FNV-1a, to derive a shape's seed from its name

}  // namespace scorer
