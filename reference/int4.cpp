#include "int4.h"

#include <stdexcept>

#include "bf16_host.h"

namespace ref {

std::vector<uint8_t> pack_int4(const std::vector<uint8_t>& codes, int rows, int cols) {
  if (cols % 2 != 0) throw std::invalid_argument("pack_int4: odd number of columns");
  if (codes.size() != static_cast<size_t>(rows) * cols)
    throw std::invalid_argument("pack_int4: codes size does not match rows*cols");
  std::vector<uint8_t> out(static_cast<size_t>(rows) * cols / 2);
  for (size_t i = 0; i < out.size(); ++i) {
    uint8_t lo = codes[2 * i], hi = codes[2 * i + 1];
    if (lo > 15 || hi > 15) throw std::invalid_argument("pack_int4: code out of range");
    out[i] = static_cast<uint8_t>(lo | (hi << 4));
  }
  return out;
}

std::vector<double> dequant_int4(const uint8_t* packed, const uint16_t* scales, int rows, int cols) {
  if (cols % kGroupSize != 0) throw std::invalid_argument("dequant_int4: cols % 128 != 0");
  const int groups = cols / kGroupSize;
  std::vector<double> w(static_cast<size_t>(rows) * cols);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* row = packed + static_cast<size_t>(r) * (cols / 2);
    for (int k = 0; k < cols; ++k) {
      double s = bf16_to_float(scales[static_cast<size_t>(r) * groups + k / kGroupSize]);
      w[static_cast<size_t>(r) * cols + k] = (int4_code(row, k) - 8) * s;
    }
  }
  return w;
}

}  // namespace ref
