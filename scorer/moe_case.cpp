// moe_w4a16: int4 weights with bf16 group scales; X and the routing redrawn for
// every check, graph probe and trial, the routing from the shape's pool of
// seeded draws of its declared distribution (scorer/workload.h), never the
// previous call's, so a kernel that keeps an earlier routing fails. Codes are
// uniform 0..15 and scales U(0.75, 1.25)/sqrt(21.25 K), so each dequantized
// row has unit norm over K and the outputs are O(1).
#include <cmath>
#include <utility>
#include <vector>

#include "dev/variants.h"
#include "reference/baselines.h"
#include "reference/reference.h"
#include "scorer/device_buffers.h"
#include "scorer/random_fill.h"
#include "scorer/weight_sets_case.h"

namespace scorer {
namespace {

using submission::bf16;

bool synchronizes(const std::string& baseline) {
  const reference::BaselineInfo* b = reference::find_baseline("moe_w4a16", baseline);
  if (!b) throw std::invalid_argument("moe_w4a16 has no baseline '" + baseline + "'");
  return b->synchronizes;
}

class MoeCase final : public WeightSetsCase<MoeCase, submission::Moe, reference::MoeReference, submission::MoeDims,
                                            submission::MoeWeights> {
 public:
  MoeCase(const Shape& s, int sets, uint64_t seed, const Candidate& cand, cudaStream_t stream,
          const std::string& baseline)
      : WeightSetsCase(s, sets, stream, {s.M, s.H, s.I, s.E_global, s.E_local, s.k, s.ep_rank}, cand.moe,
                       submission::dev::make_moe, cand.variant),
        baseline_synchronizes_(synchronizes(baseline)),
        pool_(routing_pool(s, seed)),
        X_(size_t(s.M) * s.H * 2),
        ids_(size_t(s.M) * s.k * 4),
        wts_(size_t(s.M) * s.k * 4),
        ref_dev_(size_t(s.M) * s.H * 4),
        out_(size_t(s.M) * s.H * 2) {
    const size_t E = s.E_local, H = s.H, I = s.I;
    for (int i = 0; i < sets; ++i) {
      DeviceBuffer W13(E * 2 * I * H / 2), S13(E * 2 * I * (H / 128) * 2), W2(E * H * I / 2), S2(E * H * (I / 128) * 2);
      fill_random_bytes(W13.as<uint8_t>(), W13.bytes(), derive_seed(seed, 100 + i), stream);
      fill_random_bytes(W2.as<uint8_t>(), W2.bytes(), derive_seed(seed, 200 + i), stream);
      const float k13 = 1.0f / std::sqrt(21.25f * H), k2 = 1.0f / std::sqrt(21.25f * I);
      fill_uniform_bf16(S13.as<bf16>(), S13.bytes() / 2, derive_seed(seed, 300 + i), 0.75f * k13, 1.25f * k13, stream);
      fill_uniform_bf16(S2.as<bf16>(), S2.bytes() / 2, derive_seed(seed, 400 + i), 0.75f * k2, 1.25f * k2, stream);
      SCORER_CUDA(cudaStreamSynchronize(stream));
      Set& set = add_set({W13.as<uint8_t>(), S13.as<bf16>(), W2.as<uint8_t>(), S2.as<bf16>()}, std::move(W13),
                         std::move(S13), std::move(W2), std::move(S2));
      set.base = reference::make_moe_baseline(dims_, set.weights, baseline);
      set.ref = reference::make_moe_reference(dims_, set.weights);
    }
    SCORER_CUDA(cudaDeviceSynchronize());
  }

  void new_inputs(int set, uint64_t seed) override {
    // Uploaded for every call, also where it repeats an earlier one, so that a
    // kernel that overwrote it cannot make later references agree with it.
    current_ = pick_routing(pool_, seed, current_);
    const Routing& r = pool_[current_];
    SCORER_CUDA(cudaMemcpyAsync(ids_.as<int32_t>(), r.ids.data(), ids_.bytes(), cudaMemcpyHostToDevice, stream_));
    SCORER_CUDA(cudaMemcpyAsync(wts_.as<float>(), r.weights.data(), wts_.bytes(), cudaMemcpyHostToDevice, stream_));
    fill_normal_bf16(X_.as<bf16>(), size_t(s_.M) * s_.H, seed, 1.0f, stream_);
    sets_v_[set].ref->run(X_.as<bf16>(), ids_.as<int32_t>(), wts_.as<float>(), ref_dev_.as<float>(), stream_);
    ref_ = take_reference(ref_dev_, stream_);
  }
  void poison_outputs() override { out_.poison(stream_); }
  CheckResult check(int) override { return check_bf16_output(out_, ref_, stream_, moe_tolerance()); }
  CheckResult check_baseline(int) override { return check_bf16_output(out_, ref_, stream_, baseline_tolerance()); }
  double bytes() const override { return pool_min_bytes(s_, pool_); }
  double flops() const override { return pool_flops(s_, pool_); }
  bool baseline_synchronizes() const override { return baseline_synchronizes_; }

  submission::MoeIO io() const { return {X_.as<bf16>(), ids_.as<int32_t>(), wts_.as<float>(), out_.as<bf16>()}; }

 private:
  bool baseline_synchronizes_;
  std::vector<Routing> pool_;
  int current_ = -1;  // the pool entry of the current inputs
  DeviceBuffer X_, ids_, wts_, ref_dev_;
  GuardedOutput out_;
  std::vector<double> ref_;
};

}  // namespace

std::unique_ptr<OpCase> make_moe_case(const Shape& s, int sets, uint64_t seed, const Candidate& cand,
                                      cudaStream_t stream, const std::string& baseline) {
  return std::make_unique<MoeCase>(s, sets, seed, cand, stream, baseline);
}

}  // namespace scorer
