#include "scorer/workload.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "scorer/random_fill.h"

namespace scorer {

std::vector<int32_t> draw_cu_seqlens(const Shape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> len(s.min_len, s.max_len);
  std::vector<int32_t> cu(s.B + 1, 0);
  for (int b = 0; b < s.B; ++b) cu[b + 1] = cu[b] + len(rng);
  return cu;
}

Routing draw_routing(const Shape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Routing r;
  r.ids.resize(size_t(s.M) * s.k);
  r.weights.resize(size_t(s.M) * s.k);
  std::vector<int32_t> experts(s.E_global);
  for (int m = 0; m < s.M; ++m) {
    std::iota(experts.begin(), experts.end(), 0);
    // partial Fisher-Yates: the first k are a uniform draw without replacement
    for (int j = 0; j < s.k; ++j) {
      std::uniform_int_distribution<int> pick(j, s.E_global - 1);
      std::swap(experts[j], experts[pick(rng)]);
    }
    std::vector<double> logit(s.k);
    double mx = -INFINITY, sum = 0;
    for (auto& l : logit) mx = std::max(mx, l = normal(rng));
    for (auto& l : logit) sum += std::exp(l - mx);
    for (int j = 0; j < s.k; ++j) {
      r.ids[size_t(m) * s.k + j] = experts[j];
      r.weights[size_t(m) * s.k + j] = float(std::exp(logit[j] - mx) / sum);
    }
  }
  return r;
}

Routing routing_for(const Shape& s, uint64_t shape_seed) { return draw_routing(s, derive_seed(shape_seed, 7)); }

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

double min_bytes(const Shape& s, const Routing* routing) {
  const double bf = 2;
  switch (s.op) {
    case Op::pooler:  // B gathered rows, W, bias, cu_seqlens, out
      return s.B * double(s.H) * bf + double(s.H) * s.H * bf + s.H * bf + (s.B + 1) * 4.0 +
             s.B * double(s.H) * bf;
    case Op::dense:
      return (double(s.M) * s.K + double(s.N) * s.K + double(s.M) * s.N) * bf;
    case Op::router:  // X, Wg, logits, ids, weights
      return (double(s.T) * s.H + double(s.E) * s.H) * bf + double(s.T) * s.E * 4 + double(s.T) * s.k * 8;
    case Op::moe_w4a16: {
      const double per_expert = 2.0 * s.I * s.H / 2 + 2.0 * s.I * (s.H / 128) * bf  // W13 + scales
                                + double(s.H) * s.I / 2 + double(s.H) * (s.I / 128) * bf;  // W2 + scales
      const int touched = routing ? experts_touched(s, *routing) : s.E_local;
      return touched * per_expert + 2.0 * s.M * s.H * bf + double(s.M) * s.k * 8;
    }
  }
  return 0;
}

double op_flops(const Shape& s, const Routing* routing) {
  switch (s.op) {
    case Op::pooler: return 2.0 * s.B * s.H * double(s.H);
    case Op::dense: return 2.0 * s.M * s.N * double(s.K);
    case Op::router: return 2.0 * s.T * s.E * double(s.H);
    case Op::moe_w4a16: {
      const int routes = routing ? local_routes(s, *routing) : s.M * s.k;
      return routes * (2.0 * 2 * s.I * double(s.H) + 2.0 * s.H * double(s.I));
    }
  }
  return 0;
}

uint64_t shape_seed(uint64_t run_seed, const Shape& s) {
  return derive_seed(run_seed, hash_string(s.name.c_str()));
}

}  // namespace scorer
