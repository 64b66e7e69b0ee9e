// Pooler and dense as ops of a small-M GEMM engine: each op's row lookup (Rows: where token row m
// starts, nullptr past the end) and epilogue (Epi: bias, activation, store), and the op classes
// over any engine E(M, N, K, W, extra...) with run(rows, epi, stream). The uploaded ops use
// small_m::Engine (pooler.cu, dense.cu); the variants under dev/ other engines.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <utility>

#include "submission/submission.h"

namespace submission::small_m {

// The pooler's gather as a row lookup: row b is the last token of sequence b.
struct PoolerRows {
  const bf16* hidden;
  const int32_t* cu_seqlens;
  int B, H, S_total;
  // The end of sequence b (0 past the last sequence), loaded without a wait.
  __device__ int lookup(int b) const { return b < B ? __ldg(cu_seqlens + b + 1) : 0; }
  // A last-token index outside hidden (invalid cu_seqlens) reads as zeros
  // rather than out of bounds.
  __device__ const bf16* row(int, int end) const {
    const int r = end - 1;
    return r >= 0 && r < S_total ? hidden + size_t(r) * H : nullptr;
  }
  __device__ const bf16* row(int b) const { return row(b, lookup(b)); }
};

struct PoolerOut {
  static constexpr bool kHasBias = true;
  bf16* out;
  const bf16* bias_;
  int H;
  __device__ float bias(int n) const { return __bfloat162float(bias_[n]); }
  __device__ void store(int b, int n, float v) const { out[size_t(b) * H + n] = __float2bfloat16(tanhf(v)); }
};

struct DenseRows {
  const bf16* X;
  int M, K;
  __device__ int lookup(int m) const { return m; }  // nothing to load
  __device__ const bf16* row(int m, int) const { return row(m); }
  __device__ const bf16* row(int m) const { return m < M ? X + size_t(m) * K : nullptr; }
};

struct DenseOut {
  static constexpr bool kHasBias = false;
  bf16* out;
  int N;
  __device__ float bias(int) const { return 0.0f; }
  __device__ void store(int m, int n, float v) const { out[size_t(m) * N + n] = __float2bfloat16(v); }
};

template <template <class, class> class E>  // the engine, over the op's Rows and Epi
class PoolerOn final : public Pooler {
 public:
  template <class... Extra>
  PoolerOn(const PoolerDims& d, const PoolerWeights& w, Extra&&... extra)
      : dims_(d), bias_(w.bias), engine_(d.B, d.H, d.H, w.W, std::forward<Extra>(extra)...) {}

  void run(const PoolerIO& io, cudaStream_t stream) override {
    engine_.run(PoolerRows{io.hidden, io.cu_seqlens, dims_.B, dims_.H, io.S_total}, PoolerOut{io.out, bias_, dims_.H},
                stream);
  }

 private:
  PoolerDims dims_;
  const bf16* bias_;
  E<PoolerRows, PoolerOut> engine_;
};

template <template <class, class> class E>  // the engine, over the op's Rows and Epi
class DenseOn final : public Dense {
 public:
  template <class... Extra>
  DenseOn(const DenseDims& d, const DenseWeights& w, Extra&&... extra)
      : dims_(d), engine_(d.M, d.N, d.K, w.W, std::forward<Extra>(extra)...) {}

  void run(const DenseIO& io, cudaStream_t stream) override {
    engine_.run(DenseRows{io.X, dims_.M, dims_.K}, DenseOut{io.out, dims_.N}, stream);
  }

 private:
  DenseDims dims_;
  E<DenseRows, DenseOut> engine_;
};

}  // namespace submission::small_m
