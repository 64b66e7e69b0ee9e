// The moe_w4a16 plan on the CPU: the block size follows the GLOBAL routing
// density, the workspace bound holds for any routing, and each variant's plan
// (the upload's, submission/moe_plan.h; dev's, dev/moe_plans.h) is what its
// name says. The repacked layout: cpu_moe_layout.cpp.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dev/moe_plans.h"
#include "reference/bf16_host.h"
#include "reference/int4.h"
#include "submission/moe_plan.h"

namespace {

using submission::MoeDims;
using namespace submission::moe;

constexpr int kSms = 132;

// Local routes per local expert of a routing, as the alignment counts them.
std::vector<int> local_counts(const MoeDims& d, const std::vector<int>& ids) {
  std::vector<int> n(d.E_local, 0);
  for (int id : ids) {
    const int e = moe_local_expert(id, d.ep_rank, d.E_local);
    if (e >= 0) ++n[e];
  }
  return n;
}

int blocks_needed(const std::vector<int>& counts, int block_tokens) {
  int b = 0;
  for (int n : counts) b += (n + block_tokens - 1) / block_tokens;
  return b;
}

// k distinct global experts per token, uniformly.
std::vector<int> random_routing(int M, int k, int E_global, std::mt19937_64& rng) {
  std::vector<int> ids, pool(E_global);
  for (int m = 0; m < M; ++m) {
    for (int e = 0; e < E_global; ++e) pool[e] = e;
    for (int j = 0; j < k; ++j) {
      std::uniform_int_distribution<int> pick(j, E_global - 1);
      std::swap(pool[j], pool[pick(rng)]);
      ids.push_back(pool[j]);
    }
  }
  return ids;
}

}  // namespace

TEST_CASE("moe block size follows the global density M*k/E_global") {
  for (int M : {1, 3, 8, 16, 32, 64, 100, 128, 256, 1000, 4096})
    for (int k : {1, 2, 4, 8}) {
      const MoeDims ep0{M, 7168, 2048, 256, 32, k, 0}, ep5{M, 7168, 2048, 256, 32, k, 5};
      const MoeDims all{M, 7168, 2048, 256, 256, k, 0};
      const int b = plan_moe(all, "default", kSms).block_tokens;
      CHECK_MESSAGE(plan_moe(ep0, "default", kSms).block_tokens == b, "M=" << M << " k=" << k);
      CHECK_MESSAGE(plan_moe(ep5, "default", kSms).block_tokens == b, "M=" << M << " k=" << k);
      CHECK(b == moe_block_tokens(M, k, 256));
    }
  // dsv3 EP8, M=128: 4 routes per expert want 16 slots; dividing by the 32
  // local experts instead would ask for 64.
  CHECK(moe_block_tokens(128, 8, 256) == 16);
  CHECK(moe_block_tokens(128, 8, 32) == 64);
  // The public shapes.
  CHECK(moe_block_tokens(1, 8, 128) == 8);
  CHECK(moe_block_tokens(16, 8, 128) == 8);
  CHECK(moe_block_tokens(64, 8, 128) == 16);
  CHECK(moe_block_tokens(256, 8, 128) == 32);
  CHECK(moe_block_tokens(8, 8, 256) == 8);
  CHECK(moe_block_tokens(32, 8, 256) == 8);
  CHECK(moe_block_tokens(1, 2, 8) == 8);
  CHECK(moe_block_tokens(16, 2, 8) == 16);
  CHECK(moe_block_tokens(64, 2, 8) == 32);
  // Never more slots than tokens need, never past the register bound.
  for (int M = 1; M <= 4096; M = M * 3 + 1)
    for (int k : {1, 2, 8})
      for (int E : {8, 64, 256}) {
        if (k > E) continue;
        const int b = moe_block_tokens(M, k, E);
        CHECK((b == 8 || b == 16 || b == 32 || b == 64));
        if (M <= 8) CHECK(b == 8);
      }
}

TEST_CASE("moe max_blocks bounds the blocks of any routing") {
  std::mt19937_64 rng(1234);
  const MoeDims shapes[] = {
      {7, 256, 384, 16, 4, 3, 2},       {33, 256, 256, 8, 8, 2, 0},       {1, 2048, 768, 128, 128, 8, 0},
      {256, 2048, 768, 128, 128, 8, 0}, {128, 7168, 2048, 256, 32, 8, 5}, {64, 4096, 14336, 8, 8, 2, 0},
      {300, 256, 256, 8, 8, 2, 0},      {50, 256, 256, 4, 4, 1, 0},
  };
  for (const MoeDims& d : shapes) {
    const MoePlan p = plan_moe(d, "default", kSms);
    for (int trial = 0; trial < 50; ++trial) {
      const auto ids = random_routing(d.M, d.k, d.E_global, rng);
      CHECK(blocks_needed(local_counts(d, ids), p.block_tokens) <= p.max_blocks);
    }
    // Adversarial: every token on the same k local experts.
    REQUIRE(d.k <= d.E_local);
    std::vector<int> ids;
    for (int m = 0; m < d.M; ++m)
      for (int j = 0; j < d.k; ++j) ids.push_back(d.ep_rank * d.E_local + j);
    CHECK(blocks_needed(local_counts(d, ids), p.block_tokens) <= p.max_blocks);
    // Adversarial: every local expert one route past a block boundary.
    std::vector<int> counts(d.E_local, 0);
    long long left = (long long)d.M * std::min(d.k, d.E_local);
    for (int e = 0; e < d.E_local && left > 0; ++e) {
      counts[e] = int(std::min<long long>(left, p.block_tokens + 1));
      left -= counts[e];
    }
    CHECK(blocks_needed(counts, p.block_tokens) <= p.max_blocks);
  }
}

TEST_CASE("moe plan: variants, tile rows and invalid dims") {
  const MoeDims mixtral1{1, 4096, 14336, 8, 8, 2, 0}, mixtral64{64, 4096, 14336, 8, 8, 2, 0};
  // Two experts x 4096 rows of GEMM 2 make 64 units of 128 rows for 132 SMs:
  // where GEMM 2 never combines after all its units (mma_unit_combine) the
  // model decides and takes 64-row units there, and 128 rows where units are
  // plenty.
  CHECK(plan_moe_variant(mixtral1, "mma_unit_combine", kSms).tile_rows_down == 64);
  CHECK(plan_moe(mixtral64, "default", kSms).tile_rows_up == 128);
  // The default takes 128 rows wherever its schedule fills the CTAs anyway:
  // GEMM 1 on stream-K (H >= 4096), GEMM 2 split to fill the grid (mixtral
  // M=1) or with enough 128-row units (dsv3 M=8: ~8 blocks x 56 = 448 for
  // 396 CTAs), where the model alone took 64.
  for (const MoeDims& d : {mixtral1, MoeDims{8, 7168, 2048, 256, 32, 8, 0}}) {
    CAPTURE(d.M);
    CHECK(plan_moe(d, "default", kSms).tile_rows_up == 128);
    CHECK(plan_moe(d, "default", kSms).tile_rows_down == 128);
  }
  // qwen3 M=1: no stream-K (16 groups) and no split (6 groups), and 96 units
  // of 128 rows would leave SMs idle: 64 rows double the CTAs streaming.
  CHECK(plan_moe(MoeDims{1, 2048, 768, 128, 128, 8, 0}, "default", kSms).tile_rows_up == 64);
  CHECK(plan_moe(MoeDims{1, 2048, 768, 128, 128, 8, 0}, "default", kSms).tile_rows_down == 64);
  for (const MoeDims& d :
       {MoeDims{1, 2048, 768, 128, 128, 8, 0}, MoeDims{256, 2048, 768, 128, 128, 8, 0},
        MoeDims{32, 7168, 2048, 256, 32, 8, 5}, mixtral1, mixtral64, MoeDims{300, 256, 128, 8, 8, 2, 0}}) {
    for (const char* v : {"default", "mma_cta_copies", "mma", "mma_rows64", "mma_nopdl", "mma_contig"}) {
      const MoePlan p = plan_moe_variant(d, v, kSms);
      CHECK(p.kernel == MoeKernel::mma);
      CHECK(p.pdl == (std::string(v) != "mma_nopdl"));
      const bool ws = std::string(v) == "default" || std::string(v) == "mma_rows64" || std::string(v) == "mma_nopdl";
      CHECK(p.warp_specialized == ws);
      CHECK(p.unit_contiguous == (ws || std::string(v) == "mma_contig"));
      for (int rows : {p.tile_rows_up, p.tile_rows_down}) CHECK((rows == 64 || rows == 128));
      CHECK((2 * d.I) % p.tile_rows_up == 0);
      CHECK(d.H % p.tile_rows_down == 0);
      if (p.block_tokens == 64) CHECK(p.tile_rows_up + p.tile_rows_down == 128);
    }
    CHECK(plan_moe(d, "gemv", kSms).kernel == MoeKernel::gemv);
  }
  CHECK(plan_moe_variant(mixtral64, "mma_rows128", kSms).tile_rows_down == 128);
  for (const MoeDims& d : {MoeDims{1, 2048, 768, 128, 128, 8, 0}, MoeDims{256, 2048, 768, 128, 128, 8, 0},
                           MoeDims{8, 7168, 2048, 256, 32, 8, 0}, mixtral1, mixtral64}) {
    CAPTURE(d.M);
    CAPTURE(d.H);
    for (const char* v : {"default", "mma", "mma_occ", "mma_occ_splitk", "mma_contig"}) {
      const MoePlan p = plan_moe_variant(d, v, kSms);
      const bool occ = std::string(v).find("occ") != std::string::npos;
      const bool split = std::string(v) == "default" || std::string(v) == "mma_occ_splitk";
      for (auto [ctas, rows] : {std::pair{p.ctas_up, p.tile_rows_up}, std::pair{p.ctas_down, p.tile_rows_down}})
        CHECK(ctas == (occ ? mma_max_ctas_per_sm(p.block_tokens, rows / kTileRows) : 3));
      CHECK((d.I / kGroup) % p.splits_down == 0);
      CHECK(d.I / kGroup / p.splits_down >= kMinGroupsPerSplit);
      if (!split) CHECK(p.splits_down == 1);
    }
  }
  // mma_ws4: 4 CTAs per SM for blocks of 8 routes (qwen3 M=1), 3 for larger.
  for (const MoeDims& d : {MoeDims{1, 2048, 768, 128, 128, 8, 0}, MoeDims{256, 2048, 768, 128, 128, 8, 0}}) {
    const MoePlan p = plan_moe_variant(d, "mma_ws4", kSms);
    CHECK(p.warp_specialized);
    CHECK(p.ctas_up == (p.block_tokens == 8 ? 4 : 3));
    CHECK(p.ctas_down == p.ctas_up);
  }
  // mixtral M=1, 64-row units (the variants that keep the model's rows): 2
  // blocks x 64 row groups = 128 GEMM 2 units for 396 resident CTAs, I = 112
  // groups. With the combine per unit, I splits in 2, the largest divisor
  // that keeps one wave; with 6 CTAs per SM (792) in 4 (7 would make 896).
  // With the combine after all units the busiest CTA's stages decide; at the
  // default's 128-row units (64 units): s = 16 gives 1024 units, 3 waves of
  // 7 + 1 stages (24), against 25 at s = 28 and 27 at s = 14. mixtral M=64
  // (256 units of 128 rows): s = 7 gives 5 waves x 17 = 85, s = 4 3 x 29 =
  // 87, within 5%, so the smaller split; one wave keeps it unsplit per unit.
  // qwen3 (6 groups) never splits.
  CHECK(plan_moe(mixtral1, "default", kSms).splits_down == 16);
  CHECK(moe_down_splits(mixtral1, 8, 64, 3 * kSms) == 8);
  CHECK(plan_moe_variant(mixtral1, "mma_unit_combine", kSms).splits_down == 2);
  CHECK(plan_moe_variant(mixtral1, "mma_occ_splitk", kSms).splits_down == 4);
  CHECK(plan_moe(MoeDims{256, 2048, 768, 128, 128, 8, 0}, "default", kSms).splits_down == 1);
  CHECK(plan_moe(mixtral64, "default", kSms).splits_down == 4);
  CHECK(plan_moe_variant(mixtral64, "mma_unit_combine", kSms).splits_down == 1);
  // dsv3 M=8: ~450 units of 128 rows fill the grid, so no split.
  CHECK(plan_moe(MoeDims{8, 7168, 2048, 256, 32, 8, 0}, "default", kSms).splits_down == 1);
  // GEMM 2 combines after all its units where they take more than one wave
  // (qwen3 M=256: ~2000 units; mixtral M=1 once split in 16) or a CTA would
  // combine more than one token at its unit's end (mixtral M=16 unsplit:
  // 256 units, 16 tokens x 32 row groups), not where neither holds (qwen3
  // M=1: 128 units, 1 token x 32 row groups); the two variants force either
  // way, the variants from mma never defer.
  CHECK(plan_moe(MoeDims{256, 2048, 768, 128, 128, 8, 0}, "default", kSms).deferred_combine);
  CHECK(plan_moe(MoeDims{8, 7168, 2048, 256, 32, 8, 0}, "default", kSms).deferred_combine);
  CHECK(plan_moe(mixtral1, "default", kSms).deferred_combine);
  CHECK_FALSE(plan_moe(MoeDims{1, 2048, 768, 128, 128, 8, 0}, "default", kSms).deferred_combine);
  CHECK(moe_defer_combine(MoeDims{16, 4096, 14336, 8, 8, 2, 0}, 256, 32, 3 * kSms));
  CHECK_FALSE(moe_defer_combine(MoeDims{1, 2048, 768, 128, 128, 8, 0}, 128, 32, 3 * kSms));
  CHECK(plan_moe_variant(MoeDims{1, 2048, 768, 128, 128, 8, 0}, "mma_grid_combine", kSms).deferred_combine);
  CHECK_FALSE(plan_moe_variant(MoeDims{256, 2048, 768, 128, 128, 8, 0}, "mma_unit_combine", kSms).deferred_combine);
  CHECK_FALSE(plan_moe_variant(MoeDims{256, 2048, 768, 128, 128, 8, 0}, "mma", kSms).deferred_combine);
  // Six CTAs only where a pipeline of 3 stages fits a sixth of shared memory
  // and a thread's accumulators fit 85 registers.
  CHECK(mma_max_ctas_per_sm(8, 4) == 6);
  CHECK(mma_max_ctas_per_sm(16, 4) == 6);
  CHECK(mma_max_ctas_per_sm(16, 8) == 3);
  CHECK(mma_max_ctas_per_sm(32, 4) == 3);
  // GEMM 1's stream-K schedule: the default and the variants derived from it,
  // for units of at least kStreamKMinGroups stages (H / 128); never mma.
  CHECK(plan_moe(MoeDims{8, 7168, 2048, 256, 32, 8, 0}, "default", kSms).stream_k_up);
  CHECK(plan_moe_variant(mixtral64, "mma_nopdl", kSms).stream_k_up);
  CHECK(plan_moe_variant(mixtral64, "mma_cta_copies", kSms).stream_k_up);
  CHECK_FALSE(plan_moe_variant(mixtral64, "mma", kSms).stream_k_up);
  CHECK_FALSE(plan_moe_variant(mixtral64, "mma_occ", kSms).stream_k_up);
  CHECK_FALSE(plan_moe(MoeDims{1, 2048, 768, 128, 128, 8, 0}, "default", kSms).stream_k_up);
  CHECK(plan_moe(MoeDims{4, kStreamKMinGroups * kGroup, 256, 8, 8, 2, 0}, "default", kSms).stream_k_up);
  CHECK_FALSE(plan_moe(MoeDims{4, (kStreamKMinGroups - 1) * kGroup, 256, 8, 8, 2, 0}, "default", kSms).stream_k_up);
  // Each GEMM CTA aligns its routes itself (no alignment launch) at most 32
  // routes, on the warp-specialised kernels only, within kCtaRoutingMaxInts
  // of shared memory; mma_align_launch keeps the launch.
  const MoeDims qwen3_1{1, 2048, 768, 128, 128, 8, 0}, qwen3_4{4, 2048, 768, 128, 128, 8, 0};
  CHECK(plan_moe(qwen3_1, "default", kSms).cta_align);
  CHECK(plan_moe(qwen3_4, "default", kSms).cta_align);  // 32 routes
  CHECK(plan_moe(mixtral1, "default", kSms).cta_align);
  CHECK(plan_moe_variant(mixtral1, "mma_ws4", kSms).cta_align);
  CHECK_FALSE(plan_moe(MoeDims{5, 2048, 768, 128, 128, 8, 0}, "default", kSms).cta_align);  // 40 routes
  CHECK_FALSE(plan_moe_variant(qwen3_1, "mma_align_launch", kSms).cta_align);
  CHECK_FALSE(plan_moe_variant(qwen3_1, "mma_cta_copies", kSms).cta_align);
  CHECK_FALSE(plan_moe_variant(qwen3_1, "mma", kSms).cta_align);
  CHECK_FALSE(plan_moe(qwen3_1, "gemv", kSms).cta_align);
  for (const MoeDims& d : {qwen3_1, qwen3_4, mixtral1}) {
    const MoePlan p = plan_moe(d, "default", kSms);
    CHECK(aligned_routes_ints(d.M, p.block_tokens, p.max_blocks) <= kCtaRoutingMaxInts);
  }
  // The variant is the default in every other respect.
  for (const MoeDims& d : {qwen3_1, mixtral1, mixtral64}) {
    const MoePlan a = plan_moe(d, "default", kSms), b = plan_moe_variant(d, "mma_align_launch", kSms);
    CHECK(a.tile_rows_up == b.tile_rows_up);
    CHECK(a.tile_rows_down == b.tile_rows_down);
    CHECK(a.splits_down == b.splits_down);
    CHECK(a.stream_k_up == b.stream_k_up);
    CHECK(a.deferred_combine == b.deferred_combine);
    CHECK(a.warp_specialized == b.warp_specialized);
  }
  // The work queues: GEMM 1's instead of stream-K (or round-robin units),
  // with 128-row units where they fit; GEMM 2's with the default's units and
  // split; on the warp-specialised kernel with 3 CTAs per SM.
  for (const MoeDims& d : {qwen3_1, mixtral1, mixtral64, MoeDims{300, 256, 128, 8, 8, 2, 0}}) {
    CAPTURE(d.M);
    const MoePlan a = plan_moe(d, "default", kSms);
    for (const char* v : {"mma_queue", "mma_queue_down"}) {
      CAPTURE(v);
      const MoePlan q = plan_moe_variant(d, v, kSms);
      const bool up = std::string(v) == "mma_queue";
      CHECK(q.queue_chunk_stages == (up ? kQueueChunkStages : 0));
      CHECK(q.queue_down);
      CHECK(q.stream_k_up == (up ? false : a.stream_k_up));
      CHECK(q.warp_specialized);
      CHECK(q.ctas_up == 3);
      CHECK(q.ctas_down == 3);
      CHECK(q.tile_rows_up == (up ? (q.block_tokens <= 32 ? 128 : 64) : a.tile_rows_up));
      CHECK(q.tile_rows_down == a.tile_rows_down);
      CHECK(q.splits_down == a.splits_down);
      CHECK(q.deferred_combine == a.deferred_combine);
      CHECK(q.cta_align == a.cta_align);
    }
    CHECK(a.queue_chunk_stages == 0);
    const MoePlan n = plan_moe_variant(d, "mma_no_queue", kSms);
    CHECK_FALSE(n.queue_down);
    CHECK(n.tile_rows_up == a.tile_rows_up);
    CHECK(n.tile_rows_down == a.tile_rows_down);
    CHECK(n.splits_down == a.splits_down);
    CHECK(n.stream_k_up == a.stream_k_up);
    CHECK(n.deferred_combine == a.deferred_combine);
    CHECK(n.cta_align == a.cta_align);
    // The variants that change one thing of the default keep its schedule.
    auto same_schedule = [&](const MoePlan& f) {
      CHECK(f.queue_down == a.queue_down);
      CHECK(f.tile_rows_up == a.tile_rows_up);
      CHECK(f.tile_rows_down == a.tile_rows_down);
      CHECK(f.splits_down == a.splits_down);
      CHECK(f.stream_k_up == a.stream_k_up);
      CHECK(f.deferred_combine == a.deferred_combine);
      CHECK(f.cta_align == a.cta_align);
      CHECK(f.warp_specialized);
    };
    // GEMM 2 reading h unit by unit always, or never: the default otherwise.
    for (const char* v : {"mma_h_flags", "mma_h_grid"}) {
      CAPTURE(v);
      const MoePlan f = plan_moe_variant(d, v, kSms);
      CHECK(f.h_flags == (std::string(v) == "mma_h_flags"));
      same_schedule(f);
    }
    // The kernels without the producer warp, and GEMM 1 on its queue, never publish.
    for (const char* v : {"mma", "mma_cta_copies", "mma_queue", "gemv"})
      CHECK_FALSE(plan_moe_variant(d, v, kSms).h_flags);
    // GEMM 1's units start at groups of their own by default where they are
    // whole (not on stream-K), always or never in the variants; nothing else
    // changes. Never without the producer warp or on GEMM 1's queue.
    CHECK(a.rotate_up == !a.stream_k_up);
    for (const char* v : {"mma_rotate", "mma_no_rotate"}) {
      CAPTURE(v);
      const MoePlan r = plan_moe_variant(d, v, kSms);
      CHECK(r.rotate_up == (std::string(v) == "mma_rotate"));
      CHECK(r.h_flags == a.h_flags);
      same_schedule(r);
    }
    for (const char* v : {"mma", "mma_cta_copies", "mma_queue", "gemv"})
      CHECK_FALSE(plan_moe_variant(d, v, kSms).rotate_up);
  }
  // The default reads h unit by unit where GEMM 1's expected units make a
  // wave of CTAs or more: qwen3 M=1 (8 blocks x 24 units of 64 rows, 192 of
  // 396 CTAs) and dsv3 M=8 (~7.2 blocks x 32) wait for the whole grid.
  for (const MoeDims& d : {qwen3_1, MoeDims{8, 7168, 2048, 256, 32, 8, 0}})
    CHECK_FALSE(plan_moe(d, "default", kSms).h_flags);
  for (const MoeDims& d : {MoeDims{16, 2048, 768, 128, 128, 8, 0}, MoeDims{256, 2048, 768, 128, 128, 8, 0},
                           MoeDims{32, 7168, 2048, 256, 32, 8, 5}, mixtral1, mixtral64})
    CHECK(plan_moe(d, "default", kSms).h_flags);
  // The default's GEMM 2 takes the queue from kQueueDownMinWaves waves of
  // expected units on: every public shape but qwen3 M=1 (0.65 waves) and
  // dsv3 M=8 (1.02); never on the kernels without a producer warp, nor with
  // 4 CTAs per SM.
  for (const MoeDims& d :
       {MoeDims{16, 2048, 768, 128, 128, 8, 0}, MoeDims{256, 2048, 768, 128, 128, 8, 0},
        MoeDims{32, 7168, 2048, 256, 32, 8, 5}, MoeDims{128, 7168, 2048, 256, 32, 8, 0}, mixtral1, mixtral64}) {
    CAPTURE(d.M);
    CHECK(plan_moe(d, "default", kSms).queue_down);
    CHECK_FALSE(plan_moe_variant(d, "mma_cta_copies", kSms).queue_down);
  }
  CHECK_FALSE(plan_moe(qwen3_1, "default", kSms).queue_down);
  CHECK_FALSE(plan_moe(MoeDims{8, 7168, 2048, 256, 32, 8, 0}, "default", kSms).queue_down);
  CHECK_FALSE(
      plan_moe_variant(MoeDims{16, 2048, 768, 128, 128, 8, 0}, "mma_ws4", kSms).queue_down);  // blocks of 8: 4 CTAs
  CHECK(plan_moe_variant(qwen3_1, "mma_queue_down", kSms).queue_down);
  CHECK_THROWS_AS(plan_moe_variant(MoeDims{300, 256, 128, 8, 8, 2, 0}, "mma_rows128", kSms), std::invalid_argument);
  CHECK_THROWS_AS(plan_moe_variant(mixtral1, "nonsense", kSms), std::invalid_argument);
  // The upload plans its own variants only.
  for (const std::string& v : dev_moe_plan_names()) CHECK_THROWS_AS(plan_moe(mixtral1, v, kSms), std::invalid_argument);
  const MoeDims bad[] = {{0, 256, 256, 8, 8, 2, 0},  {4, 200, 256, 8, 8, 2, 0},  {4, 256, 100, 8, 8, 2, 0},
                         {4, 256, 256, 8, 3, 2, 0},  {4, 256, 256, 8, 8, 9, 0},  {4, 256, 256, 8, 8, 0, 0},
                         {4, 256, 256, 16, 4, 2, 4}, {4, 256, 256, 16, 4, 2, -1}};
  for (const MoeDims& d : bad) CHECK_THROWS_AS(plan_moe(d, "default", kSms), std::invalid_argument);
}

// Every variant's plan, field by field, over a sweep of dims and SM counts, folded into one FNV-1a
// digest. The value is the plans' when the dev variants' plans were split off the upload's
// (dev/moe_plans.cpp); a change to any plan changes it. A deliberate change updates it.
TEST_CASE("moe plans of every variant are pinned") {
  std::vector<std::string> names = {"default", "gemv"};
  for (const std::string& v : dev_moe_plan_names()) names.push_back(v);
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](long long v) {
    for (int i = 0; i < 8; ++i, v >>= 8) h = (h ^ uint64_t(v & 0xff)) * 1099511628211ull;
  };
  int plans = 0;
  for (int M : {1, 2, 3, 4, 5, 8, 9, 16, 17, 32, 33, 64, 100, 128, 256, 300, 1000, 4096})
    for (const MoeDims& shape : {MoeDims{0, 2048, 768, 128, 128, 8, 0}, MoeDims{0, 7168, 2048, 256, 32, 8, 5},
                                 MoeDims{0, 4096, 14336, 8, 8, 2, 0}, MoeDims{0, 256, 384, 16, 4, 3, 2},
                                 MoeDims{0, 4096, 1536, 64, 16, 6, 3}, MoeDims{0, 3968, 1408, 8, 2, 2, 1}})
      for (int sms : {78, 114, 132})
        for (const std::string& v : names) {
          MoeDims d = shape;
          d.M = M;
          ++plans;
          try {
            const MoePlan p = plan_moe_variant(d, v, sms);
            for (long long f : {(long long)p.kernel, (long long)p.pdl, (long long)p.block_tokens,
                                (long long)p.max_blocks, (long long)p.tile_rows_up, (long long)p.tile_rows_down,
                                (long long)p.ctas_up, (long long)p.ctas_down, (long long)p.splits_down,
                                (long long)p.stream_k_up, (long long)p.unit_contiguous, (long long)p.warp_specialized,
                                (long long)p.deferred_combine, (long long)p.cta_align, (long long)p.queue_chunk_stages,
                                (long long)p.queue_down, (long long)p.h_flags, (long long)p.rotate_up})
              mix(f);
          } catch (const std::invalid_argument&) {
            mix(-1);  // mma_rows128 with blocks of 64
          }
        }
  CHECK(plans == 18 * 6 * 3 * 21);
  CHECK(h == 0xc022de88db7a93e5ull);
}
