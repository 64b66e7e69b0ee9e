// One shape on the GPU: its weight sets, its current activations, its outputs
// (guarded), and the three implementations of its op (the submission's
// candidate, the baseline, the reference), behind one interface so that the
// runner checks and times every op the same way.
//
// Weight sets are drawn once; baseline and reference are prepared with them,
// the candidate only when prepare_candidate() is called, so that the baseline
// can be timed before any submission code has run (prepare is untimed). Activations
// are redrawn in place for every check and every timed trial, and the
// reference is recomputed for them, so a kernel that returns an earlier result
// instead of computing on its inputs fails.
#pragma once

#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "scorer/check.h"
#include "scorer/shapes.h"
#include "scorer/workload.h"
#include "submission/submission.h"

namespace scorer {

class OpCase {
 public:
  virtual ~OpCase() = default;

  int sets() const { return sets_; }

  // Draws new activations for weight set `set` from `seed` and computes their
  // reference (untimed; synchronises the stream).
  virtual void new_inputs(int set, uint64_t seed) = 0;
  // The submission's prepare (its constructor) on every weight set; once.
  virtual void prepare_candidate() = 0;
  virtual void run_candidate(int set) = 0;  // only after prepare_candidate()
  virtual void run_baseline(int set) = 0;
  virtual void poison_outputs() = 0;
  // Downloads the outputs and checks them against the reference of the set's
  // current inputs; also fails when a guard region around an output changed.
  virtual CheckResult check(int set) = 0;
  // The same for the baseline's outputs, with the baseline's tolerance.
  virtual CheckResult check_baseline(int set) { return check(set); }

  virtual double bytes() const = 0;
  virtual double flops() const = 0;
  // The baseline synchronises inside run(): time it without holding the stream
  // and never capture it in a graph.
  virtual bool baseline_synchronizes() const { return false; }

 protected:
  OpCase(int sets, cudaStream_t stream) : sets_(sets), stream_(stream) {}
  int sets_;
  cudaStream_t stream_;
};

// The candidate is the submission's make_<op>(variant), unless the scorer's
// own tests substitute a deliberately bad kernel (dense, pooler, router, moe).
// Op: the submission's interface (submission::Dense, ...); Dims and Weights: its arguments.
template <class Op, class Dims, class Weights>
using Maker = std::function<std::unique_ptr<Op>(const Dims&, const Weights&)>;
using DenseMaker = Maker<submission::Dense, submission::DenseDims, submission::DenseWeights>;
using PoolerMaker = Maker<submission::Pooler, submission::PoolerDims, submission::PoolerWeights>;
using RouterMaker = Maker<submission::Router, submission::RouterDims, submission::RouterWeights>;
using MoeMaker = Maker<submission::Moe, submission::MoeDims, submission::MoeWeights>;
struct Candidate {
  std::string variant = "default";
  DenseMaker dense;  // each empty: the submission's
  PoolerMaker pooler;
  RouterMaker router;
  MoeMaker moe;
};

// Draws `sets` weight sets from `seed` and prepares baseline (`baseline`: its
// name in reference/baselines.h) and reference on each; the candidate waits
// for prepare_candidate().
std::unique_ptr<OpCase> make_op_case(const Shape& s, int sets, uint64_t seed, const Candidate& cand,
                                     cudaStream_t stream, const std::string& baseline = "default");

// Per-op constructors behind make_op_case.
std::unique_ptr<OpCase> make_pooler_case(const Shape&, int, uint64_t, const Candidate&, cudaStream_t);
std::unique_ptr<OpCase> make_dense_case(const Shape&, int, uint64_t, const Candidate&, cudaStream_t);
std::unique_ptr<OpCase> make_router_case(const Shape&, int, uint64_t, const Candidate&, cudaStream_t);
std::unique_ptr<OpCase> make_moe_case(const Shape&, int, uint64_t, const Candidate&, cudaStream_t,
                                      const std::string& baseline);

// Shared by the op cases.
class DeviceBuffer;
class GuardedOutput;
// Adds a failed guard check to `r`.
void require_guards(CheckResult& r, bool intact, const char* output_name);
// Downloads an fp32 reference, then wipes its device copy so that no kernel
// can find it in device memory while the candidate runs.
std::vector<double> take_reference(const DeviceBuffer& ref_dev, cudaStream_t stream);
// Checks a bf16 output against its reference, guards included.
CheckResult check_bf16_output(const GuardedOutput& out, const std::vector<double>& ref, cudaStream_t stream,
                              const Bf16Tolerance& tol = {});

}  // namespace scorer
