#include "submission/router_plan.h"

#include <algorithm>

namespace submission::router {

bool fused_fits(const RouterDims& d) { return d.T <= kFusedMaxT && d.E <= kFusedMaxE && d.k <= kFusedMaxK; }

FusedPlan plan_fused(const RouterDims& d, int sm_count) {
  FusedPlan pl;
  pl.m_tiles = ceil_div(d.E, kTileE);
  pl.chunks = ceil_div(d.H, kChunkK);
  pl.splits = std::min(std::clamp(sm_count / pl.m_tiles, 1, kMaxSplits), pl.chunks);
  const int chunks_per_split = ceil_div(pl.chunks, pl.splits);
  pl.warps = std::clamp(std::max(d.T, ceil_div(chunks_per_split, kPlanChunks)), 4, kMaxWarps);
  pl.lane_keys = d.E <= 128 ? 4 : d.E <= 256 ? 8 : 16;
  pl.token_tiles = d.T <= 8 ? 1 : 2;
  return pl;
}

}  // namespace submission::router
