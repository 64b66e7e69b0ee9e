#include "check.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <vector>

#include "reference/bf16_host.h"

namespace scorer {
namespace {

std::string where(size_t i, double got, double want) {
  std::ostringstream s;
  s << "element " << i << ": got " << got << ", expected " << want;
  return s.str();
}

// rel L2, per-element bound and non-finite count over float-valued outputs.
template <class Get>
CheckResult check_values(Get got, const double* ref, size_t n, double rel_l2_tol, double elem_rel, double elem_rms,
                         const char* what) {
  CheckResult r;
  double ref2 = 0;
  for (size_t i = 0; i < n; ++i) ref2 += ref[i] * ref[i];
  const double rms = n ? std::sqrt(ref2 / n) : 0;
  double err2 = 0;
  for (size_t i = 0; i < n; ++i) {
    const double g = got(i);
    if (!std::isfinite(g)) {
      if (r.nonfinite++ == 0 && r.ok) {
        r.ok = false;
        r.reason = std::string(what) + " not finite at " + where(i, g, ref[i]);
      }
      continue;
    }
    const double e = std::fabs(g - ref[i]);
    err2 += e * e;
    r.max_abs_err = std::max(r.max_abs_err, e);
    const double allowed = elem_rel * std::fabs(ref[i]) + elem_rms * rms;
    const double ratio = allowed > 0 ? e / allowed : (e > 0 ? INFINITY : 0);
    r.worst_elem = std::max(r.worst_elem, ratio);
    if (ratio > 1) {
      if (r.bad_elements++ == 0 && r.ok) {
        r.ok = false;
        r.reason = std::string(what) + " off at " + where(i, g, ref[i]);
      }
    }
  }
  r.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);
  if (r.nonfinite) r.rel_l2 = INFINITY;
  if (r.ok && !(r.rel_l2 <= rel_l2_tol)) {
    r.ok = false;
    std::ostringstream s;
    s << what << " relative L2 error " << r.rel_l2 << " > " << rel_l2_tol;
    r.reason = s.str();
  }
  return r;
}

}  // namespace

CheckResult check_bf16(const uint16_t* out, const double* ref, size_t n, const Bf16Tolerance& tol) {
  return check_values([&](size_t i) { return double(ref::bf16_to_float(out[i])); }, ref, n, tol.rel_l2, tol.elem_rel,
                      tol.elem_rms, "output");
}

CheckResult check_router(int T, int E, int k, const float* logits, const int32_t* ids, const float* weights,
                         const double* ref_logits, const double* ref_weights, const RouterTolerance& tol) {
  CheckResult r = check_values([&](size_t i) { return double(logits[i]); }, ref_logits, size_t(T) * E,
                               tol.logits_rel_l2, 0.0, 0.0, "logits");
  // The per-element logit bound is per token row, so redo that part row by row.
  r.ok = r.nonfinite == 0 && r.rel_l2 <= tol.logits_rel_l2;
  if (r.ok) r.reason.clear();
  r.worst_elem = 0;
  r.bad_elements = 0;
  std::vector<int> order(E);
  std::vector<char> seen(E);
  auto fail = [&](const std::string& why) {
    if (r.ok) {
      r.ok = false;
      r.reason = why;
    }
  };
  for (int t = 0; t < T; ++t) {
    const double* rl = ref_logits + size_t(t) * E;
    double s2 = 0;
    for (int e = 0; e < E; ++e) s2 += rl[e] * rl[e];
    const double rms = std::sqrt(s2 / E);
    for (int e = 0; e < E; ++e) {
      const double g = logits[size_t(t) * E + e];
      if (!std::isfinite(g)) continue;  // counted above
      const double ratio = std::fabs(g - rl[e]) / (tol.logits_elem_rms * rms);
      r.worst_elem = std::max(r.worst_elem, ratio);
      if (ratio > 1 && r.bad_elements++ == 0)
        fail("logits off at token " + std::to_string(t) + " expert " + std::to_string(e));
    }
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return rl[a] > rl[b]; });
    std::fill(seen.begin(), seen.end(), 0);
    for (int j = 0; j < k; ++j) {
      const int id = ids[size_t(t) * k + j];
      const std::string at = "token " + std::to_string(t) + " position " + std::to_string(j);
      if (id < 0 || id >= E) {
        fail("topk_ids out of range at " + at + ": " + std::to_string(id));
        continue;
      }
      if (seen[id]++) fail("topk_ids repeats expert " + std::to_string(id) + " at " + at);
      if (std::fabs(rl[id] - rl[order[j]]) > tol.tie_rms * rms)
        fail("topk_ids differ at " + at + ": got expert " + std::to_string(id) + ", expected " +
             std::to_string(order[j]) + " (not a tie)");
      const double w = weights[size_t(t) * k + j];
      if (!std::isfinite(w)) {
        ++r.nonfinite;
        fail("topk_weights not finite at " + at);
      } else if (std::fabs(w - ref_weights[size_t(t) * k + j]) > tol.weight_abs) {
        fail("topk_weights off at " + at + ": got " + std::to_string(w) + ", expected " +
             std::to_string(ref_weights[size_t(t) * k + j]));
      }
    }
  }
  return r;
}

}  // namespace scorer
