// pooler: out[B, H] = tanh(hidden[cu_seqlens[b+1] - 1] . W^T + bias) on the
// small-M engine (submission/small_m_gemm.cuh). The gather is the engine's row
// lookup, read on the device; bias and tanh are its epilogue: one launch.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "submission/small_m_gemm.cuh"
#include "submission/variants.h"

namespace submission {
namespace {

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

class PoolerOp final : public Pooler {
 public:
  PoolerOp(const PoolerDims& d, const PoolerWeights& w, small_m::Kernel kernel)
      : dims_(d), bias_(w.bias), engine_(d.B, d.H, d.H, w.W, kernel) {}

  void run(const PoolerIO& io, cudaStream_t stream) override {
    engine_.run(PoolerRows{io.hidden, io.cu_seqlens, dims_.B, dims_.H, io.S_total},
                PoolerOut{io.out, bias_, dims_.H}, stream);
  }

 private:
  PoolerDims dims_;
  const bf16* bias_;
  small_m::Engine<PoolerRows, PoolerOut> engine_;
};

}  // namespace

namespace detail {
std::vector<std::string> pooler_variants() { return small_m::variant_names(); }
}  // namespace detail

std::unique_ptr<Pooler> make_pooler(const PoolerDims& dims, const PoolerWeights& w,
                                    const std::string& variant) {
  const small_m::Kernel kernel = small_m::kernel_for_variant("pooler", variant);
  if (dims.B < 1 || dims.H < 8 || dims.H % 8 != 0)
    throw std::invalid_argument("pooler: need B >= 1, H >= 8, H % 8 == 0 (got B=" +
                                std::to_string(dims.B) + " H=" + std::to_string(dims.H) + ")");
  return std::make_unique<PoolerOp>(dims, w, kernel);
}

}  // namespace submission
