#include "cpu_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "bf16_host.h"
#include "int4.h"

namespace ref {
namespace {

double dot_bf16(const uint16_t* a, const uint16_t* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += double(bf16_to_float(a[i])) * bf16_to_float(b[i]);
  return s;
}

double dot_bf16_f64(const uint16_t* a, const double* b, int n) {
  double s = 0;
  for (int i = 0; i < n; ++i) s += double(bf16_to_float(a[i])) * b[i];
  return s;
}

}  // namespace

std::vector<double> pooler_cpu(int B, int H, const uint16_t* hidden, const int32_t* cu_seqlens, const uint16_t* W,
                               const uint16_t* bias) {
  std::vector<double> out(size_t(B) * H);
  for (int b = 0; b < B; ++b) {
    const uint16_t* x = hidden + size_t(cu_seqlens[b + 1] - 1) * H;
    for (int n = 0; n < H; ++n)
      out[size_t(b) * H + n] = std::tanh(dot_bf16(x, W + size_t(n) * H, H) + bf16_to_float(bias[n]));
  }
  return out;
}

std::vector<double> dense_cpu(int M, int N, int K, const uint16_t* X, const uint16_t* W) {
  std::vector<double> out(size_t(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) out[size_t(m) * N + n] = dot_bf16(X + size_t(m) * K, W + size_t(n) * K, K);
  return out;
}

RouterCpu router_cpu(int T, int H, int E, int k, const uint16_t* X, const uint16_t* Wg) {
  RouterCpu r;
  r.logits.resize(size_t(T) * E);
  r.ids.resize(size_t(T) * k);
  r.weights.resize(size_t(T) * k);
  std::vector<int> order(E);
  for (int t = 0; t < T; ++t) {
    double* l = &r.logits[size_t(t) * E];
    for (int e = 0; e < E; ++e) l[e] = dot_bf16(X + size_t(t) * H, Wg + size_t(e) * H, H);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return l[a] > l[b]; });
    // softmax restricted to the top k, renormalised: the full denominator cancels.
    double mx = l[order[0]], sum = 0;
    for (int j = 0; j < k; ++j) sum += std::exp(l[order[j]] - mx);
    for (int j = 0; j < k; ++j) {
      r.ids[size_t(t) * k + j] = order[j];
      r.weights[size_t(t) * k + j] = std::exp(l[order[j]] - mx) / sum;
    }
  }
  return r;
}

std::vector<double> moe_cpu(int M, int H, int I, int E_global, int E_local, int k, int ep_rank, const uint16_t* X,
                            const int32_t* topk_ids, const float* topk_weights, const uint8_t* W13, const uint16_t* S13,
                            const uint8_t* W2, const uint16_t* S2) {
  (void)E_global;
  std::vector<double> out(size_t(M) * H, 0.0);
  std::vector<std::vector<double>> w13(E_local), w2(E_local);  // dequantized lazily
  const int first = ep_rank * E_local;
  std::vector<double> h(I);
  for (int m = 0; m < M; ++m) {
    for (int j = 0; j < k; ++j) {
      const int e = topk_ids[size_t(m) * k + j] - first;
      if (e < 0 || e >= E_local) continue;
      if (w13[e].empty()) {
        w13[e] = dequant_int4(W13 + size_t(e) * 2 * I * (H / 2), S13 + size_t(e) * 2 * I * (H / kGroupSize), 2 * I, H);
        w2[e] = dequant_int4(W2 + size_t(e) * H * (I / 2), S2 + size_t(e) * H * (I / kGroupSize), H, I);
      }
      const uint16_t* x = X + size_t(m) * H;
      for (int i = 0; i < I; ++i) {
        double gate = dot_bf16_f64(x, &w13[e][size_t(i) * H], H);
        double up = dot_bf16_f64(x, &w13[e][size_t(I + i) * H], H);
        h[i] = round_to_bf16(gate / (1.0 + std::exp(-gate)) * up);
      }
      const double wt = topk_weights[size_t(m) * k + j];
      for (int n = 0; n < H; ++n) {
        const double* row = &w2[e][size_t(n) * I];
        double s = 0;
        for (int i = 0; i < I; ++i) s += row[i] * h[i];
        out[size_t(m) * H + n] += wt * s;
      }
    }
  }
  return out;
}

}  // namespace ref
