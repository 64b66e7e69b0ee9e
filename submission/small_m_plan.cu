#include "submission/small_m_plan.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace submission::small_m {

void validate_small_m(int M, int N, int K) {
  if (M < 1 || N < 1 || K < 8 || K % 8 != 0)
    throw std::invalid_argument("small-M GEMM: need M >= 1, N >= 1, K >= 8, K % 8 == 0 (got M=" + std::to_string(M) +
                                " N=" + std::to_string(N) + " K=" + std::to_string(K) + ")");
}

DirectShape direct_shape(int M, int N, int K, int sms, int max_rt) {
  const long long tiles = (N + 15) / 16;
  const int max_ng = std::min(4, (M + 7) / 8);
  DirectShape best{max_ng, 1, 0};
  double best_bytes = 1e300;
  for (int ng = max_ng; ng >= 1; --ng)
    for (int rt = 1; rt <= max_rt; ++rt) {
      const long long blocks = (tiles + rt - 1) / rt * ((M + 8 * ng - 1) / (8 * ng));
      const double rows = 16.0 * std::min<long long>(rt, tiles) + std::min(8 * ng, M);
      const double bytes = double((blocks + sms - 1) / sms) * rows * K * 2;
      if (bytes < best_bytes) best = {ng, rt, blocks}, best_bytes = bytes;
    }
  return best;
}

bool direct_tiles_one_wave(int M, int N, int K, int sms) {
  if (M < 1 || N < 1 || K < 8) return false;
  return direct_shape(M, N, K, sms, kDirectMaxTiles).blocks <= sms;
}

DirectPlan plan_direct(int M, int N, int K, const bf16* W, const DirectLayout& layout) {
  validate_small_m(M, N, K);
  DirectPlan p;
  const DirectShape shape = direct_shape(M, N, K, device_sm_count(), layout.max_tiles);
  p.ng = shape.ng;
  p.rt = shape.rt;
  p.m_chunks = (M + 8 * p.ng - 1) / (8 * p.ng);
  if (p.m_chunks > 65535) throw std::invalid_argument("small-M GEMM: M too large");
  p.strides = direct::tile_strides(layout.order, N, K, layout.rot_parts, p.rt, kDirectWarps);
  p.packed = direct::pack_tiles(W, N, K, p.strides);
  return p;
}

}  // namespace submission::small_m
