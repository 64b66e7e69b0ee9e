// Weight quantizers of the kind a submission could apply in prepare() to read
// fewer bytes: int8 with one bf16 scale per group of 8 or 16 weights or per
// row, and fp8 e4m3 with one fp32 scale per row. Host code, shared by the
// precision simulation (tests/cpu_precision.cpp) and the quantized bad kernels
// (quantized_*.cu), so both see the very same dequantized weights.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "reference/bf16_host.h"

namespace quant {

enum class Scheme { none, int8_g8, int8_g16, int8_row, fp8_row };
constexpr Scheme kQuantized[] = {Scheme::int8_g8, Scheme::int8_g16, Scheme::int8_row, Scheme::fp8_row};

inline const char* name(Scheme s) {
  switch (s) {
    case Scheme::none:
      return "none";
    case Scheme::int8_g8:
      return "int8_g8";
    case Scheme::int8_g16:
      return "int8_g16";
    case Scheme::int8_row:
      return "int8_row";
    case Scheme::fp8_row:
      return "fp8_row";
  }
  return "?";
}

// e4m3 (1 sign, 4 exponent bits of bias 7, 3 mantissa bits, no infinities):
// round to nearest even, saturating at 448, subnormals below 2^-6.
inline float e4m3_round(float v) {
  const float a = std::min(std::fabs(v), 448.0f);
  if (a == 0) return 0.0f;
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const float quantum = std::ldexp(1.0f, std::max(e - 1, -6) - 3);
  return std::copysign(std::min(std::nearbyint(a / quantum) * quantum, 448.0f), v);
}
inline uint8_t e4m3_bits(float v) {
  const float r = std::fabs(e4m3_round(v));
  uint8_t b = 0;
  if (r >= 0x1.0p-6f) {
    int e;
    const float m = std::frexp(r, &e);  // r = m * 2^e
    b = uint8_t(((e - 1 + 7) << 3) | (int(std::lround(m * 16)) - 8));
  } else {
    b = uint8_t(std::lround(r * 512.0f));  // subnormal: r = mantissa * 2^-9
  }
  return uint8_t(b | (std::signbit(v) ? 0x80 : 0));
}
inline float e4m3_value(uint8_t b) {
  const int e = (b >> 3) & 0xf, m = b & 7;
  const float a = e ? std::ldexp(1.0f + m / 8.0f, e - 7) : std::ldexp(float(m), -9);
  return (b & 0x80) ? -a : a;
}

// A [rows, cols] matrix quantized along its rows (the reduction dim): code i
// of row r stands for lut[codes[r * cols + i]] * scales[r * (cols / group) + i / group].
struct Quantized {
  Scheme scheme = Scheme::none;
  int rows = 0, cols = 0, group = 0;
  std::vector<uint8_t> codes;
  std::vector<float> scales;
  std::array<float, 256> lut{};  // code -> value before scaling
  float value(size_t r, size_t c) const { return lut[codes[r * cols + c]] * scales[r * (cols / group) + c / group]; }
};

// W: bf16 bit patterns, row-major. int8 scales are absmax/127 rounded to bf16
// (a bf16 scale per group); fp8 scales absmax/448 in fp32.
inline Quantized quantize(const uint16_t* W, int rows, int cols, Scheme s) {
  if (s == Scheme::none) throw std::invalid_argument("quantize: scheme none");
  Quantized q;
  q.scheme = s;
  q.rows = rows;
  q.cols = cols;
  q.group = s == Scheme::int8_g8 ? 8 : s == Scheme::int8_g16 ? 16 : cols;
  if (cols % q.group) throw std::invalid_argument("quantize: cols not a multiple of the group");
  const bool fp8 = s == Scheme::fp8_row;
  for (int c = 0; c < 256; ++c) q.lut[c] = fp8 ? e4m3_value(uint8_t(c)) : float(int8_t(uint8_t(c)));
  q.codes.resize(size_t(rows) * cols);
  q.scales.resize(size_t(rows) * (cols / q.group));
  for (size_t g = 0; g < q.scales.size(); ++g) {
    const size_t first = g * q.group;
    float absmax = 0;
    for (int i = 0; i < q.group; ++i) absmax = std::max(absmax, std::fabs(ref::bf16_to_float(W[first + i])));
    float scale = fp8 ? absmax / 448.0f : ref::bf16_to_float(ref::float_to_bf16(absmax / 127.0f));
    if (scale == 0) scale = 1;
    q.scales[g] = scale;
    for (int i = 0; i < q.group; ++i) {
      const float x = ref::bf16_to_float(W[first + i]) / scale;
      q.codes[first + i] = fp8 ? e4m3_bits(x) : uint8_t(int8_t(std::clamp(std::nearbyint(x), -127.0f, 127.0f)));
    }
  }
  return q;
}

}  // namespace quant
