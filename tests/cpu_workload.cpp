// The workload's draws (scorer/workload.h): portable (pinned values for fixed
// seeds), routings that follow their declared distribution, trace windows,
// the pool a call takes its routing from, and the byte model.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "scorer/routing_trace.h"
#include "scorer/shapes.h"
#include "scorer/workload.h"

using scorer::Routing;
using scorer::RoutingKind;
using scorer::Shape;

namespace {

Shape moe_shape(int M, int E_global, int E_local, int k, int ep_rank, RoutingKind kind = RoutingKind::uniform,
                double skew = 0) {
  Shape s;
  s.name = "m";
  s.op = scorer::Op::moe_w4a16;
  s.M = M;
  s.H = 256;
  s.I = 128;
  s.E_global = E_global;
  s.E_local = E_local;
  s.k = k;
  s.ep_rank = ep_rank;
  s.routing.kind = kind;
  s.routing.skew = skew;
  return s;
}

void check_well_formed(const Shape& s, const Routing& r, bool softmax_weights = true) {
  REQUIRE(r.ids.size() == size_t(s.M) * s.k);
  REQUIRE(r.weights.size() == r.ids.size());
  for (int m = 0; m < s.M; ++m) {
    std::set<int> seen;
    double sum = 0;
    for (int j = 0; j < s.k; ++j) {
      const int id = r.ids[size_t(m) * s.k + j];
      CHECK(id >= 0);
      CHECK(id < s.E_global);
      CHECK(seen.insert(id).second);
      sum += r.weights[size_t(m) * s.k + j];
    }
    if (softmax_weights) CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
  }
}

}  // namespace

TEST_CASE("workload draws are portable: pinned values for fixed seeds") {
  // These come from the generator's bits alone (integers by `draw`, reals from
  // the top 53 bits), never from a standard library's distributions, whose
  // algorithms differ between libraries; a change here changes every input.
  std::mt19937_64 rng(42);
  CHECK(scorer::draw_unit(rng) == 0.75515553295453897);
  CHECK(scorer::draw_normal(rng) == doctest::Approx(0.012755354198444343).epsilon(1e-14));
  CHECK(scorer::draw_normal(rng) == doctest::Approx(1.6390009625516804).epsilon(1e-14));

  Shape s = moe_shape(3, 16, 8, 3, 1);
  std::vector<Routing> pool = scorer::routing_pool(s, 99);
  CHECK(pool[0].ids == std::vector<int32_t>{12, 8, 15, 6, 4, 9, 9, 13, 15});
  CHECK(pool[1].ids == std::vector<int32_t>{12, 7, 1, 11, 0, 9, 15, 3, 8});
  CHECK(pool[0].weights[0] == doctest::Approx(0.130579874).epsilon(1e-6));
  CHECK(pool[1].weights[8] == doctest::Approx(0.321233779).epsilon(1e-6));
  s.routing.kind = RoutingKind::zipf;
  s.routing.skew = 1.5;
  CHECK(scorer::routing_pool(s, 99)[0].ids == std::vector<int32_t>{8, 9, 15, 8, 3, 0, 8, 11, 3});

  Shape p;
  p.op = scorer::Op::pooler;
  p.B = 5;
  p.H = 8;
  p.min_len = 3;
  p.max_len = 40;
  CHECK(scorer::draw_cu_seqlens(p, 5) == std::vector<int32_t>{0, 28, 32, 43, 71, 77});
  std::vector<int32_t> v = {0, 1, 2, 3, 4, 5, 6, 7};
  scorer::shuffle(v, rng);
  CHECK(v == std::vector<int32_t>{5, 3, 7, 6, 1, 2, 4, 0});
}

TEST_CASE("uniform routing: k distinct experts per token, each expert equally often") {
  const Shape s = moe_shape(4000, 64, 16, 4, 1);
  std::mt19937_64 rng(1);
  const Routing r = scorer::draw_uniform_routing(s, rng);
  check_well_formed(s, r);
  std::vector<int> count(s.E_global);
  for (int id : r.ids) ++count[id];
  // Each expert: Binomial(M, k/E) = 250 +- 15.5; 5 standard deviations.
  for (int c : count) CHECK(std::abs(c - 250) < 78);
}

TEST_CASE("zipf routing: the hottest experts take their share") {
  for (double skew : {0.8, 1.2, 2.0}) {
    CAPTURE(skew);
    const Shape s = moe_shape(20000, 8, 8, 2, 0, RoutingKind::zipf, skew);
    const std::vector<double> p = scorer::zipf_popularity(s.E_global, skew);
    CHECK(p[0] > p[1]);
    std::vector<int32_t> hottest_first = {5, 2, 7, 0, 1, 3, 6, 4};
    std::mt19937_64 rng(2);
    const Routing r = scorer::draw_zipf_routing(s, hottest_first, rng);
    check_well_formed(s, r);
    // The first pick of a token follows the popularity; the hottest is in a
    // token's k = 2 picks with p0 + sum over the others e of pe * p0 / (1 - pe).
    std::vector<int> first(s.E_global);
    int hottest_in = 0;
    for (int m = 0; m < s.M; ++m) {
      ++first[r.ids[size_t(m) * 2]];
      hottest_in += r.ids[size_t(m) * 2] == 5 || r.ids[size_t(m) * 2 + 1] == 5;
    }
    for (int rank = 0; rank < s.E_global; ++rank) {
      const double want = p[rank] * s.M, sd = std::sqrt(want * (1 - p[rank]));
      CHECK(std::abs(first[hottest_first[rank]] - want) < 5 * sd + 1);
    }
    double in = p[0];
    for (int e = 1; e < s.E_global; ++e) in += p[e] * p[0] / (1 - p[e]);
    CHECK(std::abs(hottest_in - in * s.M) < 5 * std::sqrt(in * (1 - in) * s.M));
  }
  // The public moe_mixtral_hot_m64's skew: one expert is the first choice of
  // over half the tokens (65.5%) and in over 90% of them; with k = 2 no expert
  // can take more than half the routes (it takes 45%).
  const std::vector<double> hot = scorer::zipf_popularity(8, 2.0);
  CHECK(hot[0] == doctest::Approx(0.655).epsilon(0.001));
}

TEST_CASE("zipf pools keep one permutation: the same expert is hottest in every draw") {
  const Shape s = moe_shape(512, 64, 8, 4, 3, RoutingKind::zipf, 1.2);
  const std::vector<Routing> pool = scorer::routing_pool(s, 7);
  REQUIRE(pool.size() == size_t(scorer::kRoutingPool));
  std::set<int> hottest;
  for (const Routing& r : pool) {
    check_well_formed(s, r);
    std::vector<int> count(s.E_global);
    for (int id : r.ids) ++count[id];
    hottest.insert(int(std::max_element(count.begin(), count.end()) - count.begin()));
  }
  CHECK(hottest.size() == 1);
  // Another seed, another permutation (1 chance in 64 of the same hottest).
  const Routing other = scorer::routing_pool(s, 8)[0];
  std::vector<int> count(s.E_global);
  for (int id : other.ids) ++count[id];
  CHECK(int(std::max_element(count.begin(), count.end()) - count.begin()) != *hottest.begin());
}

TEST_CASE("trace replay: windows of M consecutive tokens from a seeded start, wrapping around") {
  Shape s = moe_shape(3, 8, 4, 2, 1, RoutingKind::file);
  std::string text;
  for (int t = 0; t < 7; ++t)
    text += std::to_string(t) + " " + std::to_string((t + 1) % 8) + " | " + std::to_string(t) + " 1\n";
  s.routing.trace = scorer::parse_routing_trace(text, "tr.txt", s);
  const scorer::RoutingTrace& tr = *s.routing.trace;
  REQUIRE(tr.tokens() == 7);
  const Routing w = scorer::trace_window(s, tr, 5);  // tokens 5, 6, 0
  CHECK(w.ids == std::vector<int32_t>{5, 6, 6, 7, 0, 1});
  CHECK(w.weights == std::vector<float>{5, 1, 6, 1, 0, 1});
  const std::vector<Routing> pool = scorer::routing_pool(s, 3);
  REQUIRE(pool.size() == size_t(scorer::kRoutingPool));
  const int start = int(pool[0].weights[0]);  // a token's first weight is its index
  for (int i = 0; i < scorer::kRoutingPool; ++i) CHECK(pool[i] == scorer::trace_window(s, tr, (start + 3 * i) % 7));
  int other_start = start;
  for (uint64_t seed = 4; seed < 40 && other_start == start; ++seed)
    other_start = int(scorer::routing_pool(s, seed)[0].weights[0]);
  CHECK(other_start != start);  // the start follows the seed
}

TEST_CASE("each call takes a routing of the pool, never the previous call's") {
  const Shape s = moe_shape(2, 8, 8, 2, 0);
  std::vector<Routing> pool = scorer::routing_pool(s, 11);
  std::vector<int> taken(pool.size());
  int previous = -1;
  for (uint64_t seed = 0; seed < 3000; ++seed) {
    const int i = scorer::pick_routing(pool, seed, previous);
    REQUIRE(i >= 0);
    REQUIRE(i < int(pool.size()));
    if (previous >= 0) CHECK(!(pool[i] == pool[previous]));
    ++taken[i];
    previous = i;
  }
  for (int n : taken) CHECK(n > 100);  // every entry, about equally often
  // Equal entries are skipped too; a pool of one routing has no other to give.
  pool[3] = pool[2];
  for (uint64_t seed = 0; seed < 200; ++seed) CHECK(!(pool[scorer::pick_routing(pool, seed, 2)] == pool[2]));
  const std::vector<Routing> one(4, pool[0]);
  CHECK(scorer::pick_routing(one, 5, 1) >= 0);
}

TEST_CASE("the public moe shapes: 16 distinct routings each, distributions as declared") {
  const scorer::ShapesFile f = scorer::load_shapes("shapes.toml");
  int zipf = 0, file = 0;
  for (const Shape& s : f.shapes) {
    if (s.op != scorer::Op::moe_w4a16) continue;
    CAPTURE(s.name);
    zipf += s.routing.kind == RoutingKind::zipf;
    file += s.routing.kind == RoutingKind::file;
    const std::vector<Routing> pool = scorer::routing_pool(s, scorer::shape_seed(20261129, s));
    for (size_t i = 0; i < pool.size(); ++i) {
      check_well_formed(s, pool[i], s.routing.kind != RoutingKind::file);
      for (size_t j = 0; j < i; ++j) CHECK(!(pool[i] == pool[j]));
    }
  }
  CHECK(zipf >= 2);
  CHECK(file >= 1);
}

TEST_CASE("bytes: the touched experts per draw, the pool's median, and the scorer's own copies") {
  const Shape s = moe_shape(4, 64, 8, 2, 2);
  Routing r;
  r.ids = {16, 17, 17, 1, 20, 63, 2, 3};  // experts 16..23 are local: 16, 17, 20 touched
  r.weights.assign(8, 0.5f);
  CHECK(scorer::experts_touched(s, r) == 3);
  CHECK(scorer::local_routes(s, r) == 4);
  const double expert = 3.0 * s.I * s.H * (0.5 + 2.0 / 128);
  const scorer::OpBytes b = scorer::op_bytes(s, &r);
  CHECK(b.weights == doctest::Approx(3 * expert));
  CHECK(b.activations == doctest::Approx(4.0 * s.H * 2 + 4 * 2 * 8));
  CHECK(b.outputs == doctest::Approx(4.0 * s.H * 2));
  CHECK(scorer::min_bytes(s, &r) == doctest::Approx(b.total()));
  CHECK(scorer::op_bytes(s).weights == doctest::Approx(8 * expert));  // no routing: every local expert
  CHECK(scorer::op_flops(s, &r) == doctest::Approx(4 * (2.0 * 2 * s.I * s.H + 2.0 * s.H * s.I)));

  const std::vector<Routing> pool = scorer::routing_pool(s, 5);
  std::vector<double> per_draw;
  for (const Routing& x : pool) per_draw.push_back(scorer::min_bytes(s, &x));
  std::sort(per_draw.begin(), per_draw.end());
  CHECK(scorer::pool_min_bytes(s, pool) == doctest::Approx((per_draw[7] + per_draw[8]) / 2));

  // The memory check: the op's bytes with every expert, and beside them the
  // baseline's bf16 and the reference's fp32 weights and fp32 output.
  CHECK(scorer::device_bytes(s) ==
        doctest::Approx(scorer::op_bytes(s).total() + 8 * 3.0 * s.I * s.H * 6 + 4.0 * s.H * 4));
  Shape d;
  d.op = scorer::Op::dense;
  d.M = 3;
  d.N = 5;
  d.K = 8;
  CHECK(scorer::min_bytes(d) == doctest::Approx((3 * 8 + 5 * 8 + 3 * 5) * 2.0));
  CHECK(scorer::pool_min_bytes(d, {}) == scorer::min_bytes(d));
  CHECK(scorer::device_bytes(d) == doctest::Approx(scorer::min_bytes(d) + 3 * 5 * 4.0));
}
