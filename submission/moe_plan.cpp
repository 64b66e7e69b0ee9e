#include "submission/moe_plan.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

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

int moe_down_splits(const MoeDims& d, int block_tokens, int tile_rows, int resident_ctas, bool deferred) {
  const int groups = d.I / kGroup;
  const double units = expected_routing(d, block_tokens).blocks * d.H / tile_rows;
  if (units >= resident_ctas) return 1;  // no CTA idles: a split would only move the last wave's edge
  auto busiest = [&](int s) { return std::ceil(units * s / resident_ctas) * (groups / s + kUnitEndStages); };
  int best = 1;
  for (int s = 2; s <= groups / kMinGroupsPerSplit; ++s)
    if (groups % s == 0 && (deferred ? busiest(s) < busiest(best) : units * s <= resident_ctas)) best = s;
  if (!deferred) return best;
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

const std::vector<std::string>& moe_variant_names() {
  static const std::vector<std::string> names = {"default",          "mma_cta_copies",   "mma",
                                                 "mma_rows64",       "mma_rows128",      "mma_nopdl",
                                                 "mma_ws4",          "mma_unit_combine", "mma_grid_combine",
                                                 "mma_contig",       "mma_occ",          "mma_occ_splitk",
                                                 "mma_align_launch", "mma_queue",        "mma_queue_down",
                                                 "mma_no_queue",     "mma_h_flags",      "mma_h_grid",
                                                 "mma_rotate",       "mma_no_rotate",    "gemv"};
  return names;
}

MoePlan plan_moe(const MoeDims& d, const std::string& variant, int sm_count) {
  validate_moe_dims(d);
  const std::vector<std::string>& names = moe_variant_names();
  if (std::find(names.begin(), names.end(), variant) == names.end())
    throw std::invalid_argument("moe_w4a16: unknown variant '" + variant + "'");
  MoePlan p;
  p.block_tokens = moe_block_tokens(d.M, d.k, d.E_global);
  p.max_blocks = moe_max_blocks(d.M, d.k, d.E_local, p.block_tokens);
  if (variant == "gemv") {
    p.kernel = MoeKernel::gemv;
    return p;
  }
  const double expected_blocks = expected_routing(d, p.block_tokens).blocks;  // uniform routing
  // 128-row units hold twice the accumulators; with 64-token blocks that
  // exceeds the register budget of three CTAs per SM.
  const bool rows128_fits = p.block_tokens <= 32;
  const bool occupancy = variant == "mma_occ" || variant == "mma_occ_splitk";
  auto ctas = [&](int tile_rows) {
    return occupancy              ? mma_max_ctas_per_sm(p.block_tokens, tile_rows / kTileRows)
           : variant == "mma_ws4" ? ws_max_ctas_per_sm(p.block_tokens)
                                  : 3;
  };
  auto pick = [&](int rows, int K) {
    if (!rows128_fits) return 64;
    const double c64 = moe_gemm_cost_us(d, p.block_tokens, rows, K, 64, sm_count, ctas(64));
    const double c128 = moe_gemm_cost_us(d, p.block_tokens, rows, K, 128, sm_count, ctas(128));
    // Ties go to 128 rows: half the activation reads and shared-memory traffic.
    return c128 <= 1.02 * c64 ? 128 : 64;
  };
  // Stream-K in GEMM 1 for the default and the variants defined as the
  // default with one change; those defined from mma keep whole units. Only
  // for units of at least kStreamKMinGroups stages: a cut unit's fix-up (its
  // parts written, counted and summed) is paid per unit, and with H = 2048
  // (16 stages) every qwen3 shape ran 1-6% slower than with whole units on
  // the H200, while H = 4096 and 7168 (32 and 56 stages) ran 3-12% faster.
  const bool from_default = variant == "default" || variant == "mma_rows64" || variant == "mma_rows128" ||
                            variant == "mma_nopdl" || variant == "mma_cta_copies" || variant == "mma_ws4" ||
                            variant == "mma_unit_combine" || variant == "mma_grid_combine" ||
                            variant == "mma_align_launch" || variant.rfind("mma_queue", 0) == 0 ||
                            variant == "mma_no_queue" || variant.rfind("mma_h_", 0) == 0 || variant == "mma_rotate" ||
                            variant == "mma_no_rotate";
  const bool may_defer = from_default && variant != "mma_unit_combine";
  // GEMM 1's work queue fills the CTAs whatever the unit count, as stream-K does.
  p.queue_chunk_stages = variant == "mma_queue" ? kQueueChunkStages : 0;
  p.stream_k_up = from_default && d.H / kGroup >= kStreamKMinGroups && p.queue_chunk_stages == 0;
  // The model prices the CTAs that too few units leave idle, and takes 64-row
  // units to fill them. Two schedules fill them whatever the unit count:
  // GEMM 1 on stream-K, and GEMM 2 in the variants that may combine after
  // all its units, where its 128-row units fill the grid or split to fill it
  // (moe_down_splits, deferred). There
  // 128 rows halve the activation reads and the unit ends: dsv3 M=8's GEMM 2
  // (448 units of 128 rows) ran 69.5 -> 64.1 us, mixtral M=1 (both GEMMs)
  // 78.8 -> 76.9 us, where the model had taken 64 rows.
  auto down_fills_at_128 = [&]() {
    const int resident = sm_count * ctas(128);
    return expected_blocks * d.H / 128 >= resident || moe_down_splits(d, p.block_tokens, 128, resident, true) > 1;
  };
  // The default is always the tensor-core kernel; the block size makes it
  // GEMV-shaped where routes are sparse. With one 8-wide route tile (blocks of
  // 8) an MMA does the work of 8 GEMV dot products for the same dequantized
  // weights, and dequantization, not the multiply, is the per-weight cost:
  // one LOP3 + one bf16x2 subtract per 2 weights here against conversion plus
  // one FMA per weight and route on CUDA cores. So even at one route per
  // expert the CUDA-core kernels (gemv) issue more instructions per byte; they
  // stay as the simple fallback.
  if (variant == "mma_rows64") {
    p.tile_rows_up = p.tile_rows_down = 64;
  } else if (variant == "mma_rows128") {
    if (!rows128_fits) throw std::invalid_argument("moe_w4a16: variant mma_rows128 needs blocks of <= 32 routes");
    p.tile_rows_up = p.tile_rows_down = 128;
  } else {
    p.tile_rows_up = rows128_fits && (p.stream_k_up || p.queue_chunk_stages) ? 128 : pick(2 * d.I, d.H);
    p.tile_rows_down = rows128_fits && may_defer && down_fills_at_128() ? 128 : pick(d.H, d.I);
  }
  p.ctas_up = ctas(p.tile_rows_up);
  p.ctas_down = ctas(p.tile_rows_down);
  // Split GEMM 2 where its units leave CTAs idle, except in the variants
  // kept as references without it and in the per-unit layout, whose packs
  // span a unit's whole reduction. The variants from the default may combine
  // after all units (moe_defer_combine, below), which makes short split
  // units cheap (moe_down_splits).
  const int resident_down = sm_count * p.ctas_down;
  if (variant != "mma" && variant != "mma_occ" && variant != "mma_contig")
    p.splits_down = moe_down_splits(d, p.block_tokens, p.tile_rows_down, resident_down, may_defer);
  p.kernel = MoeKernel::mma;
  p.pdl = variant != "mma_nopdl";
  p.warp_specialized = from_default && variant != "mma_cta_copies";
  // The producer warp copies a stage's weights in one bulk copy: one run.
  p.unit_contiguous = variant == "mma_contig" || p.warp_specialized;
  const int row_groups_down = d.H / p.tile_rows_down;
  const double down_units = expected_blocks * row_groups_down * p.splits_down;
  p.deferred_combine =
      variant == "mma_grid_combine" || (may_defer && moe_defer_combine(d, down_units, row_groups_down, resident_down));
  p.queue_down = variant == "mma_queue" || variant == "mma_queue_down" ||
                 (from_default && variant != "mma_no_queue" && p.warp_specialized && p.ctas_down == 3 &&
                  down_units >= kQueueDownMinWaves * resident_down);
  // GEMM 2 reads h unit by unit as GEMM 1 publishes it (moe_gemm_epilogue.cuh) where
  // GEMM 1's expected units make a wave of resident CTAs or more: its CTAs
  // then end apart, and GEMM 2's, resident as they leave, start on the units
  // already published (1-5% on nine public shapes, perf log round 61). With
  // fewer, each GEMM 1 CTA holds at most one unit and they end together; the
  // flags only add a fence and a poll to the hand-off (qwen3 M=1 22.2 ->
  // 23.6 us). GEMM 1 on its work queue publishes nothing.
  const double up_units = expected_blocks * (2.0 * d.I / p.tile_rows_up);
  const bool up_fills_wave = up_units >= double(sm_count) * p.ctas_up;
  const bool ws_units_up = p.warp_specialized && p.queue_chunk_stages == 0;  // not GEMM 1 on the chunk queue
  p.h_flags = ws_units_up && variant != "mma_h_grid" && (variant == "mma_h_flags" || up_fills_wave);
  // GEMM 1's whole units start at groups of their own (stage_group): in step,
  // the CTAs reading a token's row read the same 256 bytes of it at once
  // (qwen3 M=1 -2%, M=16 -0.6%, perf log round 64). Stream-K's ranges start
  // at groups spread already (neutral there, within ±0.5%), and in GEMM 2
  // it gained nothing on any public shape.
  p.rotate_up = ws_units_up && variant != "mma_no_rotate" && (variant == "mma_rotate" || !p.stream_k_up);
  // At most 32 routes, warp 0 of each GEMM CTA aligns them itself into
  // shared memory (one warp's shuffles, moe_align.cuh), so the op is two
  // launches: the alignment launch's own start and end and GEMM 1's reads of
  // its output leave every call's critical path.
  p.cta_align = p.warp_specialized && variant != "mma_align_launch" && d.M * d.k <= kAlignWarpRoutes &&
                aligned_routes_ints(d.M, p.block_tokens, p.max_blocks) <= kCtaRoutingMaxInts;
  return p;
}

}  // namespace submission::moe
