// The correctness checks of scorer/check.cpp: what must pass and what must
// fail, on fresh random data of odd sizes.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "reference/bf16_host.h"
#include "scorer/check.h"

using scorer::check_bf16;
using scorer::check_router;
using scorer::CheckResult;

namespace {

std::vector<double> normal(std::mt19937_64& rng, size_t n) {
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

// What a correct kernel returns: the reference rounded to bf16.
std::vector<uint16_t> rounded(const std::vector<double>& ref) {
  std::vector<uint16_t> out(ref.size());
  for (size_t i = 0; i < ref.size(); ++i) out[i] = ref::float_to_bf16(float(ref[i]));
  return out;
}

// A router case: reference logits with a clear order, the reference's top-k
// and weights, and a candidate output that starts out equal to them.
struct RouterCase {
  int T, E, k;
  std::vector<double> ref_logits, ref_weights;
  std::vector<float> logits, weights;
  std::vector<int32_t> ids;

  RouterCase(int T_, int E_, int k_, std::mt19937_64& rng) : T(T_), E(E_), k(k_) {
    ref_logits = normal(rng, size_t(T) * E);
    finish();
  }
  // Derives the reference top-k (ties to the lower id) and the candidate.
  void finish() {
    ref_weights.assign(size_t(T) * k, 0);
    ids.assign(size_t(T) * k, 0);
    std::vector<int> order(E);
    for (int t = 0; t < T; ++t) {
      const double* l = &ref_logits[size_t(t) * E];
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
      double sum = 0;
      for (int j = 0; j < k; ++j) sum += std::exp(l[order[j]]);
      for (int j = 0; j < k; ++j) {
        ids[size_t(t) * k + j] = order[j];
        ref_weights[size_t(t) * k + j] = std::exp(l[order[j]]) / sum;
      }
    }
    logits.assign(ref_logits.begin(), ref_logits.end());
    weights.assign(ref_weights.begin(), ref_weights.end());
  }
  CheckResult check() const {
    return check_router(T, E, k, logits.data(), ids.data(), weights.data(), ref_logits.data(), ref_weights.data());
  }
};

}  // namespace

TEST_CASE("check_bf16: the reference rounded to bf16 passes") {
  std::mt19937_64 rng(101);
  for (size_t n : {1, 7, 1000, 4099}) {
    const std::vector<double> ref = normal(rng, n);
    const CheckResult r = check_bf16(rounded(ref).data(), ref.data(), n);
    CHECK_MESSAGE(r.ok, r.reason);
    CHECK(r.reason.empty());
    CHECK(r.rel_l2 < 2.5e-3);   // bf16 keeps 8 bits of mantissa: ~0.17% for normal values
    CHECK(r.worst_elem < 0.4);  // each element within 2^-8 of itself
    CHECK(r.nonfinite == 0);
    CHECK(r.bad_elements == 0);
  }
}

TEST_CASE("check_bf16: NaN or Inf anywhere fails") {
  std::mt19937_64 rng(102);
  const size_t n = 777;
  const std::vector<double> ref = normal(rng, n);
  for (size_t at : {size_t(0), size_t(rng() % n), n - 1}) {
    for (uint16_t bad : {uint16_t(0x7fc0), uint16_t(0xffff), uint16_t(0x7f80)}) {
      std::vector<uint16_t> out = rounded(ref);
      out[at] = bad;
      const CheckResult r = check_bf16(out.data(), ref.data(), n);
      CHECK(!r.ok);
      CHECK(r.nonfinite == 1);
      CHECK(r.reason.find("not finite") != std::string::npos);
    }
  }
}

TEST_CASE("check_bf16: one element far off fails its bound though the L2 error passes") {
  std::mt19937_64 rng(103);
  const size_t n = 20011;
  const std::vector<double> ref = normal(rng, n);
  std::vector<uint16_t> out = rounded(ref);
  const size_t at = rng() % n;
  // Off by a fifth of the rms: ~0.14% of the total L2 norm, far over the
  // element's bound of 1% of itself plus 1% of the rms.
  out[at] = ref::float_to_bf16(float(ref[at] + 0.2));
  const CheckResult r = check_bf16(out.data(), ref.data(), n);
  CHECK(r.rel_l2 < scorer::Bf16Tolerance{}.rel_l2);
  CHECK(!r.ok);
  CHECK(r.bad_elements == 1);
  CHECK(r.worst_elem > 1);
  CHECK(r.reason.find("element " + std::to_string(at)) != std::string::npos);
}

TEST_CASE("check_bf16: a small error everywhere fails on the L2 error alone") {
  std::mt19937_64 rng(104);
  const size_t n = 3001;
  const std::vector<double> ref = normal(rng, n);
  std::vector<double> off(ref);
  for (double& x : off) x *= 1.005;  // 0.5% each: within every element's bound
  const CheckResult r = check_bf16(rounded(off).data(), ref.data(), n);
  CHECK(r.bad_elements == 0);
  CHECK(r.worst_elem <= 1);
  CHECK(r.rel_l2 > scorer::Bf16Tolerance{}.rel_l2);
  CHECK(!r.ok);
  CHECK(r.reason.find("relative L2") != std::string::npos);
}

TEST_CASE("check_router: the reference's own output passes") {
  std::mt19937_64 rng(201);
  RouterCase c(5, 37, 6, rng);
  const CheckResult r = c.check();
  CHECK_MESSAGE(r.ok, r.reason);
  CHECK(r.rel_l2 < 1e-6);
}

TEST_CASE("check_router: swapped ids pass only among near-ties") {
  std::mt19937_64 rng(202);
  RouterCase c(3, 29, 4, rng);
  // Make experts 1 and 2 of token 1 the top two, tied within 1e-6 of the row's
  // rms (tie tolerance 1e-4), and the third clearly lower.
  double* l = &c.ref_logits[1 * size_t(c.E)];
  double rms = 0;
  for (int e = 0; e < c.E; ++e) rms += l[e] * l[e] / c.E;
  rms = std::sqrt(rms);
  const double top = *std::max_element(l, l + c.E) + 1.0;
  l[2] = top;
  l[1] = top - 1e-6 * rms;
  c.finish();
  REQUIRE(c.ids[1 * size_t(c.k) + 0] == 2);
  REQUIRE(c.ids[1 * size_t(c.k) + 1] == 1);

  SUBCASE("a near-tie swapped") {
    std::swap(c.ids[1 * size_t(c.k) + 0], c.ids[1 * size_t(c.k) + 1]);
    const CheckResult r = c.check();
    CHECK_MESSAGE(r.ok, r.reason);
  }
  SUBCASE("a clear order swapped") {
    std::swap(c.ids[2 * size_t(c.k) + 1], c.ids[2 * size_t(c.k) + 2]);
    const CheckResult r = c.check();
    CHECK(!r.ok);
    CHECK(r.reason.find("not a tie") != std::string::npos);
  }
  SUBCASE("an expert outside the top k") {
    int outside = 0;
    while (std::find(&c.ids[0], &c.ids[0] + c.k, outside) != &c.ids[0] + c.k) ++outside;
    c.ids[c.k - 1] = outside;
    CHECK(!c.check().ok);
  }
}

TEST_CASE("check_router: repeated or out-of-range ids fail") {
  std::mt19937_64 rng(203);
  RouterCase c(4, 19, 5, rng);
  SUBCASE("repeated") {
    c.ids[2 * size_t(c.k) + 3] = c.ids[2 * size_t(c.k) + 1];
    const CheckResult r = c.check();
    CHECK(!r.ok);
    CHECK(r.reason.find("repeats") != std::string::npos);
  }
  SUBCASE("negative") {
    c.ids[0] = -1;
    const CheckResult r = c.check();
    CHECK(!r.ok);
    CHECK(r.reason.find("out of range") != std::string::npos);
  }
  SUBCASE("equal to E") {
    c.ids[size_t(c.T) * c.k - 1] = c.E;
    const CheckResult r = c.check();
    CHECK(!r.ok);
    CHECK(r.reason.find("out of range") != std::string::npos);
  }
}

TEST_CASE("check_router: logits and weights are held to their tolerances") {
  std::mt19937_64 rng(204);
  RouterCase c(6, 41, 3, rng);
  SUBCASE("a weight off by more than 1e-4") {
    c.weights[7] += 3e-4f;
    const CheckResult r = c.check();
    CHECK(!r.ok);
    CHECK(r.reason.find("topk_weights off") != std::string::npos);
  }
  SUBCASE("a weight off by fp32 rounding passes") {
    c.weights[7] = std::nextafter(c.weights[7], 2.0f);
    CHECK(c.check().ok);
  }
  SUBCASE("a NaN weight") {
    c.weights[4] = NAN;
    CHECK(!c.check().ok);
  }
  SUBCASE("one logit off by 1% of its row's rms") {
    c.logits[3 * size_t(c.E) + 11] += 0.01f;
    const CheckResult r = c.check();
    CHECK(!r.ok);
    CHECK(r.worst_elem > 1);
    CHECK(r.bad_elements == 1);
  }
  SUBCASE("a NaN logit") {
    c.logits[5] = NAN;
    const CheckResult r = c.check();
    CHECK(!r.ok);
    CHECK(r.nonfinite >= 1);
  }
}

TEST_CASE("check_bf16: the baseline's tolerance holds relative L2 to 1e-2 only") {
  std::mt19937_64 rng(105);
  const size_t n = 4001;
  const std::vector<double> ref = normal(rng, n);
  std::vector<double> off(ref);
  for (size_t i = 0; i < n; ++i) off[i] *= i % 2 ? 1.008 : 0.992;  // 0.8%: past the submission's bound
  CHECK(!check_bf16(rounded(off).data(), ref.data(), n).ok);
  CHECK(check_bf16(rounded(off).data(), ref.data(), n, scorer::baseline_tolerance()).ok);
  for (double& x : off) x *= 1.012;
  CHECK(!check_bf16(rounded(off).data(), ref.data(), n, scorer::baseline_tolerance()).ok);
}
