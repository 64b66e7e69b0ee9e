#include "dev/moe_plans.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

namespace submission::moe {
namespace {

// GEMM 2's split where it combines per unit: the largest s whose units still run in one wave.
// Each unit's end stops the MMA warps for the election's round trips, so a second, partial wave
// of split units cost as long as the first (mixtral M=64 split in 2 for 512 units on 396 CTAs:
// GEMM 2 196 -> 246 us).
int one_wave_down_splits(const MoeDims& d, int block_tokens, int tile_rows, int resident_ctas) {
  const int groups = d.I / kGroup;
  const double units = moe_expected_blocks(d, block_tokens) * d.H / tile_rows;
  if (units >= resident_ctas) return 1;
  int best = 1;
  for (int s = 2; s <= groups / kMinGroupsPerSplit; ++s)
    if (groups % s == 0 && units * s <= resident_ctas) best = s;
  return best;
}

// The default's plan `p` with 128- or 64-row units in both GEMMs, and what follows from them.
void with_rows(const MoeDims& d, int sms, MoePlan& p, int tile_rows) {
  p.tile_rows_up = p.tile_rows_down = tile_rows;
  plan_moe_down_split(d, sms, p);
  plan_moe_schedule(d, sms, p);
}

// The plan of mma, the default before stream-K, the split and the producer warp, for the
// default's plan `def`: the model's unit rows, whole units round-robin, no split, on the
// CTA-copies kernel at 3 CTAs per SM or, with `occupancy`, at mma_max_ctas_per_sm.
MoePlan mma_plan(const MoeDims& d, int sms, const MoePlan& def, bool occupancy) {
  MoePlan p;
  p.pdl = true;
  p.block_tokens = def.block_tokens;
  p.max_blocks = def.max_blocks;
  auto ctas = [&](int tile_rows) { return occupancy ? mma_max_ctas_per_sm(p.block_tokens, tile_rows / kTileRows) : 3; };
  auto pick = [&](int rows, int K) {
    if (!moe_rows128_fit(p.block_tokens)) return 64;
    return moe_cheaper_tile_rows(moe_gemm_cost_us(d, p.block_tokens, rows, K, 64, sms, ctas(64)),
                                 moe_gemm_cost_us(d, p.block_tokens, rows, K, 128, sms, ctas(128)));
  };
  p.tile_rows_up = pick(2 * d.I, d.H);
  p.tile_rows_down = pick(d.H, d.I);
  p.ctas_up = ctas(p.tile_rows_up);
  p.ctas_down = ctas(p.tile_rows_down);
  return p;
}

// A dev variant: its name and how it changes the default's plan `p` (for dims d on sms SMs).
struct DevPlan {
  const char* name;
  void (*change)(const MoeDims& d, int sms, MoePlan& p);
};

// In `scorer list` order. Each lost to the default where it ran, or is a reference for one of
// its choices (docs/perf-log.md, round 91, measures every one against it).
const DevPlan kDevPlans[] = {
    // The default on the CTA-copies kernel (every thread copies by cp.async, a CTA barrier per
    // stage): the default before the producer warp (round 10), so none of what needs it.
    {"mma_cta_copies",
     [](const MoeDims&, int, MoePlan& p) {
       p.warp_specialized = p.unit_contiguous = false;
       p.queue_down = p.h_flags = p.rotate_up = p.cta_align = false;
     }},
    {"mma", [](const MoeDims& d, int sms, MoePlan& p) { p = mma_plan(d, sms, p, false); }},
    {"mma_rows64", [](const MoeDims& d, int sms, MoePlan& p) { with_rows(d, sms, p, 64); }},
    {"mma_rows128",
     [](const MoeDims& d, int sms, MoePlan& p) {
       if (!moe_rows128_fit(p.block_tokens))
         throw std::invalid_argument("moe_w4a16: variant mma_rows128 needs blocks of <= 32 routes");
       with_rows(d, sms, p, 128);
     }},
    // Plain launches, no PDL.
    {"mma_nopdl", [](const MoeDims&, int, MoePlan& p) { p.pdl = false; }},
    // 4 CTAs per SM where ws_max_ctas_per_sm allows it, every choice of the default made for
    // them; GEMM 2's work queue runs at 3 only.
    {"mma_ws4",
     [](const MoeDims& d, int sms, MoePlan& p) {
       p.ctas_up = p.ctas_down = ws_max_ctas_per_sm(p.block_tokens);
       plan_moe_tile_rows(d, sms, p);
       plan_moe_down_split(d, sms, p);
       plan_moe_schedule(d, sms, p);
       p.queue_down = p.queue_down && p.ctas_down == 3;
     }},
    // GEMM 2 always combines per unit (count_and_combine): the model's rows, split in one wave.
    {"mma_unit_combine",
     [](const MoeDims& d, int sms, MoePlan& p) {
       p.tile_rows_down = moe_model_tile_rows(d, p.block_tokens, d.H, d.I, sms, p.ctas_down);
       p.splits_down = one_wave_down_splits(d, p.block_tokens, p.tile_rows_down, sms * p.ctas_down);
       p.deferred_combine = false;
       plan_moe_schedule(d, sms, p);
     }},
    // GEMM 2 always combines after all units (combine_all_tokens).
    {"mma_grid_combine", [](const MoeDims&, int, MoePlan& p) { p.deferred_combine = true; }},
    // mma with each unit's weights and scales packed into one contiguous stream.
    {"mma_contig",
     [](const MoeDims& d, int sms, MoePlan& p) {
       p = mma_plan(d, sms, p, false);
       p.unit_contiguous = true;
     }},
    {"mma_occ", [](const MoeDims& d, int sms, MoePlan& p) { p = mma_plan(d, sms, p, true); }},
    // mma_occ with GEMM 2 split in one wave.
    {"mma_occ_splitk",
     [](const MoeDims& d, int sms, MoePlan& p) {
       p = mma_plan(d, sms, p, true);
       p.splits_down = one_wave_down_splits(d, p.block_tokens, p.tile_rows_down, sms * p.ctas_down);
     }},
    // The alignment always its own launch (no cta_align).
    {"mma_align_launch", [](const MoeDims&, int, MoePlan& p) { p.cta_align = false; }},
    // GEMM 1 on the work queue too, in chunks of kQueueChunkStages stages, 128-row units where
    // they fit: the queue fills the CTAs whatever the unit count, as stream-K does. Its units
    // publish no flags and take no rotation.
    {"mma_queue",
     [](const MoeDims& d, int sms, MoePlan& p) {
       p.queue_chunk_stages = kQueueChunkStages;
       p.stream_k_up = false;
       p.tile_rows_up =
           moe_rows128_fit(p.block_tokens) ? 128 : moe_model_tile_rows(d, p.block_tokens, 2 * d.I, d.H, sms, p.ctas_up);
       p.queue_down = true;
       p.h_flags = p.rotate_up = false;
     }},
    // GEMM 2 always on the work queue: CTAs take whole units as they free up.
    {"mma_queue_down", [](const MoeDims&, int, MoePlan& p) { p.queue_down = true; }},
    // GEMM 2 never on the work queue (the default before round 48).
    {"mma_no_queue", [](const MoeDims&, int, MoePlan& p) { p.queue_down = false; }},
    // GEMM 2 always reads h unit by unit as GEMM 1 publishes it (h_ready).
    {"mma_h_flags", [](const MoeDims&, int, MoePlan& p) { p.h_flags = true; }},
    // GEMM 2 always waits for GEMM 1's whole grid (the default before round 61).
    {"mma_h_grid", [](const MoeDims&, int, MoePlan& p) { p.h_flags = false; }},
    // Each GEMM 1 unit's stages always start at a group of their own (stage_group), on
    // stream-K too.
    {"mma_rotate", [](const MoeDims&, int, MoePlan& p) { p.rotate_up = true; }},
    // Every unit starts at its first group (the default before round 64).
    {"mma_no_rotate", [](const MoeDims&, int, MoePlan& p) { p.rotate_up = false; }},
};

}  // namespace

const std::vector<std::string>& dev_moe_plan_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const DevPlan& v : kDevPlans) n.push_back(v.name);
    return n;
  }();
  return names;
}

MoePlan plan_moe_variant(const MoeDims& d, const std::string& variant, int sm_count) {
  if (variant == "default" || variant == "gemv") return plan_moe(d, variant, sm_count);
  validate_moe_dims(d);  // bad dims are reported as such whatever the name
  for (const DevPlan& v : kDevPlans)
    if (variant == v.name) {
      MoePlan p = plan_moe(d, "default", sm_count);
      v.change(d, sm_count, p);
      return p;
    }
  throw std::invalid_argument("moe_w4a16: unknown variant '" + variant + "'");
}

}  // namespace submission::moe
