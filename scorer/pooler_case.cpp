// pooler: out[B, H] = tanh(hidden[last token of each sequence] . W^T + bias).
// Each weight set has its own seeded sequence lengths; every new draw of the
// activations shuffles them, so each check gathers different rows while S_total
// (a kernel argument a CUDA graph captures) stays that of the set.
// W ~ N(0, 1/H), bias ~ N(0, 0.1^2): tanh stays off saturation.
#include <algorithm>
#include <cmath>
#include <random>
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

class PoolerCase final : public WeightSetsCase<PoolerCase, submission::Pooler, reference::PoolerReference,
                                               submission::PoolerDims, submission::PoolerWeights> {
 public:
  PoolerCase(const Shape& s, int sets, uint64_t seed, const Candidate& cand, cudaStream_t stream)
      : WeightSetsCase(s, sets, stream, {s.B, s.H}, cand.pooler, submission::dev::make_pooler, cand.variant),
        hidden_(size_t(s.B) * s.max_len * s.H * 2),
        cu_(size_t(s.B + 1) * 4),
        ref_dev_(size_t(s.B) * s.H * 4),
        out_(size_t(s.B) * s.H * 2) {
    for (int i = 0; i < sets; ++i) {
      DeviceBuffer W(size_t(s.H) * s.H * 2), bias(size_t(s.H) * 2);
      fill_normal_bf16(W.as<bf16>(), size_t(s.H) * s.H, derive_seed(seed, 100 + i), 1.0f / std::sqrt(float(s.H)),
                       stream);
      fill_normal_bf16(bias.as<bf16>(), s.H, derive_seed(seed, 200 + i), 0.1f, stream);
      SCORER_CUDA(cudaStreamSynchronize(stream));
      const std::vector<int32_t> cu = draw_cu_seqlens(s, derive_seed(seed, 300 + i));
      std::vector<int32_t>& lengths = lengths_.emplace_back();
      for (int b = 0; b < s.B; ++b) lengths.push_back(cu[b + 1] - cu[b]);
      Set& set = add_set({W.as<bf16>(), bias.as<bf16>()}, std::move(W), std::move(bias));
      set.base = reference::make_pooler_baseline(dims_, set.weights);
      set.ref = reference::make_pooler_reference(dims_, set.weights);
    }
    SCORER_CUDA(cudaDeviceSynchronize());
  }

  void new_inputs(int set, uint64_t seed) override {
    std::vector<int32_t> lengths = lengths_[set];
    std::mt19937_64 rng(derive_seed(seed, 1));
    shuffle(lengths, rng);
    std::vector<int32_t> cu(s_.B + 1, 0);
    for (int b = 0; b < s_.B; ++b) cu[b + 1] = cu[b] + lengths[b];
    S_total_ = cu.back();
    SCORER_CUDA(cudaMemcpyAsync(cu_.as<int32_t>(), cu.data(), cu.size() * 4, cudaMemcpyHostToDevice, stream_));
    fill_normal_bf16(hidden_.as<bf16>(), size_t(S_total_) * s_.H, derive_seed(seed, 2), 1.0f, stream_);
    sets_v_[set].ref->run(hidden_.as<bf16>(), cu_.as<int32_t>(), ref_dev_.as<float>(), stream_);
    ref_ = take_reference(ref_dev_, stream_);
  }
  void poison_outputs() override { out_.poison(stream_); }
  CheckResult check(int) override { return check_bf16_output(out_, ref_, stream_); }
  CheckResult check_baseline(int) override { return check_bf16_output(out_, ref_, stream_, baseline_tolerance()); }
  submission::PoolerIO io() const { return {hidden_.as<bf16>(), cu_.as<int32_t>(), S_total_, out_.as<bf16>()}; }

 private:
  std::vector<std::vector<int32_t>> lengths_;  // each set's B sequences, shuffled for each draw
  DeviceBuffer hidden_, cu_, ref_dev_;
  GuardedOutput out_;
  int S_total_ = 0;
  std::vector<double> ref_;
};

}  // namespace

std::unique_ptr<OpCase> make_pooler_case(const Shape& s, int sets, uint64_t seed, const Candidate& cand,
                                         cudaStream_t stream) {
  return std::make_unique<PoolerCase>(s, sets, seed, cand, stream);
}

}  // namespace scorer
