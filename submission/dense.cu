// dense: out[M, N] = X[M, K] . W[N, K]^T on the small-M engine
// (submission/small_m_gemm.cuh): one launch per call, whatever the split; or
// through cuBLASLt (submission/dense_cublaslt.cu). "default" picks the engine's
// direct_rotated kernel where it has been measured to beat cuBLASLt
// (small_m::direct_tiles_one_wave), cuBLASLt everywhere else.
#include <memory>
#include <string>
#include <vector>

#include "submission/dense_cublaslt.h"
#include "submission/small_m_gemm.cuh"
#include "submission/variants.h"

namespace submission {
namespace {

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

class DenseOp final : public Dense {
 public:
  DenseOp(const DenseDims& d, const DenseWeights& w, small_m::Kernel kernel)
      : dims_(d), engine_(d.M, d.N, d.K, w.W, kernel) {}

  void run(const DenseIO& io, cudaStream_t stream) override {
    engine_.run(DenseRows{io.X, dims_.M, dims_.K}, DenseOut{io.out, dims_.N}, stream);
  }

 private:
  DenseDims dims_;
  small_m::Engine<DenseRows, DenseOut> engine_;
};

}  // namespace

namespace detail {
std::vector<std::string> dense_variants() {
  std::vector<std::string> names = small_m::variant_names();  // "default" first
  names.insert(names.begin() + 1, "cublaslt");
  return names;
}
}  // namespace detail

std::unique_ptr<Dense> make_dense(const DenseDims& dims, const DenseWeights& w, const std::string& variant) {
  // Measured on the H200 at M = 32 (docs/perf-log.md, rounds 51, 57 and 89):
  // direct_interleaved runs 1.06-1.14x of cuBLASLt where its blocks fit one
  // wave (o and down with two tiles each, qkv with three), and loses over
  // several waves (gate_up, 0.94-0.95x), as every other engine kernel did on
  // every shape (0.64-0.94x); its rotated walks (direct_rotated) take another
  // 1.7-2.2% off qkv, o and down.
  if (variant == "default")
    return small_m::direct_tiles_one_wave(dims.M, dims.N, dims.K, device_sm_count())
               ? std::make_unique<DenseOp>(dims, w, small_m::Kernel::direct_rotated)
               : make_dense_cublaslt(dims, w);
  if (variant == "cublaslt") return make_dense_cublaslt(dims, w);
  return std::make_unique<DenseOp>(dims, w, small_m::kernel_for_variant("dense", variant));
}

}  // namespace submission
