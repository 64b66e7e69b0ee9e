#include "scorer/workload.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "reference/int4.h"
#include "scorer/random_fill.h"
#include "scorer/stats.h"

namespace scorer {

namespace {
constexpr double kTwoPi = 6.283185307179586;
}  // namespace

double draw_unit(std::mt19937_64& rng) { return (double(rng() >> 11) + 0.5) * 0x1.0p-53; }

double draw_normal(std::mt19937_64& rng) {
  const double u1 = draw_unit(rng), u2 = draw_unit(rng);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

void shuffle(std::vector<int32_t>& v, std::mt19937_64& rng) {
  for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[draw(rng, i)]);
}

std::vector<int32_t> draw_cu_seqlens(const Shape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> cu(s.B + 1, 0);
  for (int b = 0; b < s.B; ++b) cu[b + 1] = cu[b] + s.min_len + int32_t(draw(rng, size_t(s.max_len - s.min_len) + 1));
  return cu;
}

namespace {

// A token's weights: the softmax of N(0, 1) logits over its k picks.
void softmax_weights(int k, std::mt19937_64& rng, float* out) {
  std::vector<double> logit(k);
  double mx = -INFINITY, sum = 0;
  for (double& l : logit) mx = std::max(mx, l = draw_normal(rng));
  for (double& l : logit) sum += (l = std::exp(l - mx));
  for (int j = 0; j < k; ++j) out[j] = float(logit[j] / sum);
}

// Sampling without replacement in proportion to integer weights: a Fenwick
// tree of exact sums, so a draw is the same on every machine and taking an
// expert out and putting it back leaves no rounding behind.
class WeightedUrn {
 public:
  explicit WeightedUrn(const std::vector<uint64_t>& w) : w_(w), tree_(w.size() + 1, 0) {
    for (size_t i = 0; i < w.size(); ++i) add(i, w[i]);
  }
  // Takes one item (its index) with probability weight / remaining total.
  size_t take(std::mt19937_64& rng) {
    uint64_t u = draw(rng, size_t(total_));
    size_t pos = 0;  // the largest prefix whose sum is <= u
    for (size_t step = size_t(1) << (63 - __builtin_clzll(tree_.size())); step; step >>= 1)
      if (pos + step < tree_.size() && tree_[pos + step] <= u) u -= tree_[pos += step];
    add(pos, 0 - w_[pos]);
    return pos;
  }
  void put_back(size_t i) { add(i, w_[i]); }

 private:
  void add(size_t i, uint64_t d) {
    total_ += d;
    for (size_t j = i + 1; j < tree_.size(); j += j & (0 - j)) tree_[j] += d;
  }
  std::vector<uint64_t> w_, tree_;
  uint64_t total_ = 0;
};

}  // namespace

Routing draw_uniform_routing(const Shape& s, std::mt19937_64& rng) {
  Routing r;
  r.ids.resize(size_t(s.M) * s.k);
  r.weights.resize(size_t(s.M) * s.k);
  std::vector<int32_t> experts(s.E_global);
  for (int m = 0; m < s.M; ++m) {
    std::iota(experts.begin(), experts.end(), 0);
    // partial Fisher-Yates: the first k are a uniform draw without replacement
    for (int j = 0; j < s.k; ++j) std::swap(experts[j], experts[j + draw(rng, size_t(s.E_global - j))]);
    std::copy_n(experts.begin(), s.k, r.ids.begin() + size_t(m) * s.k);
    softmax_weights(s.k, rng, &r.weights[size_t(m) * s.k]);
  }
  return r;
}

std::vector<double> zipf_popularity(int n, double skew) {
  std::vector<double> p(n);
  double sum = 0;
  for (int r = 0; r < n; ++r) sum += (p[r] = std::pow(double(r + 1), -skew));
  for (double& x : p) x /= sum;
  return p;
}

Routing draw_zipf_routing(const Shape& s, const std::vector<int32_t>& hottest_first, std::mt19937_64& rng) {
  // Popularities in units of 2^-52 of the total, every expert at least 1.
  const std::vector<double> p = zipf_popularity(s.E_global, s.routing.skew);
  std::vector<uint64_t> w(p.size());
  for (size_t i = 0; i < p.size(); ++i) w[i] = std::max<uint64_t>(1, uint64_t(std::llround(p[i] * 0x1.0p52)));
  WeightedUrn urn(w);
  Routing r;
  r.ids.resize(size_t(s.M) * s.k);
  r.weights.resize(size_t(s.M) * s.k);
  std::vector<size_t> taken(s.k);
  for (int m = 0; m < s.M; ++m) {
    for (int j = 0; j < s.k; ++j) {
      taken[j] = urn.take(rng);
      r.ids[size_t(m) * s.k + j] = hottest_first[taken[j]];
    }
    for (size_t t : taken) urn.put_back(t);
    softmax_weights(s.k, rng, &r.weights[size_t(m) * s.k]);
  }
  return r;
}

Routing trace_window(const Shape& s, const RoutingTrace& t, int first_token) {
  Routing r;
  r.ids.reserve(size_t(s.M) * s.k);
  r.weights.reserve(size_t(s.M) * s.k);
  for (int m = 0; m < s.M; ++m) {
    const size_t at = size_t((first_token + m) % t.tokens()) * t.k;
    r.ids.insert(r.ids.end(), t.ids.begin() + at, t.ids.begin() + at + t.k);
    r.weights.insert(r.weights.end(), t.weights.begin() + at, t.weights.begin() + at + t.k);
  }
  return r;
}

std::vector<Routing> routing_pool(const Shape& s, uint64_t shape_seed) {
  std::mt19937_64 rng(derive_seed(shape_seed, 7));
  std::vector<Routing> pool;
  switch (s.routing.kind) {
    case RoutingKind::uniform:
      for (int i = 0; i < kRoutingPool; ++i) pool.push_back(draw_uniform_routing(s, rng));
      break;
    case RoutingKind::zipf: {
      std::vector<int32_t> hottest_first(s.E_global);
      std::iota(hottest_first.begin(), hottest_first.end(), 0);
      shuffle(hottest_first, rng);
      for (int i = 0; i < kRoutingPool; ++i) pool.push_back(draw_zipf_routing(s, hottest_first, rng));
      break;
    }
    case RoutingKind::file: {
      const RoutingTrace& t = *s.routing.trace;
      const int start = int(draw(rng, size_t(t.tokens())));
      for (int i = 0; i < kRoutingPool; ++i)
        pool.push_back(trace_window(s, t, int((start + int64_t(i) * s.M) % t.tokens())));
      break;
    }
  }
  return pool;
}

int pick_routing(const std::vector<Routing>& pool, uint64_t input_seed, int previous) {
  const int n = int(pool.size());
  int i = int(derive_seed(input_seed, 13) % uint64_t(n));
  for (int step = 0; previous >= 0 && step < n && pool[i] == pool[previous]; ++step) i = (i + 1) % n;
  return i;
}

namespace {
bool is_local(const Shape& s, int global) {
  const int first = s.ep_rank * s.E_local;
  return global >= first && global < first + s.E_local;
}
}  // namespace

int experts_touched(const Shape& s, const Routing& r) {
  std::vector<char> hit(s.E_local, 0);
  for (int id : r.ids)
    if (is_local(s, id)) hit[id - s.ep_rank * s.E_local] = 1;
  return int(std::count(hit.begin(), hit.end(), 1));
}

int local_routes(const Shape& s, const Routing& r) {
  return int(std::count_if(r.ids.begin(), r.ids.end(), [&](int id) { return is_local(s, id); }));
}

namespace {
constexpr double kBf16 = 2, kI32 = 4, kF32 = 4;

// Weights of one moe expert: W13 [2I, H] and W2 [H, I], half a byte per code
// and one bf16 scale per group.
double moe_expert_weights(const Shape& s) { return 3.0 * s.I * double(s.H) * (0.5 + kBf16 / ref::kGroupSize); }
}  // namespace

OpBytes op_bytes(const Shape& s, const Routing* routing) {
  OpBytes b;
  switch (s.op) {
    case Op::pooler:  // W, bias; B gathered rows, cu_seqlens; out
      b.weights = (double(s.H) * s.H + s.H) * kBf16;
      b.activations = double(s.B) * s.H * kBf16 + (s.B + 1) * kI32;
      b.outputs = double(s.B) * s.H * kBf16;
      break;
    case Op::dense:
      b.weights = double(s.N) * s.K * kBf16;
      b.activations = double(s.M) * s.K * kBf16;
      b.outputs = double(s.M) * s.N * kBf16;
      break;
    case Op::router:  // Wg; X; logits, ids, weights
      b.weights = double(s.E) * s.H * kBf16;
      b.activations = double(s.T) * s.H * kBf16;
      b.outputs = double(s.T) * s.E * kF32 + double(s.T) * s.k * (kI32 + kF32);
      break;
    case Op::moe_w4a16:  // touched experts; X, topk ids and weights; out
      b.weights = (routing ? experts_touched(s, *routing) : s.E_local) * moe_expert_weights(s);
      b.activations = double(s.M) * s.H * kBf16 + double(s.M) * s.k * (kI32 + kF32);
      b.outputs = double(s.M) * s.H * kBf16;
      break;
  }
  return b;
}

double min_bytes(const Shape& s, const Routing* routing) { return op_bytes(s, routing).total(); }

double op_flops(const Shape& s, const Routing* routing) {
  switch (s.op) {
    case Op::pooler:
      return 2.0 * s.B * s.H * double(s.H);
    case Op::dense:
      return 2.0 * s.M * s.N * double(s.K);
    case Op::router:
      return 2.0 * s.T * s.E * double(s.H);
    case Op::moe_w4a16: {
      const int routes = routing ? local_routes(s, *routing) : s.M * s.k;
      return routes * (2.0 * 2 * s.I * double(s.H) + 2.0 * s.H * double(s.I));
    }
  }
  return 0;
}

namespace {
template <class Per>
double pool_median(const Shape& s, const std::vector<Routing>& pool, Per per) {
  if (s.op != Op::moe_w4a16 || pool.empty()) return per(s, nullptr);
  std::vector<double> v;
  for (const Routing& r : pool) v.push_back(per(s, &r));
  return median(v);
}
}  // namespace

double pool_min_bytes(const Shape& s, const std::vector<Routing>& pool) { return pool_median(s, pool, min_bytes); }
double pool_flops(const Shape& s, const std::vector<Routing>& pool) { return pool_median(s, pool, op_flops); }

double scorer_held_bytes(const Shape& s) {
  switch (s.op) {
    case Op::pooler:  // hidden rows the op does not read, up to B*max_len tokens; fp32 reference out
      return double(s.B) * (s.max_len - 1) * s.H * kBf16 + double(s.B) * s.H * kF32;
    case Op::dense:
      return double(s.M) * s.N * kF32;
    case Op::router:
      return double(s.T) * s.E * kF32;
    case Op::moe_w4a16:  // the baseline's bf16 and the reference's fp32 weights; fp32 reference out
      return s.E_local * 3.0 * s.I * double(s.H) * (kBf16 + kF32) + double(s.M) * s.H * kF32;
  }
  return 0;
}

double device_bytes(const Shape& s) { return op_bytes(s).total() + scorer_held_bytes(s); }

double host_bytes(const Shape& s) {
  return s.op == Op::moe_w4a16 ? (kRoutingPool + 1.0) * s.M * double(s.k) * (kI32 + kF32) : 0;
}

uint64_t shape_seed(uint64_t run_seed, const Shape& s) { return derive_seed(run_seed, hash_string(s.name.c_str())); }

}  // namespace scorer
