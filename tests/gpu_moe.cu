// moe_w4a16 on the GPU: every variant against the fp64 CPU reference on small
// odd shapes that cover each legal case (expert parallelism with ep_rank > 0,
// tokens with no local route, no local route at all, all tokens on one expert,
// k = 1, M = 1, M past 256, every block size), with the output poisoned before
// each run, two runs bit-identical, and one run captured in a CUDA graph and
// replayed on new inputs. Then one public-size shape per model family, checked
// on a few tokens (the fp64 reference is too slow for whole batches there).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "dev/variants.h"
#include "reference/cpu_reference.h"
#include "reference/int4.h"
#include "scorer/check.h"
#include "submission/moe_align.cuh"
#include "submission/moe_plan.h"
#include "submission/submission.h"
#include "tests/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;
using submission::MoeDims;

// Picks a token's k distinct global experts; `allowed` filters the candidates.
using ExpertFilter = std::function<bool(int m, int j, int global_id)>;

struct MoeInputs {
  std::vector<uint16_t> X;
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

struct MoeWeightsHost {
  std::vector<uint8_t> W13, W2;
  std::vector<uint16_t> S13, S2;
};

// Codes uniform in 0..15, two per byte; scales U(0.75, 1.25)/sqrt(21.25 K) as
// bf16, so each dequantized row has about unit norm and outputs are O(1).
// Small shapes go through ref::pack_int4; at public sizes random bytes are the
// same distribution (each nibble uniform) without a code per weight in memory.
void random_int4(int rows, int K, std::mt19937_64& rng, std::vector<uint8_t>* packed, std::vector<uint16_t>* scales) {
  if (size_t(rows) * K <= (size_t(1) << 24)) {
    std::uniform_int_distribution<int> code(0, 15);
    std::vector<uint8_t> codes(size_t(rows) * K);
    for (auto& c : codes) c = uint8_t(code(rng));
    *packed = ref::pack_int4(codes, rows, K);
  } else {
    packed->resize(size_t(rows) * K / 2);
    for (size_t i = 0; i < packed->size(); i += 8) {
      const uint64_t r = rng();
      for (size_t b = 0; b < 8 && i + b < packed->size(); ++b) (*packed)[i + b] = uint8_t(r >> (8 * b));
    }
  }
  std::uniform_real_distribution<float> u(0.75f, 1.25f);
  const float k = 1.0f / std::sqrt(21.25f * K);
  scales->resize(size_t(rows) * (K / ref::kGroupSize));
  for (auto& s : *scales) s = ref::float_to_bf16(u(rng) * k);
}

MoeWeightsHost random_weights(const MoeDims& d, std::mt19937_64& rng) {
  MoeWeightsHost w;
  random_int4(d.E_local * 2 * d.I, d.H, rng, &w.W13, &w.S13);
  random_int4(d.E_local * d.H, d.I, rng, &w.W2, &w.S2);
  return w;
}

// X ~ N(0, 1); k distinct global experts per token, uniform among those the
// filter allows; weights a softmax of N(0, 1) over the token's picks.
MoeInputs random_inputs(const MoeDims& d, std::mt19937_64& rng, const ExpertFilter& allowed) {
  MoeInputs in;
  in.X = gpu_test::random_bf16(size_t(d.M) * d.H, rng);
  std::normal_distribution<double> logit(0.0, 1.0);
  for (int m = 0; m < d.M; ++m) {
    std::vector<double> l(d.k);
    double sum = 0;
    for (int j = 0; j < d.k; ++j) {
      std::vector<int> cand;
      for (int e = 0; e < d.E_global; ++e)
        if (allowed(m, j, e) && std::find(in.ids.end() - j, in.ids.end(), e) == in.ids.end()) cand.push_back(e);
      REQUIRE(!cand.empty());
      in.ids.push_back(cand[std::uniform_int_distribution<size_t>(0, cand.size() - 1)(rng)]);
      l[j] = std::exp(logit(rng));
      sum += l[j];
    }
    for (int j = 0; j < d.k; ++j) in.weights.push_back(float(l[j] / sum));
  }
  return in;
}

const ExpertFilter kAnyExpert = [](int, int, int) { return true; };

bool is_local(const MoeDims& d, int global_id) {
  return submission::moe::moe_local_expert(global_id, d.ep_rank, d.E_local) >= 0;
}

// The op on the device with its inputs and a poisonable output.
struct DeviceMoe {
  const MoeDims d;
  DeviceBuffer<uint8_t> W13, W2;
  DeviceBuffer<uint16_t> S13, S2, X, out;
  DeviceBuffer<int32_t> ids;
  DeviceBuffer<float> weights;

  DeviceMoe(const MoeDims& dims, const MoeWeightsHost& w, const MoeInputs& in)
      : d(dims),
        W13(w.W13),
        W2(w.W2),
        S13(w.S13),
        S2(w.S2),
        X(in.X),
        out(size_t(d.M) * d.H),
        ids(in.ids),
        weights(in.weights) {}
  submission::MoeWeights device_weights() const {
    return {W13.ptr, reinterpret_cast<const submission::bf16*>(S13.ptr), W2.ptr,
            reinterpret_cast<const submission::bf16*>(S2.ptr)};
  }
  submission::MoeIO io() const {
    return {reinterpret_cast<const submission::bf16*>(X.ptr), ids.ptr, weights.ptr,
            reinterpret_cast<submission::bf16*>(out.ptr)};
  }
  void upload(const MoeInputs& in) {
    X.upload(in.X);
    ids.upload(in.ids);
    weights.upload(in.weights);
  }
  // Poisons the output, runs once on the legacy stream, returns the output.
  std::vector<uint16_t> run(submission::Moe& op) {
    out.poison();
    op.run(io(), nullptr);
    gpu_test::sync_and_check("moe run");
    return out.download();
  }
};

std::vector<double> reference(const MoeDims& d, const MoeWeightsHost& w, const MoeInputs& in) {
  return ref::moe_cpu(d.M, d.H, d.I, d.E_global, d.E_local, d.k, d.ep_rank, in.X.data(), in.ids.data(),
                      in.weights.data(), w.W13.data(), w.S13.data(), w.W2.data(), w.S2.data());
}

void require_correct(const std::vector<uint16_t>& got, const std::vector<double>& want, const std::string& what) {
  const scorer::CheckResult r = scorer::check_bf16(got.data(), want.data(), want.size(), scorer::moe_tolerance());
  INFO(what << ": rel_l2 " << r.rel_l2 << ", worst element " << r.worst_elem);
  CHECK_MESSAGE(r.ok, r.reason);
}

// Runs `body` for every variant, simplest first, each on its own: a failed
// REQUIRE or an exception ends that variant only (a sticky CUDA error will
// still fail the ones after it, but the first failure names the culprit).
void for_each_variant(const std::function<void(const std::string&)>& body) {
  std::vector<std::string> names = gpu_test::variants_under_test("moe_w4a16");
  std::reverse(names.begin(), names.end());  // gemv, mma_nopdl, ..., default
  for (const std::string& variant : names) {
    CAPTURE(variant);
    try {
      body(variant);
    } catch (const std::exception& e) {
      FAIL_CHECK(variant << ": " << e.what());
    } catch (...) {
      // a REQUIRE failed inside body and doctest has reported it
    }
  }
}

// Every variant: two runs (correct, bit-identical), then a graph captured on
// a non-default stream and replayed twice on new inputs.
void check_all_variants(const MoeDims& d, const ExpertFilter& allowed, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const MoeWeightsHost w = random_weights(d, rng);
  const MoeInputs in = random_inputs(d, rng, allowed);
  const std::vector<double> want = reference(d, w, in);
  const MoeInputs in2 = random_inputs(d, rng, allowed);
  const std::vector<double> want2 = reference(d, w, in2);
  DeviceMoe dev(d, w, in);
  const int block_tokens = submission::moe::moe_block_tokens(d.M, d.k, d.E_global);
  for_each_variant([&](const std::string& variant) {
    if (variant == "mma_rows128" && block_tokens > 32) {
      CHECK_THROWS_AS(submission::dev::make_moe(d, dev.device_weights(), variant), std::invalid_argument);
      return;
    }
    auto op = submission::dev::make_moe(d, dev.device_weights(), variant);
    dev.upload(in);
    const std::vector<uint16_t> first = dev.run(*op);
    require_correct(first, want, "first run");
    const std::vector<uint16_t> second = dev.run(*op);
    CHECK_MESSAGE(first == second, "second run differs from the first");

    cudaStream_t stream;
    GT_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    GT_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    try {
      op->run(dev.io(), stream);
    } catch (...) {
      // End the capture, or this thread's next allocations fail too.
      cudaGraph_t partial = nullptr;
      if (cudaStreamEndCapture(stream, &partial) == cudaSuccess && partial) cudaGraphDestroy(partial);
      cudaStreamDestroy(stream);
      throw;
    }
    GT_CUDA(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    dev.upload(in2);
    std::vector<uint16_t> replays[2];
    for (auto& got : replays) {
      dev.out.poison();
      GT_CUDA(cudaDeviceSynchronize());  // the poison is on the legacy stream
      GT_CUDA(cudaGraphLaunch(exec, stream));
      GT_CUDA(cudaStreamSynchronize(stream));
      gpu_test::sync_and_check("graph replay");
      got = dev.out.download();
    }
    require_correct(replays[0], want2, "graph replay on new inputs");
    CHECK_MESSAGE(replays[0] == replays[1], "second replay differs from the first");
    GT_CUDA(cudaGraphExecDestroy(exec));
    GT_CUDA(cudaGraphDestroy(graph));
    GT_CUDA(cudaStreamDestroy(stream));
  });
}

}  // namespace

TEST_CASE("moe small shapes cover every block size") {
  // The cases below, by the plan's block size: each tensor-core instantiation
  // (8, 16, 32, 64 routes per block) runs somewhere in this suite.
  std::set<int> sizes;
  for (const MoeDims& d : {MoeDims{7, 256, 384, 16, 4, 3, 2}, MoeDims{20, 256, 384, 8, 8, 2, 0},
                           MoeDims{33, 256, 256, 8, 8, 2, 0}, MoeDims{300, 256, 128, 8, 8, 2, 0}})
    sizes.insert(submission::moe::moe_block_tokens(d.M, d.k, d.E_global));
  CHECK(sizes == std::set<int>{8, 16, 32, 64});
}

// Also make sanitize's moe shape.
TEST_CASE("moe EP rank 2 of 4, odd sizes, some tokens with no local route" * doctest::test_suite("sanitize")) {
  const MoeDims d{7, 256, 384, 16, 4, 3, 2};
  // Token 0 routes only to other ranks; the rest anywhere.
  check_all_variants(
      d, [&](int m, int, int e) { return m != 0 || !is_local(d, e); }, 11);
}

TEST_CASE("moe all tokens on one expert") {
  const MoeDims d{40, 256, 384, 8, 8, 2, 0};
  // Each token's first pick is expert 5: 40 routes in blocks of 32.
  check_all_variants(
      d, [](int, int j, int e) { return j != 0 || e == 5; }, 12);
}

TEST_CASE("moe 32 routes, 16 of them on one expert: the GEMM CTAs' own alignment at its limit") {
  const MoeDims d{16, 256, 384, 8, 8, 2, 0};
  REQUIRE(d.M * d.k == submission::moe::kAlignWarpRoutes);
  check_all_variants(
      d, [](int, int j, int e) { return j != 0 || e == 5; }, 25);
}

TEST_CASE("moe no local route anywhere: zeros") {
  const MoeDims d{9, 256, 256, 16, 4, 3, 1};
  check_all_variants(
      d, [&](int, int, int e) { return !is_local(d, e); }, 13);
}

TEST_CASE("moe k = 1 under EP") { check_all_variants(MoeDims{13, 384, 256, 8, 4, 1, 1}, kAnyExpert, 14); }

// H = 4096 gives GEMM 1 units of 32 stages, so the default takes the
// stream-K schedule (kStreamKMinGroups) and cuts units between CTAs: their
// parts are summed by whichever CTA completes them, bit-identically.
TEST_CASE("moe H = 4096: GEMM 1 units cut between CTAs (stream-K)") {
  check_all_variants(MoeDims{5, 4096, 256, 8, 8, 2, 0}, kAnyExpert, 18);
}

TEST_CASE("moe H = 4096 under EP, odd M, blocks of 16: stream-K with partial blocks") {
  check_all_variants(MoeDims{23, 4096, 384, 16, 8, 4, 1}, kAnyExpert, 19);
}

TEST_CASE("moe M = 1") { check_all_variants(MoeDims{1, 256, 256, 16, 16, 4, 0}, kAnyExpert, 15); }

TEST_CASE("moe blocks of 16 routes") { check_all_variants(MoeDims{20, 256, 384, 8, 8, 2, 0}, kAnyExpert, 16); }

TEST_CASE("moe M = 33, E_global = E_local = 8, k = 2") {
  check_all_variants(MoeDims{33, 256, 256, 8, 8, 2, 0}, kAnyExpert, 17);
}

TEST_CASE("moe M = 300: blocks of 64, several blocks per expert, one scale group in GEMM 2") {
  check_all_variants(MoeDims{300, 256, 128, 8, 8, 2, 0}, kAnyExpert, 18);
}

TEST_CASE("moe M = 1100, k = 4 under EP: more routes than the alignment keeps in shared memory") {
  // 4400 routes: the alignment caches the local experts of the first 4096
  // and re-reads the rest from topk_ids, in nine chunks of placement.
  check_all_variants(MoeDims{1100, 256, 128, 16, 8, 4, 1}, kAnyExpert, 24);
}

TEST_CASE("moe the one-warp alignment lays out routes exactly as the CTA alignment") {
  // Both kernels on the same ids, each into its own poisoned workspace; every
  // word the GEMMs may read must match: the block count, each block's expert
  // and route count, every slot (routes and padding) and each token's count.
  struct Case {
    int M, k, E_global, E_local, ep_rank, block_tokens;
  };
  const Case cases[] = {{1, 8, 128, 128, 0, 8}, {1, 2, 8, 8, 0, 8},   {3, 8, 256, 32, 1, 8},
                        {4, 8, 64, 16, 2, 16},  {32, 1, 8, 8, 0, 8},  {1, 32, 64, 64, 0, 8},
                        {5, 5, 40, 7, 3, 32},   {2, 16, 4, 4, 0, 64}, {7, 3, 24, 24, 0, 8}};
  std::mt19937_64 rng(29);
  for (const Case& c : cases) {
    CAPTURE(c.M);
    CAPTURE(c.k);
    CAPTURE(c.E_local);
    CAPTURE(c.block_tokens);
    const int routes = c.M * c.k;
    REQUIRE(routes <= submission::moe::kAlignWarpRoutes);
    const int max_blocks = submission::moe::moe_max_blocks(c.M, c.k, c.E_local, c.block_tokens);
    const size_t ints = size_t(submission::moe::aligned_routes_ints(c.M, c.block_tokens, max_blocks));
    for (int trial = 0; trial < 24; ++trial) {
      // Trial 0 sends every route to one expert; the others draw any global id.
      std::uniform_int_distribution<int> any(0, c.E_global - 1);
      const int one = any(rng);
      std::vector<int32_t> ids(routes);
      for (auto& id : ids) id = trial == 0 ? one : any(rng);
      DeviceBuffer<int32_t> d_ids(ids);
      DeviceBuffer<int> ws_cta(ints), ws_warp(ints);
      ws_cta.poison();
      ws_warp.poison();
      auto layout = [&](int* p) { return submission::moe::aligned_routes_at(p, c.block_tokens, max_blocks); };
      const int smem = int(submission::moe::align_smem_bytes(c.E_local, routes));
      submission::moe::moe_align_kernel<<<1, submission::moe::kAlignThreads, smem>>>(
          d_ids.ptr, c.M, c.k, c.E_local, c.ep_rank, c.block_tokens, max_blocks, layout(ws_cta.ptr));
      submission::moe::moe_align_warp_kernel<<<1, 32>>>(d_ids.ptr, c.M, c.k, c.E_local, c.ep_rank, c.block_tokens,
                                                        max_blocks, layout(ws_warp.ptr));
      gpu_test::sync_and_check("alignment kernels");
      const std::vector<int> a = ws_cta.download(), b = ws_warp.download();
      const int blocks = a[0];
      REQUIRE(b[0] == blocks);
      REQUIRE(blocks >= 0);
      REQUIRE(blocks <= max_blocks);
      for (int i = 0; i < blocks; ++i) {
        REQUIRE(b[1 + i] == a[1 + i]);                            // expert
        REQUIRE(b[1 + max_blocks + i] == a[1 + max_blocks + i]);  // routes
      }
      const size_t slots = 1 + 2 * size_t(max_blocks);
      for (size_t i = slots; i < ints; ++i) REQUIRE(b[i] == a[i]);  // slots, then token counts
    }
  }
}

TEST_CASE("moe GEMM 2's two combines give the same bits") {
  // The deferred combine (after all units) and the election (per unit) sum
  // each token's routes in the same order. With I = 768 (6 groups) neither
  // splits GEMM 2, so their outputs must match bit for bit; under EP with a
  // token that has no local route, blocks of 16.
  const MoeDims d{45, 512, 768, 16, 8, 4, 1};
  std::mt19937_64 rng(23);
  const MoeWeightsHost w = random_weights(d, rng);
  const MoeInputs in = random_inputs(d, rng, [&](int m, int, int e) { return m != 3 || !is_local(d, e); });
  DeviceMoe dev(d, w, in);
  auto deferred = submission::dev::make_moe(d, dev.device_weights(), "mma_grid_combine");
  auto election = submission::dev::make_moe(d, dev.device_weights(), "mma_unit_combine");
  const std::vector<uint16_t> a = dev.run(*deferred), b = dev.run(*election);
  require_correct(a, reference(d, w, in), "deferred combine");
  CHECK_MESSAGE(a == b, "the deferred combine and the election differ");
}

TEST_CASE("moe GEMM 2 split over I, under EP and with a token routed off-rank") {
  // One or two blocks of few rows: the splitting variants cut I (10 and 16
  // groups) into 2 and 4 parts whose rows the combine must add in order.
  for (const MoeDims& d : {MoeDims{3, 256, 1280, 16, 8, 2, 0}, MoeDims{2, 128, 2048, 16, 8, 3, 1}}) {
    CAPTURE(d.I);
    const submission::moe::MoePlan p = submission::moe::plan_moe(d, "default", 132);
    CHECK(p.splits_down == (d.I == 1280 ? 2 : 4));
    check_all_variants(
        d, [&](int m, int, int e) { return m != 1 || !is_local(d, e); }, 19 + d.M);
  }
}

namespace {

// The default plan on the H200 (132 SMs), whose path each case below names.
submission::moe::MoePlan h200_plan(const MoeDims& d) { return submission::moe::plan_moe(d, "default", 132); }

// Routes anywhere, except token `m_off`'s, which all go to other ranks.
ExpertFilter off_rank_token(const MoeDims& d, int m_off) {
  return [d, m_off](int m, int, int e) { return m != m_off || !is_local(d, e); };
}

}  // namespace

TEST_CASE("moe GEMM 2 split over I with blocks of 16, 32 and 64 routes") {
  // The split tests above all have blocks of 8 (one token tile); with more
  // token tiles the split kernels had run only at the public mixtral shape
  // (blocks of 16), never with 4 or 8 tiles (the ws, queue and moe_mma_kernel
  // split instantiations). moe_down_splits splits where GEMM 2's expected
  // units leave CTAs idle; the default then combines after all units or per
  // unit (moe_defer_combine), both here, and I = 1536 splits in 3, an odd
  // count. Blocks of 32 at H = 128, I = 1024: 128-row units in both GEMMs
  // (mma_contig's GEMM 1 included). Under EP with a token routed off-rank.
  struct Case {
    MoeDims d;
    int block_tokens, splits;
    bool deferred;
  };
  for (const Case& c :
       {Case{{13, 256, 1280, 8, 4, 2, 1}, 16, 2, true}, Case{{9, 128, 1536, 8, 4, 3, 1}, 16, 3, false},
        Case{{21, 256, 1024, 8, 4, 3, 1}, 32, 2, true}, Case{{31, 128, 1024, 32, 16, 8, 1}, 32, 2, false},
        Case{{39, 128, 1536, 4, 2, 2, 1}, 64, 3, true}}) {
    CAPTURE(c.d.M);
    const submission::moe::MoePlan p = h200_plan(c.d);
    CHECK(p.block_tokens == c.block_tokens);
    CHECK(p.splits_down == c.splits);
    CHECK(p.deferred_combine == c.deferred);
    check_all_variants(c.d, off_rank_token(c.d, 1), 31 + c.d.M);
  }
}

// Stream-K (GEMM 1 at H / 128 >= kStreamKMinGroups) had run with blocks of 8
// and 16 only, and at H = 4096 only among the small shapes, where the
// 16-stage ranges cut every 32-stage unit exactly in half.
TEST_CASE("moe H either side of kStreamKMinGroups: 33 groups on stream-K with blocks of 32, 31 without") {
  // H = 4224 (33 groups, just past the threshold): the ranges cut units
  // unevenly, a CTA's range holding the tail of one unit and the head of the
  // next, and mma_queue's chunks of 16 stages leave a last chunk of 1; blocks
  // of 32 in 128-row units (RT = 2 x NT = 4 partials in the fix-up). H = 3968
  // (31 groups, just below): whole units, each starting at a group of its own
  // (rotate_up) over an odd group count.
  const MoeDims a{31, 4224, 128, 8, 2, 2, 3}, c{5, 3968, 128, 8, 8, 2, 0};
  REQUIRE(a.H / submission::kMoeGroupSize == submission::moe::kStreamKMinGroups + 1);
  REQUIRE(c.H / submission::kMoeGroupSize == submission::moe::kStreamKMinGroups - 1);
  const submission::moe::MoePlan pa = h200_plan(a), pc = h200_plan(c);
  CHECK(pa.block_tokens == 32);
  CHECK(pa.stream_k_up);
  CHECK(pa.tile_rows_up == 128);
  CHECK_FALSE(pc.stream_k_up);
  CHECK(pc.rotate_up);
  check_all_variants(a, off_rank_token(a, 0), 41);
  check_all_variants(c, kAnyExpert, 43);
}

TEST_CASE("moe stream-K with blocks of 64 routes: 64-row units cut between CTAs, k = E_global") {
  // Blocks of 64 (NT = 8) take 64-row units, also under stream-K; k =
  // E_global: every token routes to both experts, one of them local.
  const MoeDims b{33, 4096, 128, 2, 1, 2, 1};
  const submission::moe::MoePlan pb = h200_plan(b);
  CHECK(pb.block_tokens == 64);
  CHECK(pb.stream_k_up);
  CHECK(pb.tile_rows_up == 64);
  check_all_variants(b, kAnyExpert, 42);
}

TEST_CASE("moe H = 7168 with blocks of 32: each stream-K unit over several CTAs, 128-row units in GEMM 2") {
  // 56 groups a unit, about four ranges of 16 stages; GEMM 2 in 128-row units,
  // so the mma, mma_contig and queue kernels of blocks of 32 with 128 rows
  // (NT = 4, RT = 2) run too.
  const MoeDims e{31, 7168, 128, 8, 4, 2, 1};
  const submission::moe::MoePlan pe = h200_plan(e);
  CHECK(pe.block_tokens == 32);
  CHECK(pe.stream_k_up);
  CHECK(pe.tile_rows_down == 128);
  check_all_variants(e, off_rank_token(e, 7), 44);
}

TEST_CASE("moe E_local = 2048, the most the op takes: the alignment over 2048 local experts") {
  // The suite's largest E_local was 128; the alignment kernel scans the
  // experts' block counts in chunks of its 512 threads and keeps a [16 warps]
  // [E_local] table (about 150 KB of shared memory here), and the GEMMs index
  // 2048 experts' weights. M = 1 (the GEMM CTAs align their 8 routes
  // themselves): one route on local expert 0, one on the last. M = 45 under EP
  // (rank 1 of 2, E_global = 4096): the alignment launch, every token's first
  // pick the last local expert (global 4095), token 0 routed off-rank.
  const MoeDims one{1, 128, 128, 2048, 2048, 8, 0}, many{45, 128, 128, 4096, 2048, 4, 1};
  CHECK(h200_plan(one).cta_align);
  CHECK_FALSE(h200_plan(many).cta_align);
  check_all_variants(
      one, [](int, int j, int e) { return j == 0   ? e == 2047
                                          : j == 1 ? e == 0
                                                   : true; }, 45);
  check_all_variants(
      many, [&](int m, int j, int e) { return m == 0 ? !is_local(many, e) : j != 0 || e == 4095; }, 46);
}

TEST_CASE("moe the alignment's edges: 33 routes, the largest in-CTA routing, k = 32, in-CTA blocks of 32") {
  using submission::moe::aligned_routes_ints;
  using submission::moe::kAlignWarpRoutes;
  // 33 routes, one past kAlignWarpRoutes: the CTA alignment launch, not the
  // GEMM CTAs' own.
  const MoeDims above{11, 256, 256, 16, 8, 3, 1};
  REQUIRE(above.M * above.k == kAlignWarpRoutes + 1);
  CHECK_FALSE(h200_plan(above).cta_align);
  check_all_variants(above, off_rank_token(above, 4), 47);
  // 32 routes to 32 local experts in blocks of 8: 36 blocks, 393 ints, the
  // most any shape with at most 32 routes puts in a GEMM CTA's shared memory
  // (kCtaRoutingMaxInts = 512 is never reached).
  const MoeDims largest{32, 256, 256, 32, 32, 1, 0};
  const submission::moe::MoePlan pl = h200_plan(largest);
  CHECK(pl.cta_align);
  CHECK(aligned_routes_ints(largest.M, pl.block_tokens, pl.max_blocks) == 393);
  check_all_variants(largest, kAnyExpert, 48);
  // k = 32 at M = 1: one token's routes fill the warp (its route mask is all
  // 32 bits), under EP (rank 1 of 4).
  const MoeDims k32{1, 256, 128, 64, 16, 32, 1};
  CHECK(h200_plan(k32).cta_align);
  check_all_variants(k32, kAnyExpert, 49);
  // Blocks of 32 (31 routes, E_global = 4) aligned in the GEMM CTAs.
  const MoeDims bt32{31, 256, 256, 4, 2, 1, 1};
  const submission::moe::MoePlan p32 = h200_plan(bt32);
  CHECK(p32.block_tokens == 32);
  CHECK(p32.cta_align);
  check_all_variants(bt32, off_rank_token(bt32, 30), 50);
}

TEST_CASE("moe GEMM 2 waiting on GEMM 1's units (h flags) at small shapes, combine per unit") {
  // The default's h_flags (GEMM 1's expected units fill a wave) had only run in
  // the public-size shapes, and there with GEMM 2 on the work queue and its
  // combine after all units. Here, with EP and a token routed off-rank: GEMM 2
  // split in 4 with the GEMM CTAs aligning their own routes, and 64-row units
  // in both GEMMs over 128 local experts; both combine per unit.
  for (const MoeDims& d : {MoeDims{5, 128, 2048, 64, 32, 6, 1}, MoeDims{21, 128, 512, 256, 128, 6, 1}}) {
    CAPTURE(d.M);
    const submission::moe::MoePlan p = h200_plan(d);
    CHECK(p.h_flags);
    CHECK_FALSE(p.deferred_combine);
    CHECK_FALSE(p.queue_down);
    check_all_variants(d, off_rank_token(d, 2), 100 + d.M);
  }
}

TEST_CASE("moe the default's per-unit combine with blocks of 16 and 32 routes") {
  // Where GEMM 2's units are fewer than its CTAs and than its (token, row
  // group) pairs, the default combines per unit (moe_defer_combine); the suite
  // had that by default with blocks of 8 only. k = 16 in the second.
  for (const MoeDims& d : {MoeDims{12, 256, 128, 32, 16, 8, 1}, MoeDims{31, 128, 128, 64, 32, 16, 1}}) {
    CAPTURE(d.M);
    const submission::moe::MoePlan p = h200_plan(d);
    CHECK(p.block_tokens == (d.M == 12 ? 16 : 32));
    CHECK_FALSE(p.deferred_combine);
    check_all_variants(d, off_rank_token(d, 0), 200 + d.M);
  }
}

TEST_CASE("moe M = 4097, k = 1, 2 of 2048 experts local: nearly every token's output is zeros") {
  // 4097 routes: one past the alignment's cache of 4096, and GEMM 1's last
  // step zeroes thousands of tokens with no local route. Every 1000th token
  // (from 7) routes locally, so a few do.
  const MoeDims d{4097, 128, 256, 2048, 2, 1, 5};
  REQUIRE(d.M * d.k == submission::moe::kAlignCachedRoutes + 1);
  check_all_variants(
      d, [&](int m, int, int e) { return m % 1000 != 7 || is_local(d, e); }, 70);
}

namespace {

// A public-size shape: the whole batch runs on the device, a few tokens are
// checked against the fp64 reference one route at a time (E_local = 1 with
// ep_rank = the route's expert, so only that expert is dequantized).
void check_public_shape(const MoeDims& d, std::vector<int> tokens, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const MoeWeightsHost w = random_weights(d, rng);
  const MoeInputs in = random_inputs(d, rng, kAnyExpert);
  std::vector<double> want;
  for (int m : tokens) {
    std::vector<double> row(d.H, 0.0);
    for (int j = 0; j < d.k; ++j) {
      const int g = in.ids[size_t(m) * d.k + j], e = g - d.ep_rank * d.E_local;
      if (e < 0 || e >= d.E_local) continue;
      const size_t w13 = size_t(e) * 2 * d.I * d.H, w2 = size_t(e) * d.H * d.I;
      const std::vector<double> part =
          ref::moe_cpu(1, d.H, d.I, d.E_global, 1, d.k, g, &in.X[size_t(m) * d.H], &in.ids[size_t(m) * d.k],
                       &in.weights[size_t(m) * d.k], &w.W13[w13 / 2], &w.S13[w13 / ref::kGroupSize], &w.W2[w2 / 2],
                       &w.S2[w2 / ref::kGroupSize]);
      for (int n = 0; n < d.H; ++n) row[n] += part[n];
    }
    want.insert(want.end(), row.begin(), row.end());
  }
  DeviceMoe dev(d, w, in);
  for_each_variant([&](const std::string& variant) {
    auto op = submission::dev::make_moe(d, dev.device_weights(), variant);
    const std::vector<uint16_t> out = dev.run(*op);
    std::vector<uint16_t> got;
    for (int m : tokens) got.insert(got.end(), out.begin() + size_t(m) * d.H, out.begin() + size_t(m + 1) * d.H);
    require_correct(got, want, "checked tokens");
    CHECK_MESSAGE(dev.run(*op) == out, "second run differs from the first");
    const size_t unwritten =
        std::count_if(out.begin(), out.end(), [](uint16_t v) { return !std::isfinite(ref::bf16_to_float(v)); });
    CHECK_MESSAGE(unwritten == 0, unwritten << " outputs not finite (unwritten?)");
  });
}

}  // namespace

TEST_CASE("moe public size: qwen3 M=64") {
  check_public_shape(MoeDims{64, 2048, 768, 128, 128, 8, 0}, {0, 37, 63}, 21);
}

TEST_CASE("moe public size: dsv3 EP8 rank 5 M=32") {
  check_public_shape(MoeDims{32, 7168, 2048, 256, 32, 8, 5}, {0, 1, 2, 31}, 22);
}

TEST_CASE("moe public size: mixtral M=16") { check_public_shape(MoeDims{16, 4096, 14336, 8, 8, 2, 0}, {0, 15}, 23); }

// dev/shapes/ep_ranks.toml's kind of rank (perf log round 100): an eighth of the experts or
// fewer at small M, so a call has a few local routes, often none on some tokens.
TEST_CASE("moe public size: dsv3 EP32 rank 11 M=8, a few local routes") {
  check_public_shape(MoeDims{8, 7168, 2048, 256, 8, 8, 11}, {0, 1, 2, 3, 4, 5, 6, 7}, 26);
}
