// The cuBLAS references and baselines against the fp64 CPU references, on small
// odd shapes with random inputs and outputs poisoned before every run. Each
// object runs twice on fresh inputs, since nothing may carry over between runs;
// the baselines that must be capturable run the second time from a CUDA graph.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "reference/baselines.h"
#include "reference/bf16_host.h"
#include "reference/cpu_reference.h"
#include "reference/int4.h"
#include "reference/reference.h"
#include "scorer/check.h"
#include "tests/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;
using gpu_test::random_bf16;
using submission::bf16;

// fp32 outputs of the references: pedantic fp32 GEMMs against fp64 sums.
constexpr double kRefRelL2 = 1e-5;

bf16* as_bf16(DeviceBuffer<uint16_t>& b) { return reinterpret_cast<bf16*>(b.ptr); }

double l2_norm(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return std::sqrt(s);
}

// NaN (an unwritten, poisoned element) makes it NaN, which fails every bound.
double l2_error(const std::vector<float>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  double s = 0;
  for (size_t i = 0; i < got.size(); ++i) s += (got[i] - want[i]) * (got[i] - want[i]);
  return std::sqrt(s);
}

double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
  return l2_error(got, want) / l2_norm(want);
}

void check_bf16_output(const std::vector<uint16_t>& got, const std::vector<double>& want,
                       const scorer::Bf16Tolerance& tol = {}) {
  REQUIRE(got.size() == want.size());
  const scorer::CheckResult r = scorer::check_bf16(got.data(), want.data(), want.size(), tol);
  CHECK_MESSAGE(r.ok, r.reason << " (rel L2 " << r.rel_l2 << ")");
}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
};

// Enqueues `run` on s directly, or captures it into a CUDA graph and launches
// that: the capture fails if run allocates, synchronises or leaves the stream.
void enqueue(bool as_graph, cudaStream_t s, const std::function<void()>& run) {
  if (!as_graph) return run();
  GT_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  cudaGraph_t graph = nullptr;
  try {
    run();
  } catch (...) {
    cudaStreamEndCapture(s, &graph);
    if (graph) cudaGraphDestroy(graph);
    throw;
  }
  GT_CUDA(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec = nullptr;
  GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  GT_CUDA(cudaGraphLaunch(exec, s));
  GT_CUDA(cudaStreamSynchronize(s));
  GT_CUDA(cudaGraphExecDestroy(exec));
  GT_CUDA(cudaGraphDestroy(graph));
}

// ---------------------------------------------------------------- pooler

TEST_CASE("pooler reference and baseline match the CPU reference") {
  const int B = 3, H = 136;
  std::mt19937_64 rng(101);
  const std::vector<uint16_t> W = random_bf16(size_t(H) * H, rng, 1.0 / std::sqrt(H));
  const std::vector<uint16_t> bias = random_bf16(H, rng, 0.1);
  DeviceBuffer<uint16_t> dW(W), dbias(bias);
  const submission::PoolerWeights w{as_bf16(dW), as_bf16(dbias)};
  Stream stream;  // outlives the objects bound to it
  const auto gpu_ref = reference::make_pooler_reference({B, H}, w);
  const auto baseline = reference::make_pooler_baseline({B, H}, w);

  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    std::uniform_int_distribution<int> length(1, 9);
    std::vector<int32_t> cu(B + 1, 0);
    for (int b = 0; b < B; ++b) cu[b + 1] = cu[b] + length(rng);
    const std::vector<uint16_t> hidden = random_bf16(size_t(cu[B]) * H, rng);
    const std::vector<double> want = ref::pooler_cpu(B, H, hidden.data(), cu.data(), W.data(), bias.data());

    DeviceBuffer<uint16_t> dhidden(hidden), out(size_t(B) * H);
    DeviceBuffer<int32_t> dcu(cu);
    DeviceBuffer<float> ref_out(size_t(B) * H);
    ref_out.poison();
    out.poison();
    gpu_ref->run(as_bf16(dhidden), dcu.ptr, ref_out.ptr, stream.s);
    const submission::PoolerIO io{as_bf16(dhidden), dcu.ptr, cu[B], as_bf16(out)};
    enqueue(round == 1, stream.s, [&] { baseline->run(io, stream.s); });
    gpu_test::sync_and_check("pooler");

    CHECK(rel_l2(ref_out.download(), want) <= kRefRelL2);
    check_bf16_output(out.download(), want);
  }
}

// ---------------------------------------------------------------- dense

TEST_CASE("dense reference and baseline match the CPU reference") {
  const int M = 5, N = 77, K = 200;
  std::mt19937_64 rng(202);
  const std::vector<uint16_t> W = random_bf16(size_t(N) * K, rng, 1.0 / std::sqrt(K));
  DeviceBuffer<uint16_t> dW(W);
  const submission::DenseWeights w{as_bf16(dW)};
  Stream stream;  // outlives the objects bound to it
  const auto gpu_ref = reference::make_dense_reference({M, N, K}, w);
  const auto baseline = reference::make_dense_baseline({M, N, K}, w);

  for (int round = 0; round < 2; ++round) {
    CAPTURE(round);
    const std::vector<uint16_t> X = random_bf16(size_t(M) * K, rng);
    const std::vector<double> want = ref::dense_cpu(M, N, K, X.data(), W.data());
    // The second round moves X and out 16 bytes off cudaMalloc's 256-byte
    // alignment, the least the contract promises.
    const size_t off = round == 1 ? 8 : 0;
    std::vector<uint16_t> X_padded(off, 0);
    X_padded.insert(X_padded.end(), X.begin(), X.end());

    DeviceBuffer<uint16_t> dX(X_padded), out(off + size_t(M) * N);
    DeviceBuffer<float> ref_out(size_t(M) * N);
    ref_out.poison();
    out.poison();
    gpu_ref->run(as_bf16(dX) + off, ref_out.ptr, stream.s);
    const submission::DenseIO io{as_bf16(dX) + off, as_bf16(out) + off};
    enqueue(round == 1, stream.s, [&] { baseline->run(io, stream.s); });
    gpu_test::sync_and_check("dense");

    CHECK(rel_l2(ref_out.download(), want) <= kRefRelL2);
    const std::vector<uint16_t> got = out.download();
    check_bf16_output(std::vector<uint16_t>(got.begin() + off, got.end()), want);
  }
}

// ---------------------------------------------------------------- router

TEST_CASE("router reference and baseline match the CPU reference") {
  // k == E and k == 1 are the edges of the top-k passes.
  const submission::RouterDims shapes[] = {{5, 1000, 96, 4}, {3, 64, 7, 7}, {2, 128, 33, 1}};
  std::mt19937_64 rng(303);
  for (const submission::RouterDims& d : shapes) {
    CAPTURE(d.T);
    CAPTURE(d.H);
    CAPTURE(d.E);
    CAPTURE(d.k);
    const std::vector<uint16_t> Wg = random_bf16(size_t(d.E) * d.H, rng, 1.0 / std::sqrt(d.H));
    DeviceBuffer<uint16_t> dWg(Wg);
    const submission::RouterWeights w{as_bf16(dWg)};
    Stream stream;  // outlives the objects bound to it
    const auto gpu_ref = reference::make_router_reference(d, w);
    const auto baseline = reference::make_router_baseline(d, w);

    for (int round = 0; round < 2; ++round) {
      CAPTURE(round);
      const std::vector<uint16_t> X = random_bf16(size_t(d.T) * d.H, rng);
      const ref::RouterCpu want = ref::router_cpu(d.T, d.H, d.E, d.k, X.data(), Wg.data());

      DeviceBuffer<uint16_t> dX(X);
      DeviceBuffer<float> ref_logits(size_t(d.T) * d.E), logits(size_t(d.T) * d.E), weights(size_t(d.T) * d.k);
      DeviceBuffer<int32_t> ids(size_t(d.T) * d.k);
      ref_logits.poison();
      logits.poison();
      weights.poison();
      ids.poison();
      gpu_ref->run(as_bf16(dX), ref_logits.ptr, stream.s);
      const submission::RouterIO io{as_bf16(dX), logits.ptr, ids.ptr, weights.ptr};
      enqueue(round == 1, stream.s, [&] { baseline->run(io, stream.s); });
      gpu_test::sync_and_check("router");

      CHECK(rel_l2(ref_logits.download(), want.logits) <= kRefRelL2);
      const std::vector<float> got_logits = logits.download(), got_weights = weights.download();
      const std::vector<int32_t> got_ids = ids.download();
      const scorer::CheckResult r = scorer::check_router(d.T, d.E, d.k, got_logits.data(), got_ids.data(),
                                                         got_weights.data(), want.logits.data(), want.weights.data());
      CHECK_MESSAGE(r.ok, r.reason);
    }
  }
}

// ---------------------------------------------------------------- moe_w4a16

struct MoeHostWeights {
  std::vector<uint8_t> W13, W2;
  std::vector<uint16_t> S13, S2;
};

// Packed codes uniform in 0..15 for a [rows, cols] matrix, and scales
// U(0.75, 1.25) / sqrt(21.25 cols): 21.25 is the variance of q - 8, so each
// dequantized row has about unit norm and the outputs stay O(1).
void random_int4(int rows, int cols, std::mt19937_64& rng, std::vector<uint8_t>* packed,
                 std::vector<uint16_t>* scales) {
  std::uniform_int_distribution<int> code(0, 15);
  std::vector<uint8_t> codes(size_t(rows) * cols);
  for (auto& c : codes) c = uint8_t(code(rng));
  *packed = ref::pack_int4(codes, rows, cols);
  const double unit = 1.0 / std::sqrt(21.25 * cols);
  std::uniform_real_distribution<double> s(0.75 * unit, 1.25 * unit);
  scales->resize(size_t(rows) * (cols / ref::kGroupSize));
  for (auto& x : *scales) x = ref::float_to_bf16(float(s(rng)));
}

struct Routing {
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

// k distinct global experts per token in random order, weighted by the softmax
// of N(0, 1) logits. Token 0 gets no expert of this rank and token 1 at least
// one, where the dims allow.
Routing random_routing(const submission::MoeDims& d, std::mt19937_64& rng) {
  const int first = d.ep_rank * d.E_local;
  const auto local = [&](int e) { return e >= first && e < first + d.E_local; };
  Routing r;
  std::vector<int> experts(d.E_global);
  std::normal_distribution<double> logit(0.0, 1.0);
  for (int m = 0; m < d.M; ++m) {
    std::iota(experts.begin(), experts.end(), 0);
    std::shuffle(experts.begin(), experts.end(), rng);
    if (m == 0 && d.E_global - d.E_local >= d.k)
      std::stable_partition(experts.begin(), experts.end(), [&](int e) { return !local(e); });
    if (m == 1) std::stable_partition(experts.begin(), experts.end(), local);
    std::vector<double> p(d.k);
    double sum = 0;
    for (double& x : p) sum += (x = std::exp(logit(rng)));
    for (int j = 0; j < d.k; ++j) {
      r.ids.push_back(experts[j]);
      r.weights.push_back(float(p[j] / sum));
    }
  }
  return r;
}

// The reference rounds h = silu(gate) * up to bf16 from fp32 GEMM results,
// moe_cpu from fp64 ones. Where the exact h lies within kNearMidpoint of a bf16
// rounding midpoint the two may round apart by one ulp, moving the token's
// output by w * ulp * |W2_e[:, i]|, up to about 1e-4 of the output: one such
// flip in a few runs would fail a plain 1e-5 bound. Returns how far the flips
// can move the output together: summed within a token, in quadrature across
// tokens (other rows).
double moe_rounding_slack(const submission::MoeDims& d, const MoeHostWeights& w, const std::vector<uint16_t>& X,
                          const Routing& r) {
  constexpr double kNearMidpoint = 1e-5;  // relative; ~20x the fp32 GEMMs' error at these sizes
  const int H = d.H, I = d.I, first = d.ep_rank * d.E_local;
  std::vector<std::vector<double>> w13(d.E_local), w2_col_norm(d.E_local);
  double total2 = 0;
  for (int m = 0; m < d.M; ++m) {
    double row = 0;
    for (int j = 0; j < d.k; ++j) {
      const int e = r.ids[size_t(m) * d.k + j] - first;
      if (e < 0 || e >= d.E_local) continue;
      if (w13[e].empty()) {
        w13[e] = ref::dequant_int4(&w.W13[size_t(e) * 2 * I * H / 2], &w.S13[size_t(e) * 2 * I * H / ref::kGroupSize],
                                   2 * I, H);
        const std::vector<double> w2 =
            ref::dequant_int4(&w.W2[size_t(e) * H * I / 2], &w.S2[size_t(e) * H * I / ref::kGroupSize], H, I);
        w2_col_norm[e].assign(I, 0.0);
        for (int n = 0; n < H; ++n)
          for (int i = 0; i < I; ++i) w2_col_norm[e][i] += w2[size_t(n) * I + i] * w2[size_t(n) * I + i];
        for (double& c : w2_col_norm[e]) c = std::sqrt(c);
      }
      for (int i = 0; i < I; ++i) {
        double gate = 0, up = 0;
        for (int c = 0; c < H; ++c) {
          const double x = ref::bf16_to_float(X[size_t(m) * H + c]);
          gate += x * w13[e][size_t(i) * H + c];
          up += x * w13[e][size_t(I + i) * H + c];
        }
        const double h = gate / (1.0 + std::exp(-gate)) * up;
        const double ulp =
            std::fabs(ref::round_to_bf16(h * (1 + kNearMidpoint)) - ref::round_to_bf16(h * (1 - kNearMidpoint)));
        row += std::fabs(r.weights[size_t(m) * d.k + j]) * ulp * w2_col_norm[e][i];
      }
    }
    total2 += row * row;
  }
  return std::sqrt(total2);
}

struct MoeCaseData {
  submission::MoeDims d;
  MoeHostWeights hw;
  DeviceBuffer<uint8_t> dW13, dW2;
  DeviceBuffer<uint16_t> dS13, dS2;
  MoeCaseData(const submission::MoeDims& dims, std::mt19937_64& rng)
      : d(dims), hw(weights(dims, rng)), dW13(hw.W13), dW2(hw.W2), dS13(hw.S13), dS2(hw.S2) {}
  submission::MoeWeights device() { return {dW13.ptr, as_bf16(dS13), dW2.ptr, as_bf16(dS2)}; }
  static MoeHostWeights weights(const submission::MoeDims& d, std::mt19937_64& rng) {
    MoeHostWeights hw;
    random_int4(d.E_local * 2 * d.I, d.H, rng, &hw.W13, &hw.S13);
    random_int4(d.E_local * d.H, d.I, rng, &hw.W2, &hw.S2);
    return hw;
  }
  std::vector<double> want(const std::vector<uint16_t>& X, const Routing& r) const {
    return ref::moe_cpu(d.M, d.H, d.I, d.E_global, d.E_local, d.k, d.ep_rank, X.data(), r.ids.data(), r.weights.data(),
                        hw.W13.data(), hw.S13.data(), hw.W2.data(), hw.S2.data());
  }
};

// Runs `baseline` on X and routing r, captured in a CUDA graph when as_graph;
// its bf16 output.
std::vector<uint16_t> run_baseline(submission::Moe& baseline, const submission::MoeDims& d,
                                   const std::vector<uint16_t>& X, const Routing& r, bool as_graph, cudaStream_t s) {
  DeviceBuffer<uint16_t> dX(X), out(size_t(d.M) * d.H);
  DeviceBuffer<int32_t> ids(r.ids);
  DeviceBuffer<float> weights(r.weights);
  out.poison();
  enqueue(as_graph, s, [&] { baseline.run({as_bf16(dX), ids.ptr, weights.ptr, as_bf16(out)}, s); });
  gpu_test::sync_and_check("moe_w4a16 baseline");
  return out.download();
}

TEST_CASE("moe_w4a16 reference and every baseline match the CPU reference") {
  // Rank 2 of 4 with a token routed elsewhere only; k = 1; every expert local;
  // M = 1 (blocks of one row); M = 200 on 4 experts (several blocks of 64 per
  // expert in the batched baseline); M = 33 under EP (blocks of 64, partial).
  const submission::MoeDims shapes[] = {{7, 256, 384, 16, 4, 3, 2},  {7, 256, 384, 16, 4, 1, 2},
                                        {5, 128, 256, 8, 8, 2, 0},   {1, 128, 128, 16, 8, 4, 1},
                                        {200, 128, 128, 4, 4, 2, 0}, {33, 256, 128, 32, 8, 4, 3}};
  std::mt19937_64 rng(404);
  for (const submission::MoeDims& d : shapes) {
    CAPTURE(d.M);
    CAPTURE(d.H);
    CAPTURE(d.I);
    CAPTURE(d.E_global);
    CAPTURE(d.E_local);
    CAPTURE(d.k);
    CAPTURE(d.ep_rank);
    MoeCaseData c(d, rng);
    Stream stream;  // outlives the objects bound to it
    const auto gpu_ref = reference::make_moe_reference(d, c.device());
    const bool token0_unrouted = d.E_global - d.E_local >= d.k;
    for (const reference::BaselineInfo& info : reference::baselines("moe_w4a16")) {
      CAPTURE(info.name);
      const auto baseline = reference::make_moe_baseline(d, c.device(), info.name);
      for (int round = 0; round < 2; ++round) {
        CAPTURE(round);
        const std::vector<uint16_t> X = random_bf16(size_t(d.M) * d.H, rng);
        const Routing r = random_routing(d, rng);
        const std::vector<double> want = c.want(X, r);

        DeviceBuffer<uint16_t> dX(X);
        DeviceBuffer<int32_t> ids(r.ids);
        DeviceBuffer<float> weights(r.weights), ref_out(size_t(d.M) * d.H);
        ref_out.poison();
        gpu_ref->run(as_bf16(dX), ids.ptr, weights.ptr, ref_out.ptr, stream.s);
        gpu_test::sync_and_check("moe_w4a16 reference");
        const std::vector<float> got_ref = ref_out.download();
        const double slack = moe_rounding_slack(d, c.hw, X, r);
        CAPTURE(slack / l2_norm(want));
        CHECK(l2_error(got_ref, want) <= kRefRelL2 * l2_norm(want) + slack);

        // The second round from a CUDA graph where the baseline must be capturable.
        const std::vector<uint16_t> got = run_baseline(*baseline, d, X, r, round == 1 && !info.synchronizes, stream.s);
        // bf16-dequantized weights and bf16 intermediates, as a serving stack
        // runs them: held to the scorer's baseline check, not the submission's.
        check_bf16_output(got, want, scorer::baseline_tolerance());
        if (token0_unrouted) {
          CHECK(std::all_of(got_ref.begin(), got_ref.begin() + d.H, [](float v) { return v == 0.0f; }));
          CHECK(std::all_of(got.begin(), got.begin() + d.H, [](uint16_t v) { return v == 0; }));
        }
      }
    }
  }
}

// The default (batched) baseline on a routing given per route by route(m, j),
// as a CUDA graph, against the CPU reference.
void check_batched_baseline(const submission::MoeDims& d, const std::function<int(int, int)>& route) {
  std::mt19937_64 rng(405);
  Stream stream;
  MoeCaseData c(d, rng);
  const auto baseline = reference::make_moe_baseline(d, c.device());
  Routing r;
  for (int m = 0; m < d.M; ++m)
    for (int j = 0; j < d.k; ++j) {
      r.ids.push_back(route(m, j));
      r.weights.push_back(1.0f / d.k);
    }
  const std::vector<uint16_t> X = random_bf16(size_t(d.M) * d.H, rng);
  check_bf16_output(run_baseline(*baseline, d, X, r, true, stream.s), c.want(X, r), scorer::baseline_tolerance());
}

TEST_CASE("moe_w4a16 batched baseline: no local route, and routings that take every block of its bound") {
  // No token routes to this rank (local experts 4..7): zeros, every GEMM entry spare.
  check_batched_baseline({5, 128, 128, 16, 4, 2, 1}, [](int m, int j) { return j ? 8 + m : m; });
  // Blocks of 8 rows; no expert takes more than ceil(6/8) = 1 block: at most
  // 8, all of them when every expert has a route (tokens 0 and 1 touch all 8).
  const submission::MoeDims all_experts{6, 128, 128, 8, 8, 4, 0};
  CHECK(reference::moe_batched_max_blocks(all_experts) == 8);
  check_batched_baseline(all_experts, [](int m, int j) { return (m + 2 * j) % 8; });
  // Blocks of 64; 2 + (100 - 2) / 64 = 3 blocks at most: 65 routes on expert
  // 0 (two blocks, the second with one route) and 35 on expert 1.
  const submission::MoeDims two_blocks{100, 128, 128, 2, 2, 1, 0};
  CHECK(reference::moe_batched_max_blocks(two_blocks) == 3);
  check_batched_baseline(two_blocks, [](int m, int) { return m < 65 ? 0 : 1; });
}

// ---------------------------------------------------------------- dims

TEST_CASE("reference and baseline factories reject dims outside the op's range") {
  CHECK_THROWS_AS(reference::make_pooler_reference({2, 100}, {}), std::invalid_argument);
  CHECK_THROWS_AS(reference::make_pooler_baseline({0, 128}, {}), std::invalid_argument);
  CHECK_THROWS_AS(reference::make_dense_reference({5, 77, 100}, {}), std::invalid_argument);
  CHECK_THROWS_AS(reference::make_dense_baseline({0, 77, 128}, {}), std::invalid_argument);
  CHECK_THROWS_AS(reference::make_router_reference({4, 128, 8, 9}, {}), std::invalid_argument);
  CHECK_THROWS_AS(reference::make_router_baseline({4, 128, 8, 0}, {}), std::invalid_argument);
  CHECK_THROWS_AS(reference::make_moe_reference({4, 200, 256, 16, 4, 2, 0}, {}), std::invalid_argument);
  CHECK_THROWS_AS(reference::make_moe_baseline({4, 256, 256, 16, 4, 2, 4}, {}), std::invalid_argument);
  CHECK_THROWS_AS(reference::make_moe_baseline({4, 256, 256, 16, 5, 2, 0}, {}), std::invalid_argument);
}

}  // namespace
