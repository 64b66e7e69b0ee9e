// What the per-op cases do alike: on each weight set, the baseline and the
// reference made as the set is drawn, the candidate only in
// prepare_candidate(), and each run on the case's current inputs and outputs.
// A case draws its weights and inputs and checks its outputs itself.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "scorer/cuda_check.h"
#include "scorer/device_buffers.h"
#include "scorer/op_case.h"
#include "scorer/workload.h"

namespace scorer {

// Case: the op's case, whose io() gives the buffers the implementations run on
// (its current inputs and its outputs), called without a virtual call on the
// timed path. Op: the submission's interface (submission::Dense, ...); Ref:
// the reference's (reference::DenseReference, ...); Dims and Weights: the
// op's arguments to make it.
template <class Case, class Op, class Ref, class Dims, class Weights>
class WeightSetsCase : public OpCase {
 public:
  void prepare_candidate() override {
    for (Set& set : sets_v_) set.cand = make_candidate_(dims_, set.weights);
    SCORER_CUDA(cudaDeviceSynchronize());
  }
  void run_candidate(int set) override { sets_v_[set].cand->run(self().io(), stream_); }
  void run_baseline(int set) override { sets_v_[set].base->run(self().io(), stream_); }
  double bytes() const override { return min_bytes(s_); }
  double flops() const override { return op_flops(s_); }

 protected:
  // The submission's make_<op> (dev/variants.h) for a variant's name.
  using MakeVariant = std::unique_ptr<Op> (*)(const Dims&, const Weights&, const std::string& variant);

  // `substitute`, where the scorer's tests give one, makes the candidate;
  // else `make_variant` the named variant.
  WeightSetsCase(const Shape& s, int sets, cudaStream_t stream, const Dims& dims,
                 const Maker<Op, Dims, Weights>& substitute, MakeVariant make_variant, const std::string& variant)
      : OpCase(sets, stream), s_(s), dims_(dims), make_candidate_(substitute) {
    if (!make_candidate_)
      make_candidate_ = [make_variant, variant](const Dims& d, const Weights& w) {
        return make_variant(d, w, variant);
      };
  }

  // One weight set: the buffers the case drew it into, the weights' view of
  // them, and its implementations (declared after the buffers, so destroyed
  // before them).
  struct Set {
    std::vector<DeviceBuffer> buffers;
    Weights weights;
    std::unique_ptr<Op> cand, base;
    std::unique_ptr<Ref> ref;
  };
  // Keeps a drawn set; the case then makes its baseline and reference.
  template <class... Buffers>
  Set& add_set(const Weights& w, Buffers&&... buffers) {
    Set& set = sets_v_.emplace_back();
    (set.buffers.push_back(std::forward<Buffers>(buffers)), ...);
    set.weights = w;
    return set;
  }
  Shape s_;
  Dims dims_;
  std::vector<Set> sets_v_;

 private:
  const Case& self() const { return static_cast<const Case&>(*this); }
  Maker<Op, Dims, Weights> make_candidate_;
};

}  // namespace scorer
