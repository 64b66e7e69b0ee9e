#include "tests/bad_kernels/quantized.h"
#include "tests/bad_kernels/quantized_gemm.cuh"

namespace bad_kernels {
namespace {

class QuantizedDense final : public submission::Dense {
 public:
  QuantizedDense(const submission::DenseDims& d, const submission::DenseWeights& w, quant::Scheme s)
      : d_(d), w_(w.W, d.N, d.K, s) {}
  void run(const submission::DenseIO& io, cudaStream_t s) override {
    launch_quantized_gemm<false>(io.X, nullptr, d_.M, d_.N, d_.K, w_, nullptr, io.out, s);
  }

 private:
  submission::DenseDims d_;
  QuantizedWeights w_;
};

}  // namespace

std::unique_ptr<submission::Dense> make_quantized_dense(const submission::DenseDims& dims,
                                                        const submission::DenseWeights& w, quant::Scheme scheme) {
  return std::make_unique<QuantizedDense>(dims, w, scheme);
}

}  // namespace bad_kernels
