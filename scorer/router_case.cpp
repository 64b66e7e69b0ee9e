// router: fp32 logits, softmax, top-k ids and renormalised weights. Wg ~ N(0, 1/H)
// so logits are O(1). The reference top-k and weights are derived on the host
// in double precision from the reference's fp32 logits.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "dev/variants.h"
#include "reference/reference.h"
#include "scorer/device_buffers.h"
#include "scorer/op_case.h"
#include "scorer/random_fill.h"

namespace scorer {
namespace {

using submission::bf16;

class RouterCase final : public OpCase {
 public:
  RouterCase(const Shape& s, int sets, uint64_t seed, const Candidate& cand, cudaStream_t stream)
      : OpCase(sets, stream),
        s_(s),
        dims_{s.T, s.H, s.E, s.k},
        cand_(cand),
        X_(size_t(s.T) * s.H * 2),
        ref_dev_(size_t(s.T) * s.E * 4),
        logits_(size_t(s.T) * s.E * 4),
        ids_(size_t(s.T) * s.k * 4),
        weights_(size_t(s.T) * s.k * 4) {
    for (int i = 0; i < sets; ++i) {
      Set& set = sets_v_.emplace_back();
      set.Wg = DeviceBuffer(size_t(s.E) * s.H * 2);
      fill_normal_bf16(set.Wg.as<bf16>(), size_t(s.E) * s.H, derive_seed(seed, 100 + i), 1.0f / std::sqrt(float(s.H)),
                       stream);
      SCORER_CUDA(cudaStreamSynchronize(stream));
      const submission::RouterWeights w{set.Wg.as<bf16>()};
      set.base = reference::make_router_baseline(dims_, w);
      set.ref = reference::make_router_reference(dims_, w);
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
  void prepare_candidate() override {
    for (Set& set : sets_v_) {
      const submission::RouterWeights w{set.Wg.as<bf16>()};
      set.cand = cand_.router ? cand_.router(dims_, w) : submission::dev::make_router(dims_, w, cand_.variant);
    }
    SCORER_CUDA(cudaDeviceSynchronize());
  }
  void run_candidate(int set) override { sets_v_[set].cand->run(io(), stream_); }
  void run_baseline(int set) override { sets_v_[set].base->run(io(), stream_); }
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
  double bytes() const override { return min_bytes(s_); }
  double flops() const override { return op_flops(s_); }

 private:
  submission::RouterIO io() const {
    return {X_.as<bf16>(), logits_.as<float>(), ids_.as<int32_t>(), weights_.as<float>()};
  }
  struct Set {
    DeviceBuffer Wg;
    std::unique_ptr<submission::Router> cand, base;
    std::unique_ptr<reference::RouterReference> ref;
  };
  Shape s_;
  submission::RouterDims dims_;
  Candidate cand_;
  std::vector<Set> sets_v_;
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
