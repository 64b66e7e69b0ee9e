// The bf16 criteria of scorer/check.h, calibrated by simulation with the
// scorer's own input distributions on every public dense and pooler shape
// (256 output columns of each, all rows): a kernel with the exact weights and
// fp32 sums, the pooler baseline (its GEMM rounded to bf16 before bias and
// tanh), and kernels whose weights were quantized in prepare() (int8 with a
// bf16 scale per 8, per 16 or per row; fp8 e4m3 with a scale per row). The
// exact ones must pass with margin, every quantized one must fail.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <vector>

#include "reference/bf16_host.h"
#include "scorer/check.h"
#include "scorer/shapes.h"
#include "scorer/workload.h"
#include "tests/bad_kernels/quantize.h"

namespace {

constexpr int kColumns = 256;

// bf16 patterns of N(0, sd^2) draws, as the scorer draws its inputs.
std::vector<uint16_t> normal_bf16(size_t n, double sd, std::mt19937_64& rng) {
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = ref::float_to_bf16(float(scorer::draw_normal(rng) * sd));
  return v;
}

std::vector<float> as_float(const std::vector<uint16_t>& v) {
  std::vector<float> f(v.size());
  for (size_t i = 0; i < v.size(); ++i) f[i] = ref::bf16_to_float(v[i]);
  return f;
}

// One shape's simulation: rows x K activations, kColumns weight rows of K.
struct Simulation {
  int rows, K;
  bool pooler;
  std::vector<float> X, W, bias;
  std::vector<uint16_t> W_bits;
  std::vector<double> ref;

  Simulation(const scorer::Shape& s, std::mt19937_64& rng)
      : rows(s.op == scorer::Op::pooler ? s.B : s.M),
        K(s.op == scorer::Op::pooler ? s.H : s.K),
        pooler(s.op == scorer::Op::pooler) {
    // dense: W ~ N(0, 1/K); pooler: W ~ N(0, 1/H), bias ~ N(0, 0.1^2) (scorer/*_case.cpp)
    X = as_float(normal_bf16(size_t(rows) * K, 1.0, rng));
    W_bits = normal_bf16(size_t(kColumns) * K, 1.0 / std::sqrt(double(K)), rng);
    W = as_float(W_bits);
    bias = as_float(normal_bf16(kColumns, pooler ? 0.1 : 0.0, rng));
    ref.resize(size_t(rows) * kColumns);
    for (int m = 0; m < rows; ++m)
      for (int n = 0; n < kColumns; ++n) {
        double acc = 0;
        for (int k = 0; k < K; ++k) acc += double(X[size_t(m) * K + k]) * W[size_t(n) * K + k];
        ref[size_t(m) * kColumns + n] = pooler ? std::tanh(acc + bias[n]) : acc;
      }
  }

  // A kernel's bf16 output from weights `w` (fp32 sums); round_gemm: the
  // pooler baseline's GEMM output rounded to bf16 before bias and tanh.
  scorer::CheckResult run(const std::vector<float>& w, bool round_gemm = false) const {
    std::vector<uint16_t> out(ref.size());
    for (int m = 0; m < rows; ++m)
      for (int n = 0; n < kColumns; ++n) {
        float acc = 0;
        for (int k = 0; k < K; ++k) acc += X[size_t(m) * K + k] * w[size_t(n) * K + k];
        if (round_gemm) acc = ref::bf16_to_float(ref::float_to_bf16(acc));
        out[size_t(m) * kColumns + n] = ref::float_to_bf16(pooler ? std::tanh(acc + bias[n]) : acc);
      }
    return scorer::check_bf16(out.data(), ref.data(), ref.size());
  }

  std::vector<float> dequantized(quant::Scheme scheme) const {
    const quant::Quantized q = quant::quantize(W_bits.data(), kColumns, K, scheme);
    std::vector<float> w(W.size());
    for (int n = 0; n < kColumns; ++n)
      for (int k = 0; k < K; ++k) w[size_t(n) * K + k] = q.value(n, k);
    return w;
  }
};

}  // namespace

TEST_CASE("precision: exact weights pass with margin, weights quantized in prepare fail, on every public shape") {
  const scorer::Bf16Tolerance tol;
  const scorer::ShapesFile f = scorer::load_shapes("shapes.toml");
  std::mt19937_64 rng(34);
  int simulated = 0;
  for (const scorer::Shape& s : f.shapes) {
    if (s.op != scorer::Op::dense && s.op != scorer::Op::pooler) continue;
    CAPTURE(s.name);
    const Simulation sim(s, rng);
    ++simulated;
    // Rounding the output to bf16 alone: ~0.17% relative L2 for dense outputs
    // (normal), ~0.14% for the pooler's (tanh); every element within 2^-8 of
    // itself, under 0.4 of its bound.
    const scorer::CheckResult exact = sim.run(sim.W);
    CHECK_MESSAGE(exact.ok, exact.reason);
    CHECK(exact.rel_l2 < 0.7 * tol.rel_l2);
    CHECK(exact.worst_elem < 0.45);
    if (sim.pooler) {
      const scorer::CheckResult base = sim.run(sim.W, true);
      CHECK_MESSAGE(base.ok, base.reason);
      CHECK(base.rel_l2 < 0.8 * tol.rel_l2);
      CHECK(base.worst_elem < 0.6);
    }
    // Quantized: int8 per 8 ~0.44-0.47%, per 16 ~0.50-0.55%, per row
    // ~0.85-0.98%, fp8 per row ~2.6-2.9%.
    for (quant::Scheme q : quant::kQuantized) {
      CAPTURE(quant::name(q));
      const scorer::CheckResult r = sim.run(sim.dequantized(q));
      CHECK(!r.ok);
      CHECK(r.rel_l2 > 1.3 * tol.rel_l2);
    }
  }
  CHECK(simulated == 8);
}

TEST_CASE("quantize: e4m3 codes round-trip, int8 groups share one bf16 scale") {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;  // NaN
    const float v = quant::e4m3_value(uint8_t(b));
    CHECK(quant::e4m3_round(v) == v);
    CHECK(int(quant::e4m3_bits(v)) == b);
  }
  CHECK(quant::e4m3_value(0x7e) == 448.0f);
  CHECK(quant::e4m3_value(0x01) == std::ldexp(1.0f, -9));
  CHECK(quant::e4m3_round(1000.0f) == 448.0f);
  CHECK(quant::e4m3_round(1.0f + 1.0f / 16) == 1.0f);  // a tie goes to even
  CHECK(quant::e4m3_round(1.0f + 3.0f / 16) == 1.25f);

  std::vector<uint16_t> W(32);
  for (int i = 0; i < 32; ++i) W[i] = ref::float_to_bf16(float(i - 10) / 8);
  const quant::Quantized g8 = quant::quantize(W.data(), 2, 16, quant::Scheme::int8_g8);
  REQUIRE(g8.scales.size() == 4);
  CHECK(g8.scales[0] == ref::bf16_to_float(ref::float_to_bf16(1.25f / 127)));  // |-10/8| is the absmax
  for (int i = 0; i < 32; ++i) CHECK(std::fabs(g8.value(i / 16, i % 16) - float(i - 10) / 8) <= g8.scales[i / 8] / 2);
  const quant::Quantized row = quant::quantize(W.data(), 2, 16, quant::Scheme::int8_row);
  CHECK(row.scales.size() == 2);
  CHECK(quant::quantize(W.data(), 2, 16, quant::Scheme::fp8_row).value(1, 15) == 21.0f / 8);
}
