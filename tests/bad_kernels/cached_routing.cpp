#include "tests/bad_kernels/cached_routing.h"

#include <stdexcept>
#include <string>

namespace bad_kernels {
namespace {

class CachedRoutingMoe final : public submission::Moe {
 public:
  CachedRoutingMoe(const submission::MoeDims& d, const submission::MoeWeights& w, bool keep_first)
      : routes_(size_t(d.M) * d.k), keep_first_(keep_first), inner_(submission::make_moe(d, w)) {
    if (cudaMalloc(&ids_, routes_ * sizeof(int32_t)) != cudaSuccess ||
        cudaMalloc(&weights_, routes_ * sizeof(float)) != cudaSuccess)
      throw std::runtime_error("cached_routing: prepare failed");
  }
  ~CachedRoutingMoe() override {
    cudaFree(ids_);
    cudaFree(weights_);
  }

  void run(const submission::MoeIO& io, cudaStream_t s) override {
    if (!keep_first_ || !copied_) {
      cudaMemcpyAsync(ids_, io.topk_ids, routes_ * sizeof(int32_t), cudaMemcpyDeviceToDevice, s);
      cudaMemcpyAsync(weights_, io.topk_weights, routes_ * sizeof(float), cudaMemcpyDeviceToDevice, s);
      copied_ = true;
    }
    inner_->run({io.X, ids_, weights_, io.out}, s);
  }

 private:
  size_t routes_;
  bool keep_first_, copied_ = false;
  std::unique_ptr<submission::Moe> inner_;
  int32_t* ids_ = nullptr;
  float* weights_ = nullptr;
};

}  // namespace

std::unique_ptr<submission::Moe> make_cached_routing_moe(const submission::MoeDims& dims,
                                                         const submission::MoeWeights& w, bool keep_first) {
  return std::make_unique<CachedRoutingMoe>(dims, w, keep_first);
}

}  // namespace bad_kernels
