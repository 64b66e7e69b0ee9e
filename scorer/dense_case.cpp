// dense: out[M, N] = X[M, K] . W[N, K]^T. W ~ N(0, 1/K) so outputs are O(1).
#include <cmath>
#include <utility>
#include <vector>

#include "dev/variants.h"
#include "reference/reference.h"
#include "scorer/device_buffers.h"
#include "scorer/random_fill.h"
#include "scorer/weight_sets_case.h"

namespace scorer {
namespace {

using submission::bf16;

class DenseCase final : public WeightSetsCase<DenseCase, submission::Dense, reference::DenseReference,
                                              submission::DenseDims, submission::DenseWeights> {
 public:
  DenseCase(const Shape& s, int sets, uint64_t seed, const Candidate& cand, cudaStream_t stream)
      : WeightSetsCase(s, sets, stream, {s.M, s.N, s.K}, cand.dense, submission::dev::make_dense, cand.variant),
        X_(size_t(s.M) * s.K * 2),
        ref_dev_(size_t(s.M) * s.N * 4),
        out_(size_t(s.M) * s.N * 2) {
    for (int i = 0; i < sets; ++i) {
      DeviceBuffer W(size_t(s.N) * s.K * 2);
      fill_normal_bf16(W.as<bf16>(), size_t(s.N) * s.K, derive_seed(seed, 100 + i), 1.0f / std::sqrt(float(s.K)),
                       stream);
      SCORER_CUDA(cudaStreamSynchronize(stream));
      Set& set = add_set({W.as<bf16>()}, std::move(W));
      set.base = reference::make_dense_baseline(dims_, set.weights);
      set.ref = reference::make_dense_reference(dims_, set.weights);
    }
    SCORER_CUDA(cudaDeviceSynchronize());
  }

  void new_inputs(int set, uint64_t seed) override {
    fill_normal_bf16(X_.as<bf16>(), size_t(s_.M) * s_.K, seed, 1.0f, stream_);
    sets_v_[set].ref->run(X_.as<bf16>(), ref_dev_.as<float>(), stream_);
    ref_ = take_reference(ref_dev_, stream_);
  }
  void poison_outputs() override { out_.poison(stream_); }
  CheckResult check(int) override { return check_bf16_output(out_, ref_, stream_); }
  CheckResult check_baseline(int) override { return check_bf16_output(out_, ref_, stream_, baseline_tolerance()); }

  submission::DenseIO io() const { return {X_.as<bf16>(), out_.as<bf16>()}; }

 private:
  DeviceBuffer X_, ref_dev_;
  GuardedOutput out_;
  std::vector<double> ref_;
};

}  // namespace

std::unique_ptr<OpCase> make_dense_case(const Shape& s, int sets, uint64_t seed, const Candidate& cand,
                                        cudaStream_t stream) {
  return std::make_unique<DenseCase>(s, sets, seed, cand, stream);
}

}  // namespace scorer
