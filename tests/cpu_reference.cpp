// The fp64 CPU references, the int4 format and bf16 rounding: hand-computed
// answers on small integer inputs, and a naive MoE written here from the op's
// definition in submission/submission.h.
#include "reference/cpu_reference.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "reference/bf16_host.h"
#include "reference/int4.h"
#include "reference/reference.h"
#include "scorer/workload.h"

using ref::bf16_to_float;
using ref::float_to_bf16;

namespace {

std::vector<uint16_t> bf16s(const std::vector<float>& v) {
  std::vector<uint16_t> out;
  for (float x : v) out.push_back(float_to_bf16(x));
  return out;
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

bool is_bf16_nan(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

// The op's MoE, written out term by term: no dequantized copies, the expert's
// rank found by division.
std::vector<double> naive_moe(int M, int H, int I, int E_local, int k, int ep_rank, const std::vector<uint16_t>& X,
                              const std::vector<int32_t>& ids, const std::vector<float>& wts,
                              const std::vector<uint8_t>& W13, const std::vector<uint16_t>& S13,
                              const std::vector<uint8_t>& W2, const std::vector<uint16_t>& S2) {
  // Element c of row r of expert e of a packed [rows, cols] matrix.
  auto weight = [](const std::vector<uint8_t>& W, const std::vector<uint16_t>& S, int rows, int cols, int e, int r,
                   int c) {
    const size_t row = size_t(e) * rows + r;
    const int code = (W[row * (cols / 2) + c / 2] >> (4 * (c % 2))) & 15;
    return (code - 8) * double(bf16_to_float(S[row * (cols / 128) + c / 128]));
  };
  std::vector<double> out(size_t(M) * H, 0.0);
  for (int m = 0; m < M; ++m)
    for (int j = 0; j < k; ++j) {
      const int g = ids[size_t(m) * k + j];
      if (g / E_local != ep_rank) continue;
      const int e = g % E_local;
      std::vector<double> h(I);
      for (int i = 0; i < I; ++i) {
        double gate = 0, up = 0;
        for (int c = 0; c < H; ++c) {
          const double x = bf16_to_float(X[size_t(m) * H + c]);
          gate += x * weight(W13, S13, 2 * I, H, e, i, c);
          up += x * weight(W13, S13, 2 * I, H, e, I + i, c);
        }
        h[i] = ref::round_to_bf16(gate / (1 + std::exp(-gate)) * up);
      }
      for (int n = 0; n < H; ++n) {
        double s = 0;
        for (int i = 0; i < I; ++i) s += weight(W2, S2, H, I, e, n, i) * h[i];
        out[size_t(m) * H + n] += wts[size_t(m) * k + j] * s;
      }
    }
  return out;
}

struct MoeCase {
  int M, H, I, E_global, E_local, k, ep_rank;
  std::vector<uint16_t> X, S13, S2;
  std::vector<int32_t> ids;
  std::vector<float> wts;
  std::vector<uint8_t> W13, W2;

  MoeCase(int M_, int H_, int I_, int Eg, int El, int k_, int rank, std::vector<int32_t> ids_, std::mt19937_64& rng)
      : M(M_), H(H_), I(I_), E_global(Eg), E_local(El), k(k_), ep_rank(rank), ids(ids_) {
    std::normal_distribution<float> nd(0, 1);
    std::uniform_real_distribution<float> scale(0.005f, 0.03f), w(0.05f, 1.0f);
    std::uniform_int_distribution<int> code(0, 255);
    for (int i = 0; i < M * H; ++i) X.push_back(float_to_bf16(nd(rng)));
    for (int i = 0; i < M * k; ++i) wts.push_back(w(rng));
    W13.resize(size_t(E_local) * 2 * I * H / 2);
    W2.resize(size_t(E_local) * H * I / 2);
    for (uint8_t& b : W13) b = uint8_t(code(rng));
    for (uint8_t& b : W2) b = uint8_t(code(rng));
    for (size_t i = 0; i < size_t(E_local) * 2 * I * H / 128; ++i)
      S13.push_back(float_to_bf16(scale(rng) * (rng() % 2 ? 1 : -1)));
    for (size_t i = 0; i < size_t(E_local) * H * I / 128; ++i) S2.push_back(float_to_bf16(scale(rng)));
  }
  std::vector<double> cpu() const {
    return ref::moe_cpu(M, H, I, E_global, E_local, k, ep_rank, X.data(), ids.data(), wts.data(), W13.data(),
                        S13.data(), W2.data(), S2.data());
  }
  std::vector<double> naive() const { return naive_moe(M, H, I, E_local, k, ep_rank, X, ids, wts, W13, S13, W2, S2); }
};

double row_norm(const std::vector<double>& v, int row, int width) {
  double s = 0;
  for (int i = 0; i < width; ++i) s += v[size_t(row) * width + i] * v[size_t(row) * width + i];
  return std::sqrt(s);
}

}  // namespace

TEST_CASE("dense_cpu: a hand-computed product") {
  const std::vector<uint16_t> X = bf16s({1, 2, 3, 4, 5, 6, 7, 8,  //
                                         -1, 0, 1, 0, -1, 0, 1, 0});
  const std::vector<uint16_t> W = bf16s({1, 1, 1,  1, 1, 1, 1, 1,   //
                                         1, 0, 0,  0, 0, 0, 0, -1,  //
                                         2, 0, -1, 0, 0, 0, 0, 0.5f});
  const std::vector<double> out = ref::dense_cpu(2, 3, 8, X.data(), W.data());
  CHECK(out == std::vector<double>{36, -7, 3, 0, -1, -3});
}

TEST_CASE("pooler_cpu: the last token of each sequence, then tanh(W x + bias)") {
  const int B = 2, H = 8;
  const std::vector<int32_t> cu = {0, 3, 5};    // last tokens: rows 2 and 4
  std::vector<uint16_t> hidden(5 * H, 0x7fc0);  // NaN: a row read by mistake shows
  for (int r : {2, 4})
    for (int i = 0; i < H; ++i) hidden[r * H + i] = float_to_bf16(float(r - i));
  std::vector<float> w(H * H, 0);
  for (int n = 0; n < 7; ++n) w[n * H + n] = 1;      // rows 0..6 pick one element
  for (int i = 0; i < H; ++i) w[7 * H + i] = 0.25f;  // row 7 averages a quarter of each
  const std::vector<uint16_t> W = bf16s(w), bias = bf16s({0, 0, 0, 0, 0, 0, 0, -1});
  const std::vector<double> out = ref::pooler_cpu(B, H, hidden.data(), cu.data(), W.data(), bias.data());
  // Row 2 is 2,1,0,-1,-2,-3,-4,-5 (sum -12); row 4 is 4,3,...,-3 (sum 4).
  const double pre[2][8] = {{2, 1, 0, -1, -2, -3, -4, 0.25 * -12 - 1}, {4, 3, 2, 1, 0, -1, -2, 0.25 * 4 - 1}};
  for (int b = 0; b < B; ++b)
    for (int n = 0; n < H; ++n) CHECK(out[b * H + n] == doctest::Approx(std::tanh(pre[b][n])).epsilon(1e-15));
}

TEST_CASE("router_cpu: ties go to the lower id, weights are a softmax over the top k") {
  const int T = 2, H = 8, E = 5, k = 3;
  // Token t is the unit vector e_t, so its logits are column t of Wg.
  std::vector<float> x(T * H, 0), wg(E * H, 0);
  x[0 * H + 0] = 1;
  x[1 * H + 1] = 1;
  const float col0[E] = {1, 3, 3, 2, 3}, col1[E] = {0, -1, 2, 2, 1};
  for (int e = 0; e < E; ++e) wg[e * H + 0] = col0[e], wg[e * H + 1] = col1[e];
  const std::vector<uint16_t> X = bf16s(x), Wg = bf16s(wg);
  const ref::RouterCpu r = ref::router_cpu(T, H, E, k, X.data(), Wg.data());
  CHECK(r.logits == std::vector<double>{1, 3, 3, 2, 3, 0, -1, 2, 2, 1});
  CHECK(r.ids == std::vector<int32_t>{1, 2, 4, 2, 3, 4});
  for (int j = 0; j < k; ++j) CHECK(r.weights[j] == doctest::Approx(1.0 / 3).epsilon(1e-15));
  const double e2 = std::exp(2.0), e1 = std::exp(1.0);
  CHECK(r.weights[3] == doctest::Approx(e2 / (2 * e2 + e1)).epsilon(1e-15));
  CHECK(r.weights[4] == doctest::Approx(e2 / (2 * e2 + e1)).epsilon(1e-15));
  CHECK(r.weights[5] == doctest::Approx(e1 / (2 * e2 + e1)).epsilon(1e-15));
}

TEST_CASE("router_cpu: random logits give descending distinct ids and weights summing to 1") {
  std::mt19937_64 rng(301);
  std::normal_distribution<float> nd(0, 1);
  const int T = 7, H = 24, E = 13, k = 5;
  std::vector<float> x(T * H), wg(E * H);
  for (float& v : x) v = nd(rng);
  for (float& v : wg) v = nd(rng);
  const std::vector<uint16_t> X = bf16s(x), Wg = bf16s(wg);
  const ref::RouterCpu r = ref::router_cpu(T, H, E, k, X.data(), Wg.data());
  for (int t = 0; t < T; ++t) {
    double sum = 0, kth = INFINITY;
    std::vector<bool> seen(E);
    for (int j = 0; j < k; ++j) {
      const int id = r.ids[t * k + j];
      REQUIRE(id >= 0);
      REQUIRE(id < E);
      CHECK(!seen[id]);
      seen[id] = true;
      CHECK(r.logits[t * E + id] <= kth);
      kth = r.logits[t * E + id];
      sum += r.weights[t * k + j];
    }
    for (int e = 0; e < E; ++e)
      if (!seen[e]) CHECK(r.logits[t * E + e] <= kth);
    CHECK(sum == doctest::Approx(1).epsilon(1e-14));
  }
}

TEST_CASE("moe_cpu: expert parallelism, tokens with no local route, against a naive MoE") {
  std::mt19937_64 rng(302);
  // 6 experts over 3 ranks of 2; rank 1 holds global experts 2 and 3.
  const std::vector<int32_t> ids = {2, 5,   // one local route
                                    3, 2,   // both local
                                    0, 5,   // none: zeros
                                    4, 3,   // the second local
                                    1, 2};  // the second local
  const MoeCase c(5, 256, 384, 6, 2, 2, 1, ids, rng);
  const std::vector<double> got = c.cpu(), want = c.naive();
  REQUIRE(got.size() == want.size());
  for (int m = 0; m < c.M; ++m) {
    const double norm = row_norm(want, m, c.H);
    if (m == 2) {
      CHECK(norm == 0);
      CHECK(row_norm(got, m, c.H) == 0);
      continue;
    }
    CHECK(norm > 0);
    for (int n = 0; n < c.H; ++n)
      CHECK(got[size_t(m) * c.H + n] == doctest::Approx(want[size_t(m) * c.H + n]).epsilon(1e-9));
  }
  // Token 0's only local route is expert 2 with its weight: doubling that
  // weight doubles the output, and the other rank's route adds nothing.
  MoeCase twice = c;
  twice.wts[0] *= 2;
  twice.wts[1] = 100;
  const std::vector<double> got2 = twice.cpu();
  for (int n = 0; n < c.H; ++n) CHECK(got2[n] == doctest::Approx(2 * got[n]).epsilon(1e-12));
}

TEST_CASE("moe_cpu: k = 1 on a single rank") {
  std::mt19937_64 rng(303);
  const MoeCase c(3, 128, 128, 4, 4, 1, 0, {3, 0, 3}, rng);
  const std::vector<double> got = c.cpu(), want = c.naive();
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(want[i]).epsilon(1e-9));
  for (int m = 0; m < c.M; ++m) CHECK(row_norm(got, m, c.H) > 0);
}

TEST_CASE("int4: pack and unpack round-trip, low nibble first") {
  const std::vector<uint8_t> packed = ref::pack_int4({1, 2, 15, 0}, 1, 4);
  CHECK(packed == std::vector<uint8_t>{0x21, 0x0f});
  CHECK(ref::int4_code(packed.data(), 0) == 1);
  CHECK(ref::int4_code(packed.data(), 1) == 2);
  CHECK(ref::int4_code(packed.data(), 2) == 15);
  CHECK(ref::int4_code(packed.data(), 3) == 0);

  std::mt19937_64 rng(304);
  const int rows = 3, cols = 26;
  std::vector<uint8_t> codes(rows * cols);
  for (uint8_t& q : codes) q = uint8_t(rng() % 16);
  const std::vector<uint8_t> p = ref::pack_int4(codes, rows, cols);
  REQUIRE(p.size() == size_t(rows * cols / 2));
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) CHECK(ref::int4_code(p.data() + r * cols / 2, c) == codes[r * cols + c]);

  CHECK_THROWS_AS(ref::pack_int4({1, 2, 3}, 1, 3), std::invalid_argument);
  CHECK_THROWS_AS(ref::pack_int4({1, 16}, 1, 2), std::invalid_argument);
  CHECK_THROWS_AS(ref::pack_int4({1, 2}, 2, 2), std::invalid_argument);
}

TEST_CASE("int4: dequantization is (q - 8) * the scale of the element's group of 128") {
  const int rows = 2, cols = 256;
  std::vector<uint8_t> codes(rows * cols);
  for (int i = 0; i < rows * cols; ++i) codes[i] = uint8_t((i * 7) % 16);
  const std::vector<uint8_t> p = ref::pack_int4(codes, rows, cols);
  const std::vector<uint16_t> scales = bf16s({0.5f, -2.0f, 0.125f, 3.0f});  // [rows, 2 groups]
  const std::vector<double> w = ref::dequant_int4(p.data(), scales.data(), rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c)
      CHECK(w[r * cols + c] == (codes[r * cols + c] - 8) * double(bf16_to_float(scales[r * 2 + c / 128])));
  CHECK(w[0] == -4);   // code 0, scale 0.5
  CHECK(w[129] == 2);  // code 129 * 7 % 16 = 7, scale -2 (second group)
  CHECK_THROWS_AS(ref::dequant_int4(p.data(), scales.data(), 4, 64), std::invalid_argument);
}

TEST_CASE("bf16: round to nearest, ties to even; NaN stays NaN") {
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(bf16_to_float(0x3f80) == 1.0f);
  CHECK(bf16_to_float(0xc040) == -3.0f);
  // 1 + 2^-8 lies halfway between 0x3f80 and 0x3f81: to the even one, down.
  CHECK(float_to_bf16(1.0f + 0x1p-8f) == 0x3f80);
  // 1 + 3 * 2^-8 lies halfway between 0x3f81 and 0x3f82: to the even one, up.
  CHECK(float_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3f82);
  // Just above halfway rounds up; just below rounds down.
  CHECK(float_to_bf16(from_bits(bits(1.0f + 0x1p-8f) + 1)) == 0x3f81);
  CHECK(float_to_bf16(from_bits(bits(1.0f + 0x1p-8f) - 1)) == 0x3f80);
  CHECK(float_to_bf16(-(1.0f + 0x1p-8f)) == 0xbf80);
  // The largest float rounds up to infinity; infinities stay.
  CHECK(float_to_bf16(from_bits(0x7f7fffff)) == 0x7f80);
  CHECK(float_to_bf16(INFINITY) == 0x7f80);
  CHECK(float_to_bf16(-INFINITY) == 0xff80);
  // A NaN whose payload is all in the low 16 bits would truncate to infinity.
  CHECK(is_bf16_nan(float_to_bf16(from_bits(0x7f800001))));
  CHECK(is_bf16_nan(float_to_bf16(from_bits(0xffc00000))));
  CHECK(is_bf16_nan(float_to_bf16(NAN)));
  CHECK(std::isnan(ref::round_to_bf16(NAN)));
  CHECK(ref::round_to_bf16(1.0 + 0x1p-8) == 1.0);
  CHECK(ref::round_to_bf16(1.0 + 0x1p-7) == 1.0 + 0x1p-7);
}

TEST_CASE("moe batched baseline: its GEMM entries bound the blocks of every routing, and tightly") {
  // The most blocks any routing can take: a knapsack over the experts of
  // per-expert route counts n_e <= M summing to at most M*k (every routing's
  // counts are such, so this is at least the most a routing takes).
  auto most_blocks = [](const submission::MoeDims& d) {
    const int R = d.M * d.k, B = reference::moe_batched_block_rows(d.M);
    std::vector<int> best(R + 1, 0);  // best[r]: most blocks with r routes over the experts so far
    for (int e = 0; e < d.E_local; ++e)
      for (int r = R; r >= 0; --r)
        for (int n = 1; n <= std::min(d.M, r); ++n) best[r] = std::max(best[r], best[r - n] + (n + B - 1) / B);
    return *std::max_element(best.begin(), best.end());
  };
  for (int M : {1, 2, 3, 7, 8, 9, 31, 64, 65, 100})
    for (int E_local : {1, 2, 5, 8, 16})
      for (int k : {1, 2, 3, 8}) {
        if (k > E_local * 4) continue;
        const submission::MoeDims d{M, 128, 128, E_local * 4, E_local, k, 1};
        CAPTURE(M);
        CAPTURE(E_local);
        CAPTURE(k);
        CHECK(reference::moe_batched_max_blocks(d) == most_blocks(d));
      }
  CHECK(reference::moe_batched_block_rows(1) == 1);
  CHECK(reference::moe_batched_block_rows(33) == 64);
  CHECK(reference::moe_batched_block_rows(1000) == 64);

  // The public moe shapes: the spare GEMM entries the batched baseline runs
  // for their drawn routings stay below the bound, which no routing exceeds.
  const scorer::ShapesFile f = scorer::load_shapes("shapes.toml");
  for (const scorer::Shape& s : f.shapes) {
    if (s.op != scorer::Op::moe_w4a16) continue;
    const submission::MoeDims d{s.M, s.H, s.I, s.E_global, s.E_local, s.k, s.ep_rank};
    const int B = reference::moe_batched_block_rows(d.M);
    for (const scorer::Routing& r : scorer::routing_pool(s, scorer::shape_seed(1, s))) {
      std::vector<int> n(d.E_local, 0);
      for (int id : r.ids)
        if (id / d.E_local == d.ep_rank) ++n[id % d.E_local];
      int blocks = 0;
      for (int c : n) blocks += (c + B - 1) / B;
      CHECK(blocks <= reference::moe_batched_max_blocks(d));
    }
  }
}
