// dense: out[M, N] = X[M, K] . W[N, K]^T. W ~ N(0, 1/K) so outputs are O(1).
#include <cmath>
#include <vector>

#include "dev/variants.h"
#include "reference/reference.h"
#include "scorer/device_buffers.h"
#include "scorer/op_case.h"
#include "scorer/random_fill.h"

namespace scorer {
namespace {

using submission::bf16;

class DenseCase final : public OpCase {
 public:
  DenseCase(const Shape& s, int sets, uint64_t seed, const Candidate& cand, cudaStream_t stream)
      : OpCase(sets, stream),
        s_(s),
        dims_{s.M, s.N, s.K},
        cand_(cand),
        X_(size_t(s.M) * s.K * 2),
        ref_dev_(size_t(s.M) * s.N * 4),
        out_(size_t(s.M) * s.N * 2) {
    for (int i = 0; i < sets; ++i) {
      Set& set = sets_v_.emplace_back();
      set.W = DeviceBuffer(size_t(s.N) * s.K * 2);
      fill_normal_bf16(set.W.as<bf16>(), size_t(s.N) * s.K, derive_seed(seed, 100 + i), 1.0f / std::sqrt(float(s.K)),
                       stream);
      SCORER_CUDA(cudaStreamSynchronize(stream));
      const submission::DenseWeights w{set.W.as<bf16>()};
      set.base = reference::make_dense_baseline(dims_, w);
      set.ref = reference::make_dense_reference(dims_, w);
    }
    SCORER_CUDA(cudaDeviceSynchronize());
  }

  void new_inputs(int set, uint64_t seed) override {
    fill_normal_bf16(X_.as<bf16>(), size_t(s_.M) * s_.K, seed, 1.0f, stream_);
    sets_v_[set].ref->run(X_.as<bf16>(), ref_dev_.as<float>(), stream_);
    ref_ = take_reference(ref_dev_, stream_);
  }
  void prepare_candidate() override {
    for (Set& set : sets_v_) {
      const submission::DenseWeights w{set.W.as<bf16>()};
      set.cand = cand_.dense ? cand_.dense(dims_, w) : submission::dev::make_dense(dims_, w, cand_.variant);
    }
    SCORER_CUDA(cudaDeviceSynchronize());
  }
  void run_candidate(int set) override { sets_v_[set].cand->run(io(), stream_); }
  void run_baseline(int set) override { sets_v_[set].base->run(io(), stream_); }
  void poison_outputs() override { out_.poison(stream_); }
  CheckResult check(int) override { return check_bf16_output(out_, ref_, stream_); }
  CheckResult check_baseline(int) override { return check_bf16_output(out_, ref_, stream_, baseline_tolerance()); }
  double bytes() const override { return min_bytes(s_); }
  double flops() const override { return op_flops(s_); }

 private:
  submission::DenseIO io() const { return {X_.as<bf16>(), out_.as<bf16>()}; }
  struct Set {
    DeviceBuffer W;
    std::unique_ptr<submission::Dense> cand, base;
    std::unique_ptr<reference::DenseReference> ref;
  };
  Shape s_;
  submission::DenseDims dims_;
  Candidate cand_;
  std::vector<Set> sets_v_;
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
