// The router (submission/router.cu), every variant, against the fp64 CPU reference: odd and
// public shapes, exact ties, run-to-run determinism and CUDA-graph replay. Outputs are poisoned
// before every run, so anything left unwritten shows as NaN or -1.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "dev/variants.h"
#include "reference/bf16_host.h"
#include "reference/cpu_reference.h"
#include "scorer/check.h"
#include "submission/submission.h"
#include "tests/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;
using submission::RouterDims;

std::vector<std::string> router_variants() { return gpu_test::variants_under_test("router"); }

bool is_fused(const std::string& v) {
  return v == "fused_cluster" || v == "fused_slots" || v == "fused_slots_wide" || v == "fused_tile_tree" ||
         v == "fused_tagged";
}

// The one-launch kernels' documented limits; past them only the general path runs.
bool fused_fits(const RouterDims& d) { return d.T <= 16 && d.E <= 512 && d.k <= 16; }

std::string dims_str(const RouterDims& d) {
  return "T=" + std::to_string(d.T) + " H=" + std::to_string(d.H) + " E=" + std::to_string(d.E) +
         " k=" + std::to_string(d.k);
}

uint64_t fresh_seed() { return (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}(); }

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { GT_CUDA(cudaStreamCreate(&s)); }  // blocking: ordered after legacy-stream memsets
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
};

struct Outputs {
  std::vector<float> logits;
  std::vector<int32_t> ids;
  std::vector<float> weights;
};

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

bool same_bits(const Outputs& a, const Outputs& b) {
  return same_bits(a.logits, b.logits) && same_bits(a.ids, b.ids) && same_bits(a.weights, b.weights);
}

// A router with its device buffers. Wg is declared first so that it outlives the router.
struct RouterUnderTest {
  RouterDims d;
  DeviceBuffer<uint16_t> Wg, X;
  DeviceBuffer<float> logits;
  DeviceBuffer<int32_t> ids;
  DeviceBuffer<float> weights;
  std::unique_ptr<submission::Router> router;

  RouterUnderTest(const RouterDims& dims, const std::vector<uint16_t>& wg, const std::string& variant)
      : d(dims),
        Wg(wg),
        X(size_t(dims.T) * dims.H),
        logits(size_t(dims.T) * dims.E),
        ids(size_t(dims.T) * dims.k),
        weights(size_t(dims.T) * dims.k) {
    router = submission::dev::make_router(d, {reinterpret_cast<const submission::bf16*>(Wg.ptr)}, variant);
  }

  submission::RouterIO io() const {
    return {reinterpret_cast<const submission::bf16*>(X.ptr), logits.ptr, ids.ptr, weights.ptr};
  }

  // Uploads x and poisons the outputs; the caller then runs eagerly or replays a graph.
  void prepare_call(const std::vector<uint16_t>& x) {
    X.upload(x);
    logits.poison();
    ids.poison();
    weights.poison();
  }

  Outputs download() const { return {logits.download(), ids.download(), weights.download()}; }

  Outputs run(const std::vector<uint16_t>& x, cudaStream_t stream) {
    prepare_call(x);
    router->run(io(), stream);
    gpu_test::sync_and_check("router run");
    return download();
  }
};

// The ids must be exactly the descending order of the returned fp32 logits, ties to the lower
// id, and the weights the softmax of those logits over the top k.
void check_self_consistent(const RouterDims& d, const Outputs& out) {
  std::vector<int> order(d.E);
  for (int t = 0; t < d.T; ++t) {
    const float* l = &out.logits[size_t(t) * d.E];
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    double sum = 0;
    for (int j = 0; j < d.k; ++j) sum += std::exp(double(l[order[j]]) - l[order[0]]);
    for (int j = 0; j < d.k; ++j) {
      CAPTURE(t);
      CAPTURE(j);
      REQUIRE(out.ids[size_t(t) * d.k + j] == order[j]);
      const double w = std::exp(double(l[order[j]]) - l[order[0]]) / sum;
      REQUIRE(std::fabs(out.weights[size_t(t) * d.k + j] - w) < 1e-6);
    }
  }
}

void check_against_reference(const RouterDims& d, const std::vector<uint16_t>& x, const std::vector<uint16_t>& wg,
                             const Outputs& out) {
  const ref::RouterCpu r = ref::router_cpu(d.T, d.H, d.E, d.k, x.data(), wg.data());
  const scorer::CheckResult c = scorer::check_router(d.T, d.E, d.k, out.logits.data(), out.ids.data(),
                                                     out.weights.data(), r.logits.data(), r.weights.data());
  REQUIRE_MESSAGE(c.ok, c.reason);
  CHECK(c.rel_l2 < 1e-5);  // fp32 accumulation sits far below the scorer's 1e-4
  check_self_consistent(d, out);
}

// Logits of order 1, as a real router's are: X ~ N(0, 1), Wg ~ N(0, 1/H).
std::vector<uint16_t> random_x(const RouterDims& d, std::mt19937_64& rng) {
  return gpu_test::random_bf16(size_t(d.T) * d.H, rng);
}
std::vector<uint16_t> random_wg(const RouterDims& d, std::mt19937_64& rng) {
  return gpu_test::random_bf16(size_t(d.E) * d.H, rng, 1.0 / std::sqrt(double(d.H)));
}

// Wg entries uniform in w_min..w_max and inputs in 1..2, all small integers, so that every logit
// is an exact integer in fp32 whatever the order of the sums: the ties tests' inputs.
struct IntegerInputs {
  std::vector<uint16_t> wg, x;
};
IntegerInputs integer_inputs(const RouterDims& d, int w_min, int w_max, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> wdist(w_min, w_max), xdist(1, 2);
  IntegerInputs in{std::vector<uint16_t>(size_t(d.E) * d.H), std::vector<uint16_t>(size_t(d.T) * d.H)};
  for (auto& b : in.wg) b = ref::float_to_bf16(float(wdist(rng)));
  for (auto& b : in.x) b = ref::float_to_bf16(float(xdist(rng)));
  return in;
}

// Builds the router, or checks that a fused variant refuses a shape past its limits.
std::unique_ptr<RouterUnderTest> make_or_refuse(const RouterDims& d, const std::vector<uint16_t>& wg,
                                                const std::string& variant) {
  if (is_fused(variant) && !fused_fits(d)) {
    REQUIRE_THROWS_AS(submission::dev::make_router(d, {nullptr}, variant), std::invalid_argument);
    return nullptr;
  }
  return std::make_unique<RouterUnderTest>(d, wg, variant);
}

const std::vector<RouterDims> kPublicShapes = {
    {1, 7168, 256, 8}, {8, 7168, 256, 8}, {16, 7168, 256, 8}, {8, 2048, 128, 8}, {16, 2048, 128, 8}};

// Odd sizes: tails in every dimension, the fused kernel's limits, and past them (general path).
const std::vector<RouterDims> kOddShapes = {
    {5, 1000, 96, 4},   {1, 8, 1, 1},      {3, 72, 20, 5},    {13, 8, 7, 7},      {9, 136, 33, 1}, {16, 1024, 512, 16},
    {7, 4104, 257, 16}, {2, 3000, 500, 9}, {17, 1000, 96, 4}, {40, 520, 600, 20}, {4, 264, 40, 17}};
// Paths the shapes above leave out. The fused plan gives each warp at most
// kPlanChunks chunks of its split's share of H until kMaxWarps (16) warps;
// past that each warp loops over batches, which no shape above reaches (at
// 132 SMs their shares are 32 chunks or fewer): T = 3, H = 8200, E = 500 has
// 257 chunks in 4 splits of up to 65 (P = 16, one token tile), T = 12, H =
// 12296, E = 256 has 385 in 8 splits of up to 49 (P = 8, two token tiles),
// both uneven. E = 513 at T = 16 is one expert past the fused kernels (the
// default takes gemm_then_topk). E = 20000: the top-k kernel's E x 4 bytes of
// keys exceed the 48 KB of dynamic shared memory a launch gets without the
// opt-in attribute, with k = 33 rounds of its block-wide arg max.
const std::vector<RouterDims> kPathShapes = {
    {3, 8200, 500, 6}, {12, 12296, 256, 9}, {16, 264, 513, 16}, {3, 24, 20000, 33}};

// Inputs whose logits are exact integers in fp32: every variant must give the reference's logits
// exactly, its ids and its weights.
void check_exact_for_every_variant(const RouterDims& d, const std::vector<uint16_t>& x, const std::vector<uint16_t>& wg,
                                   const ref::RouterCpu& want, cudaStream_t stream) {
  for (const std::string& v : router_variants()) {
    INFO(v << " " << dims_str(d));
    auto r = make_or_refuse(d, wg, v);
    if (!r) continue;
    const Outputs out = r->run(x, stream);
    for (size_t i = 0; i < want.logits.size(); ++i) REQUIRE(double(out.logits[i]) == want.logits[i]);
    REQUIRE(out.ids == want.ids);
    for (size_t i = 0; i < want.weights.size(); ++i) REQUIRE(std::fabs(out.weights[i] - want.weights[i]) < 1e-6);
  }
}

}  // namespace

TEST_CASE("router: variant names and invalid arguments") {
  const std::vector<std::string> names = router_variants();
  REQUIRE(!names.empty());
  CHECK(names[0] == "default");
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = i + 1; j < names.size(); ++j) CHECK(names[i] != names[j]);

  std::mt19937_64 rng(fresh_seed());
  const RouterDims ok{2, 64, 16, 4};
  DeviceBuffer<uint16_t> wg(random_wg(ok, rng));
  const submission::RouterWeights w{reinterpret_cast<const submission::bf16*>(wg.ptr)};
  CHECK_THROWS_AS(submission::dev::make_router(ok, w, "no_such_variant"), std::invalid_argument);
  for (const std::string& v : names) {
    CAPTURE(v);
    CHECK_THROWS_AS(submission::dev::make_router({2, 64, 16, 17}, w, v), std::invalid_argument);  // k > E
    CHECK_THROWS_AS(submission::dev::make_router({2, 64, 16, 0}, w, v), std::invalid_argument);
    CHECK_THROWS_AS(submission::dev::make_router({2, 60, 16, 4}, w, v), std::invalid_argument);  // H % 8
    CHECK_THROWS_AS(submission::dev::make_router({2, 0, 16, 4}, w, v), std::invalid_argument);
    CHECK_THROWS_AS(submission::dev::make_router({0, 64, 16, 4}, w, v), std::invalid_argument);
    CHECK_NOTHROW(submission::dev::make_router(ok, w, v));
  }
}

// make sanitize: one public shape under compute-sanitizer.
TEST_CASE("sanitize: router, one public shape" * doctest::test_suite("sanitize")) {
  std::mt19937_64 rng(fresh_seed());
  Stream stream;
  const RouterDims d = kPublicShapes[2];
  const std::vector<uint16_t> wg = random_wg(d, rng), x = random_x(d, rng);
  for (const std::string& v : router_variants()) {
    auto r = make_or_refuse(d, wg, v);
    if (r) check_against_reference(d, x, wg, r->run(x, stream.s));
  }
}

TEST_CASE("router: every variant matches the fp64 reference, twice, bit-identically") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  Stream stream;
  std::vector<RouterDims> shapes = kPublicShapes;
  shapes.insert(shapes.end(), kOddShapes.begin(), kOddShapes.end());
  shapes.insert(shapes.end(), kPathShapes.begin(), kPathShapes.end());
  for (const RouterDims& d : shapes) {
    const std::vector<uint16_t> wg = random_wg(d, rng);
    const std::vector<uint16_t> x = random_x(d, rng);
    for (const std::string& v : router_variants()) {
      INFO(v << " " << dims_str(d));
      auto r = make_or_refuse(d, wg, v);
      if (!r) continue;
      const Outputs first = r->run(x, stream.s);
      check_against_reference(d, x, wg, first);
      // Again on the same inputs: catches a counter or workspace left dirty by the first call.
      const Outputs second = r->run(x, stream.s);
      REQUIRE(same_bits(first, second));
      // And on new inputs with the same weights.
      const std::vector<uint16_t> x2 = random_x(d, rng);
      check_against_reference(d, x2, wg, r->run(x2, stream.s));
    }
  }
}

TEST_CASE("router: large logits match the reference") {
  // Weights of sd 1 too: logits of order sqrt(H), top-k weights far from uniform.
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  Stream stream;
  for (const RouterDims& d : {RouterDims{16, 7168, 256, 8}, RouterDims{6, 2048, 128, 8}}) {
    const std::vector<uint16_t> wg = gpu_test::random_bf16(size_t(d.E) * d.H, rng);
    const std::vector<uint16_t> x = random_x(d, rng);
    for (const std::string& v : router_variants()) {
      INFO(v << " " << dims_str(d));
      RouterUnderTest r(d, wg, v);
      check_against_reference(d, x, wg, r.run(x, stream.s));
    }
  }
}

TEST_CASE("router: exact ties go to the lower expert id") {
  // Small integers everywhere, so every logit is an exact integer in fp32 whatever the order of
  // the sums: equal rows give bit-identical logits, and many unrelated experts tie as well. Wg
  // rows of all 2s (ids 50, 5, 37, 12) beat rows of all 1s (ids 3, 60, 20), which beat every
  // random row (entries -2..1) for inputs of 1s and 2s.
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  Stream stream;
  for (const RouterDims& d : {RouterDims{4, 256, 64, 8}, RouterDims{12, 1000, 300, 12}, RouterDims{16, 7168, 256, 16},
                              RouterDims{20, 256, 64, 10}}) {
    IntegerInputs in = integer_inputs(d, -2, 1, rng);
    std::vector<uint16_t>& wg = in.wg;
    const std::vector<uint16_t>& x = in.x;
    auto fill_row = [&](int e, float value) {
      std::fill(wg.begin() + size_t(e) * d.H, wg.begin() + size_t(e + 1) * d.H, ref::float_to_bf16(value));
    };
    for (int e : {50, 5, 37, 12}) fill_row(e, 2.0f);
    for (int e : {3, 60, 20}) fill_row(e, 1.0f);

    const ref::RouterCpu want = ref::router_cpu(d.T, d.H, d.E, d.k, x.data(), wg.data());
    for (int t = 0; t < d.T; ++t) {  // the construction itself, checked on the reference
      const std::vector<int32_t> head(want.ids.begin() + size_t(t) * d.k, want.ids.begin() + size_t(t) * d.k + 7);
      REQUIRE(head == std::vector<int32_t>{5, 12, 37, 50, 3, 20, 60});
    }
    check_exact_for_every_variant(d, x, wg, want, stream.s);
  }
}

TEST_CASE("router: the best logits crowded into a few lanes") {
  // A run of equal, winning rows (all 2s; the others -1..1, inputs 1s and 2s, so every logit is
  // an exact integer) fills whole lanes of the fused top-k warp, whose lanes hold P consecutive
  // experts: 40 winners at P = 8, 64 at P = 16, 20 at P = 4. The top k must come from the lowest
  // lanes in id order, each winning lane giving up several in a row.
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  Stream stream;
  struct Case {
    RouterDims d;
    int first, count;
  };
  for (const Case& c :
       {Case{{5, 256, 256, 8}, 0, 40}, Case{{3, 512, 512, 16}, 16, 64}, Case{{6, 256, 128, 8}, 0, 20}}) {
    const RouterDims& d = c.d;
    IntegerInputs in = integer_inputs(d, -1, 1, rng);
    std::vector<uint16_t>& wg = in.wg;
    const std::vector<uint16_t>& x = in.x;
    std::fill(wg.begin() + size_t(c.first) * d.H, wg.begin() + size_t(c.first + c.count) * d.H,
              ref::float_to_bf16(2.0f));
    const ref::RouterCpu want = ref::router_cpu(d.T, d.H, d.E, d.k, x.data(), wg.data());
    for (int t = 0; t < d.T; ++t)  // the construction itself: the crowd's lowest ids win
      for (int j = 0; j < d.k; ++j) REQUIRE(want.ids[size_t(t) * d.k + j] == c.first + j);
    check_exact_for_every_variant(d, x, wg, want, stream.s);
  }
}

TEST_CASE("router: duplicate rows with random values get bit-identical logits") {
  // Every expert is computed the same way (same k order, same reduction order), so copies of a
  // row, in other tiles and other lanes, give the same bits, and the copies then rank by id.
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  Stream stream;
  for (const RouterDims& d : {RouterDims{8, 7168, 256, 8}, RouterDims{16, 2048, 128, 8}, RouterDims{5, 1000, 96, 4},
                              RouterDims{18, 1000, 96, 4}}) {
    std::vector<uint16_t> wg = random_wg(d, rng);
    const std::vector<uint16_t> x = random_x(d, rng);
    // Copy token 0's best expert over three others, so that token 0's top k starts with a tie.
    const ref::RouterCpu before = ref::router_cpu(d.T, d.H, d.E, d.k, x.data(), wg.data());
    const int src = before.ids[0];
    std::vector<int> copies;
    for (int e : {1, d.E / 2 + 1, d.E - 1})
      if (e != src) copies.push_back(e);
    for (int e : copies)
      std::copy(wg.begin() + size_t(src) * d.H, wg.begin() + size_t(src + 1) * d.H, wg.begin() + size_t(e) * d.H);
    for (const std::string& v : router_variants()) {
      INFO(v << " " << dims_str(d));
      auto r = make_or_refuse(d, wg, v);
      if (!r) continue;
      const Outputs out = r->run(x, stream.s);
      for (int t = 0; t < d.T; ++t)
        for (int e : copies) {
          const float a = out.logits[size_t(t) * d.E + src], b = out.logits[size_t(t) * d.E + e];
          REQUIRE(std::memcmp(&a, &b, sizeof a) == 0);
        }
      check_against_reference(d, x, wg, out);  // the ids order of the tied copies included
    }
  }
}

TEST_CASE("router: many runs are bit-identical") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  Stream stream;
  const RouterDims a{16, 7168, 256, 8}, b{11, 2056, 200, 6};
  const std::vector<uint16_t> wa = random_wg(a, rng), xa = random_x(a, rng);
  const std::vector<uint16_t> wb = random_wg(b, rng), xb = random_x(b, rng);
  for (const std::string& v : router_variants()) {
    INFO(v);
    RouterUnderTest ra(a, wa, v), rb(b, wb, v);
    const Outputs first_a = ra.run(xa, stream.s), first_b = rb.run(xb, stream.s);
    check_against_reference(a, xa, wa, first_a);
    check_against_reference(b, xb, wb, first_b);
    for (int i = 0; i < 20; ++i) {
      CAPTURE(i);
      REQUIRE(same_bits(ra.run(xa, stream.s), first_a));  // two routers interleaved: each
      REQUIRE(same_bits(rb.run(xb, stream.s), first_b));  // keeps its own counter clean
    }
  }
}

TEST_CASE("router: a captured CUDA graph replays correctly on new inputs") {
  const uint64_t seed = fresh_seed();
  CAPTURE(seed);
  std::mt19937_64 rng(seed);
  Stream stream;
  for (const RouterDims& d : {RouterDims{16, 7168, 256, 8}, RouterDims{1, 7168, 256, 8}, RouterDims{5, 1000, 96, 4},
                              RouterDims{17, 1000, 96, 4}}) {
    const std::vector<uint16_t> wg = random_wg(d, rng);
    for (const std::string& v : router_variants()) {
      INFO(v << " " << dims_str(d));
      auto r = make_or_refuse(d, wg, v);
      if (!r) continue;
      cudaGraph_t graph = nullptr;
      cudaGraphExec_t exec = nullptr;
      GT_CUDA(cudaStreamBeginCapture(stream.s, cudaStreamCaptureModeThreadLocal));
      r->router->run(r->io(), stream.s);
      GT_CUDA(cudaStreamEndCapture(stream.s, &graph));
      GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      for (int replay = 0; replay < 3; ++replay) {
        CAPTURE(replay);
        const std::vector<uint16_t> x = random_x(d, rng);
        r->prepare_call(x);
        GT_CUDA(cudaGraphLaunch(exec, stream.s));
        gpu_test::sync_and_check("graph replay");
        const Outputs replayed = r->download();
        check_against_reference(d, x, wg, replayed);
        REQUIRE(same_bits(replayed, r->run(x, stream.s)));  // the graph computes what run() does
      }
      GT_CUDA(cudaGraphExecDestroy(exec));
      GT_CUDA(cudaGraphDestroy(graph));
    }
  }
}
