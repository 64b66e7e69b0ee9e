#include "submission/moe_plan.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace submission::moe {
namespace {

// What the model weighs bytes with. HBM: the H200's streaming rate; the
// loaded memory latency that bytes in flight must cover; activations re-read
// per work unit come from L2, which sustains a few times the HBM rate.
constexpr double kHbmBytesPerUs = 4.0e6;
constexpr double kHbmLatencyUs = 1.5;
constexpr double kL2BytesPerUs = 10.0e6;

}  // namespace

double moe_route_density(int M, int k, int E_global) { return double(M) * k / E_global; }

int moe_block_tokens(int M, int k, int E_global) {
  const double lambda = moe_route_density(M, k, E_global);
  // An expert never gets more routes than there are tokens (ids are distinct per token).
  const double want = std::min(lambda + 3.0 * std::sqrt(lambda), double(M));
  for (int b : {8, 16, 32})
    if (want <= b) return b;
  return 64;
}

int moe_max_blocks(int M, int k, int E_local, int block_tokens) {
  const long long routes = (long long)M * k;
  return int(std::min<long long>(routes, E_local) + routes / block_tokens);
}

void validate_moe_dims(const MoeDims& d) {
  const DimsError e = dims_error(d);
  if (!e.field.empty()) throw std::invalid_argument("moe_w4a16: field " + e.field + ": " + e.why);
  // The alignment kernel ranks routes with a [warps][E_local] table in shared memory
  // (moe_align.cuh); this bounds it below the 227 KB a block may use.
  if (d.E_local > 2048) throw std::invalid_argument("moe_w4a16: E_local above 2048 is not supported");
  if ((long long)d.M * d.k * std::max(d.H, d.I) >= (1ll << 40))
    throw std::invalid_argument("moe_w4a16: M*k*max(H, I) too large for the workspaces");
  if ((long long)d.M * d.k >= (1ll << 30)) throw std::invalid_argument("moe_w4a16: M*k too large");
}

namespace {

// Uniform routing: the expected number of blocks, and of routes per touched expert.
struct ExpectedRouting {
  double blocks = 0, per_expert = 0;
};
ExpectedRouting expected_routing(const MoeDims& d, int block_tokens) {
  const double routes = double(d.M) * d.k * d.E_local / d.E_global;
  const double touched = d.E_local * (1.0 - std::pow(1.0 - double(d.k) / d.E_global, d.M));
  if (touched <= 0 || routes <= 0) return {};
  const double per_expert = std::max(1.0, routes / touched);
  return {touched * std::ceil(per_expert / block_tokens), per_expert};
}

}  // namespace

double moe_gemm_cost_us(const MoeDims& d, int block_tokens, int rows, int K, int tile_rows, int sm_count,
                        int ctas_per_sm) {
  const ExpectedRouting r = expected_routing(d, block_tokens);
  if (r.blocks <= 0) return 0;
  const double units = r.blocks * rows / tile_rows;
  const int tiles = tile_rows / kTileRows;
  const double grid = std::min<double>(double(sm_count) * ctas_per_sm,
                                       double(moe_max_blocks(d.M, d.k, d.E_local, block_tokens)) * rows / tile_rows);
  const double unit_bytes = double(tile_rows) * K * (0.5 + 2.0 / kGroup);
  const double cta_in_flight =
      double(mma_stages(block_tokens, tiles, ctas_per_sm) - 1) * tiles * (kTileGroupBytes + kTileGroupScaleWords * 4);
  double us = 0;
  for (double left = units; left > 0; left -= grid) {
    const double active = std::min(grid, left);
    us += active * unit_bytes / std::min(kHbmBytesPerUs, active * cta_in_flight / kHbmLatencyUs);
  }
  const double act_bytes = units * std::min<double>(r.per_expert, block_tokens) * K * 2;
  return us + act_bytes / kL2BytesPerUs;
}

double moe_expected_blocks(const MoeDims& d, int block_tokens) { return expected_routing(d, block_tokens).blocks; }

int moe_model_tile_rows(const MoeDims& d, int block_tokens, int rows, int K, int sm_count, int ctas_per_sm) {
  if (!moe_rows128_fit(block_tokens)) return 64;
  return moe_cheaper_tile_rows(moe_gemm_cost_us(d, block_tokens, rows, K, 64, sm_count, ctas_per_sm),
                               moe_gemm_cost_us(d, block_tokens, rows, K, 128, sm_count, ctas_per_sm));
}

int moe_down_splits(const MoeDims& d, int block_tokens, int tile_rows, int resident_ctas) {
  const int groups = d.I / kGroup;
  const double units = expected_routing(d, block_tokens).blocks * d.H / tile_rows;
  if (units >= resident_ctas) return 1;  // no CTA idles: a split would only move the last wave's edge
  auto busiest = [&](int s) { return std::ceil(units * s / resident_ctas) * (groups / s + kUnitEndStages); };
  int best = 1;
  for (int s = 2; s <= groups / kMinGroupsPerSplit; ++s)
    if (groups % s == 0 && busiest(s) < busiest(best)) best = s;
  // The smallest split within kSplitTolerance of the best: the expected units
  // are fractional and a real routing moves them by a few percent, so a
  // smaller gap is wave quantisation the model cannot promise.
  for (int s = 1; s < best; ++s)
    if (groups % s == 0 && groups / s >= kMinGroupsPerSplit && busiest(s) <= (1 + kSplitTolerance) * busiest(best))
      return s;
  return best;
}

bool moe_defer_combine(const MoeDims& d, double units, int row_groups, int resident_ctas) {
  return units > resident_ctas || double(d.M) * row_groups > units;
}

void plan_moe_tile_rows(const MoeDims& d, int sm_count, MoePlan& p) {
  const bool rows128 = moe_rows128_fit(p.block_tokens);
  p.tile_rows_up =
      rows128 && p.stream_k_up ? 128 : moe_model_tile_rows(d, p.block_tokens, 2 * d.I, d.H, sm_count, p.ctas_up);
  // dsv3 M=8's GEMM 2 (448 units of 128 rows) ran 69.5 -> 64.1 us at 128 rows,
  // where the model had taken 64 (round 26).
  const int resident = sm_count * p.ctas_down;
  const bool down_fills_at_128 = moe_expected_blocks(d, p.block_tokens) * d.H / 128 >= resident ||
                                 moe_down_splits(d, p.block_tokens, 128, resident) > 1;
  p.tile_rows_down =
      rows128 && down_fills_at_128 ? 128 : moe_model_tile_rows(d, p.block_tokens, d.H, d.I, sm_count, p.ctas_down);
}

void plan_moe_down_split(const MoeDims& d, int sm_count, MoePlan& p) {
  const int resident = sm_count * p.ctas_down, row_groups = d.H / p.tile_rows_down;
  p.splits_down = moe_down_splits(d, p.block_tokens, p.tile_rows_down, resident);
  const double units = moe_expected_blocks(d, p.block_tokens) * row_groups * p.splits_down;
  p.deferred_combine = moe_defer_combine(d, units, row_groups, resident);
}

void plan_moe_schedule(const MoeDims& d, int sm_count, MoePlan& p) {
  const double blocks = moe_expected_blocks(d, p.block_tokens);
  const int resident_down = sm_count * p.ctas_down;
  p.queue_down = blocks * (d.H / p.tile_rows_down) * p.splits_down >= kQueueDownMinWaves * resident_down;
  p.h_flags = blocks * (2.0 * d.I / p.tile_rows_up) >= double(sm_count) * p.ctas_up;
  p.rotate_up = !p.stream_k_up;
  p.cta_align =
      d.M * d.k <= kAlignWarpRoutes && aligned_routes_ints(d.M, p.block_tokens, p.max_blocks) <= kCtaRoutingMaxInts;
}

MoePlan plan_moe(const MoeDims& d, const std::string& variant, int sm_count) {
  validate_moe_dims(d);
  if (variant != "default" && variant != "gemv")
    throw std::invalid_argument("moe_w4a16: unknown variant '" + variant + "'");
  MoePlan p;
  p.block_tokens = moe_block_tokens(d.M, d.k, d.E_global);
  p.max_blocks = moe_max_blocks(d.M, d.k, d.E_local, p.block_tokens);
  if (variant == "gemv") {
    p.kernel = MoeKernel::gemv;
    return p;
  }
  // Always the tensor-core kernel; the block size makes it GEMV-shaped where
  // routes are sparse. With one 8-wide route tile an MMA does the work of 8
  // GEMV dot products for the same dequantized weights, and dequantization,
  // not the multiply, is the per-weight cost: one LOP3 + one bf16x2 subtract
  // per 2 weights here against conversion plus one FMA per weight and route
  // on CUDA cores. So even at one route per expert gemv issues more
  // instructions per byte; it stays as the simple fallback.
  p.kernel = MoeKernel::mma;
  p.pdl = true;
  p.warp_specialized = true;
  p.unit_contiguous = true;  // the producer warp copies a stage's weights in one bulk copy: one run
  p.stream_k_up = d.H / kGroup >= kStreamKMinGroups;
  plan_moe_tile_rows(d, sm_count, p);
  plan_moe_down_split(d, sm_count, p);
  plan_moe_schedule(d, sm_count, p);
  return p;
}

}  // namespace submission::moe
