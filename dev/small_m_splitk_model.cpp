#include "dev/small_m_splitk_model.h"

#include <algorithm>
#include <cstdint>

namespace submission::small_m {

double estimate_us(const ConfigCost& c, int splits, int M, int N, int K, int ng, int sms, const Machine& mc) {
  const int n_tiles = (N + c.rows - 1) / c.rows;
  const int k_stages = (K + c.stage_k - 1) / c.stage_k;
  const int m_chunks = (M + 8 * ng - 1) / (8 * ng);
  const double w_stage = double(c.rows) * c.stage_k * 2;
  const double x_stage = 8.0 * ng * c.stage_k * 2;
  const int st_unit = (k_stages + splits - 1) / splits;
  const double w_unit = st_unit * w_stage;
  const double in_flight = std::min(c.stages - 1, st_unit) * w_stage;
  const int64_t units = int64_t(n_tiles) * splits * m_chunks;
  const int64_t slots = int64_t(sms) * c.blocks_per_sm;
  double t = 0;
  for (int64_t left = units; left > 0;) {
    const int64_t a = std::min(left, slots);
    const double bw = std::min(mc.hbm_bytes_per_us, a * in_flight / mc.latency_us);
    t += mc.latency_us + a * w_unit / bw;
    left -= a;
  }
  double l2_bytes = double(units) * st_unit * (w_stage + x_stage);
  if (splits > 1) l2_bytes += 2.0 * splits * m_chunks * 8.0 * ng * n_tiles * c.rows * 4;
  t = std::max(t, l2_bytes / mc.l2_bytes_per_us);
  if (splits > 1) t += mc.fixup_us;
  return t;
}
}  // namespace submission::small_m
