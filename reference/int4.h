// The int4 weight format of moe_w4a16 (see submission/submission.h):
// symmetric codes q in [0, 15], w = (q - 8) * s, two codes per byte along the
// reduction dim, low nibble first, one bf16 scale per (row, group of 128).
#pragma once

#include <cstdint>
#include <vector>

namespace ref {

constexpr int kGroupSize = 128;

// Code of element k of a row of packed bytes.
inline int int4_code(const uint8_t* row, int k) {
  uint8_t b = row[k >> 1];
  return (k & 1) ? (b >> 4) : (b & 0xf);
}

// Packs codes[rows, cols] (each 0..15) into bytes[rows, cols/2]. cols is even.
std::vector<uint8_t> pack_int4(const std::vector<uint8_t>& codes, int rows, int cols);

// Dequantizes one packed matrix [rows, cols/2] with scales [rows, cols/128]
// (bf16 bit patterns) to double.
std::vector<double> dequant_int4(const uint8_t* packed, const uint16_t* scales, int rows, int cols);

}  // namespace ref
