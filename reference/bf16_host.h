// bf16 on the host as raw 16-bit patterns, so that CPU-only code (the fp64
// references, the checks, the tests) needs no CUDA headers.
#pragma once

#include <cstdint>
#include <cstring>

namespace ref {

inline float bf16_to_float(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Round to nearest, ties to even, as the device's __float2bfloat16 does.
// NaN stays NaN.
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline double round_to_bf16(double x) { return bf16_to_float(float_to_bf16(static_cast<float>(x))); }

}  // namespace ref
