// Correctness checks of one op output against its reference, and every
// tolerance the scorer applies, in one place (the README's table mirrors it).
// Host-only: outputs are copied to the host before they are checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace scorer {

// bf16 outputs (pooler, dense, moe_w4a16):
//   relative L2 error ||out - ref|| / ||ref|| <= rel_l2, and
//   every element |out - ref| <= elem_rel * |ref| + elem_rms * rms(ref).
// NaN or Inf anywhere fails. An element that is missing, stale or from the
// wrong row is off by about rms(ref) and fails.
struct Bf16Tolerance {
  double rel_l2 = 1e-2;
  double elem_rel = 2e-2;
  double elem_rms = 2e-2;
};

// The baseline is checked once before timing, as a guard against a scorer bug,
// for finite values and relative L2 only: a serving stack's numerics are not
// held to the submission's per-element bound (the MoE baseline, with
// bf16-dequantized weights and bf16 intermediates, measured ~0.5% relative L2
// with single elements past 2% of rms(ref)).
inline Bf16Tolerance baseline_tolerance() {
  Bf16Tolerance t;
  t.elem_rel = t.elem_rms = 1e300;
  return t;
}

// router:
//   logits: relative L2 error <= logits_rel_l2 and every element
//     |out - ref| <= logits_elem_rms * rms(ref row);
//   topk_ids: distinct, in range, and at every position j the reference logit
//     of the chosen expert is within tie_rms * rms(ref row) of the reference's
//     j-th largest logit (so ids may differ only among near-ties);
//   topk_weights: |out - ref| <= weight_abs.
struct RouterTolerance {
  double logits_rel_l2 = 1e-4;
  double logits_elem_rms = 1e-3;
  double tie_rms = 1e-4;
  double weight_abs = 1e-4;
};

struct CheckResult {
  bool ok = true;
  std::string reason;         // first failure, empty when ok
  double rel_l2 = 0;          // of the main output
  double max_abs_err = 0;     // of the main output
  double worst_elem = 0;      // max over elements of |err| / allowed (<= 1 passes)
  size_t nonfinite = 0;       // NaN/Inf in the output
  size_t bad_elements = 0;    // elements over their bound
};

CheckResult check_bf16(const uint16_t* out, const double* ref, size_t n,
                       const Bf16Tolerance& tol = {});

CheckResult check_router(int T, int E, int k, const float* logits, const int32_t* ids,
                         const float* weights, const double* ref_logits,
                         const double* ref_weights, const RouterTolerance& tol = {});

}  // namespace scorer
