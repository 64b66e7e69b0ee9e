#include "tests/bad_kernels/quantized.h"
#include "tests/bad_kernels/quantized_gemm.cuh"

namespace bad_kernels {
namespace {

class QuantizedPooler final : public submission::Pooler {
 public:
  QuantizedPooler(const submission::PoolerDims& d, const submission::PoolerWeights& w, quant::Scheme s)
      : d_(d), bias_(w.bias), w_(w.W, d.H, d.H, s) {}
  void run(const submission::PoolerIO& io, cudaStream_t s) override {
    launch_quantized_gemm<true>(io.hidden, io.cu_seqlens, d_.B, d_.H, d_.H, w_, bias_, io.out, s);
  }

 private:
  submission::PoolerDims d_;
  const submission::bf16* bias_;
  QuantizedWeights w_;
};

}  // namespace

std::unique_ptr<submission::Pooler> make_quantized_pooler(const submission::PoolerDims& dims,
                                                          const submission::PoolerWeights& w, quant::Scheme scheme) {
  return std::make_unique<QuantizedPooler>(dims, w, scheme);
}

}  // namespace bad_kernels
