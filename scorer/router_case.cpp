// router: fp32 logits, softmax, top-k ids and renormalised weights. Wg ~ N(0, 1/H)
// so logits are O(1). The reference top-k and weights are derived on the host
// in double precision from the reference's fp32 logits.
#include <algorithm>
#include <cmath>
#include <numeric>
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

class RouterCase final : public WeightSetsCase<RouterCase, submission::Router, reference::RouterReference,
                                               submission::RouterDims, submission::RouterWeights> {
 public:
  RouterCase(const Shape& s, int sets, uint64_t seed, const Candidate& cand, cudaStream_t stream)
      : WeightSetsCase(s, sets, stream, {s.T, s.H, s.E, s.k}, cand.router, submission::dev::make_router, cand.variant),
        X_(size_t(s.T) * s.H * 2),
        ref_dev_(size_t(s.T) * s.E * 4),
        logits_(size_t(s.T) * s.E * 4),
        ids_(size_t(s.T) * s.k * 4),
        weights_(size_t(s.T) * s.k * 4) {
    for (int i = 0; i < sets; ++i) {
      DeviceBuffer Wg(size_t(s.E) * s.H * 2);
      fill_normal_bf16(Wg.as<bf16>(), size_t(s.E) * s.H, derive_seed(seed, 100 + i), 1.0f / std::sqrt(float(s.H)),
                       stream);
      SCORER_CUDA(cudaStreamSynchronize(stream));
      Set& set = add_set({Wg.as<bf16>()}, std::move(Wg));
      set.base = reference::make_router_baseline(dims_, set.weights);
      set.ref = reference::make_router_reference(dims_, set.weights);
    }
    SCORER_CUDA(cudaDeviceSynchronize());
  }

  void new_inputs(int set, uint64_t seed) override {
    fill_normal_bf16(X_.as<bf16>(), size_t(s_.T) * s_.H, seed, 1.0f, stream_);
    sets_v_[set].ref->run(X_.as<bf16>(), ref_dev_.as<float>(), stream_);
    ref_logits_ = take_reference(ref_dev_, stream_);
    // top-k weights of the reference: softmax over the k largest (ties to the lower id)
    ref_weights_.assign(size_t(s_.T) * s_.k, 0.0);
    std::vector<int> order(s_.E);
    for (int t = 0; t < s_.T; ++t) {
      const double* row = &ref_logits_[size_t(t) * s_.E];
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return row[a] > row[b]; });
      double sum = 0;
      for (int j = 0; j < s_.k; ++j) sum += std::exp(row[order[j]] - row[order[0]]);
      for (int j = 0; j < s_.k; ++j) ref_weights_[size_t(t) * s_.k + j] = std::exp(row[order[j]] - row[order[0]]) / sum;
    }
  }
  void poison_outputs() override {
    logits_.poison(stream_);
    ids_.poison(stream_);
    weights_.poison(stream_);
  }
  CheckResult check(int) override {
    std::vector<float> l(size_t(s_.T) * s_.E), w(size_t(s_.T) * s_.k);
    std::vector<int32_t> ids(size_t(s_.T) * s_.k);
    logits_.download(l.data(), stream_);
    ids_.download(ids.data(), stream_);
    weights_.download(w.data(), stream_);
    CheckResult r =
        check_router(s_.T, s_.E, s_.k, l.data(), ids.data(), w.data(), ref_logits_.data(), ref_weights_.data());
    require_guards(r, logits_.guards_intact(stream_), "logits");
    require_guards(r, ids_.guards_intact(stream_), "topk_ids");
    require_guards(r, weights_.guards_intact(stream_), "topk_weights");
    return r;
  }
  submission::RouterIO io() const {
    return {X_.as<bf16>(), logits_.as<float>(), ids_.as<int32_t>(), weights_.as<float>()};
  }

 private:
  DeviceBuffer X_, ref_dev_;
  GuardedOutput logits_, ids_, weights_;
  std::vector<double> ref_logits_, ref_weights_;
};

}  // namespace

std::unique_ptr<OpCase> make_router_case(const Shape& s, int sets, uint64_t seed, const Candidate& cand,
                                         cudaStream_t stream) {
  return std::make_unique<RouterCase>(s, sets, seed, cand, stream);
}

}  // namespace scorer
