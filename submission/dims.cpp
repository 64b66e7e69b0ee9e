#include <string>

#include "submission/submission.h"

namespace submission {

namespace {

std::string got(int v) { return " (got " + std::to_string(v) + ")"; }

DimsError at_least(const char* field, int v, int least) {
  if (v >= least) return {};
  return {field, "must be at least " + std::to_string(least) + got(v)};
}

DimsError multiple(const char* field, int v, int m, const char* op) {
  if (v % m == 0) return {};
  return {field, "must be a multiple of " + std::to_string(m) + " for op " + op + got(v)};
}

DimsError at_most(const char* field, int v, const char* bound_name, int bound) {
  if (v <= bound) return {};
  return {field, std::string("must be at most ") + bound_name + " (got " + field + "=" + std::to_string(v) + ", " +
                     bound_name + "=" + std::to_string(bound) + ")"};
}

// The first of the checks that fails, or none.
template <class... Checks>
DimsError first(const Checks&... checks) {
  DimsError e;
  ((e.field.empty() ? (void)(e = checks) : (void)0), ...);
  return e;
}

}  // namespace

DimsError dims_error(const PoolerDims& d) {
  return first(at_least("B", d.B, 1), multiple("H", d.H, 8, "pooler"), at_least("H", d.H, 8));
}

DimsError dims_error(const DenseDims& d) {
  return first(at_least("M", d.M, 1), at_least("N", d.N, 1), multiple("K", d.K, 8, "dense"), at_least("K", d.K, 8));
}

DimsError dims_error(const RouterDims& d) {
  return first(at_least("T", d.T, 1), multiple("H", d.H, 8, "router"), at_least("H", d.H, 8), at_least("E", d.E, 1),
               at_least("k", d.k, 1), at_most("k", d.k, "E", d.E));
}

DimsError dims_error(const MoeDims& d) {
  DimsError e = first(at_least("M", d.M, 1), multiple("H", d.H, kMoeGroupSize, "moe_w4a16"),
                      at_least("H", d.H, kMoeGroupSize), multiple("I", d.I, kMoeGroupSize, "moe_w4a16"),
                      at_least("I", d.I, kMoeGroupSize), at_least("k", d.k, 1), at_least("E_global", d.E_global, 1),
                      at_most("k", d.k, "E_global", d.E_global), at_least("E_local", d.E_local, 1));
  if (!e.field.empty()) return e;
  if (d.E_global % d.E_local != 0)
    return {"E_local", "must divide E_global (got E_local=" + std::to_string(d.E_local) +
                           ", E_global=" + std::to_string(d.E_global) + ")"};
  if (d.ep_rank < 0 || d.ep_rank >= d.E_global / d.E_local)
    return {"ep_rank", "must be below E_global/E_local = " + std::to_string(d.E_global / d.E_local) + got(d.ep_rank)};
  return {};
}

}  // namespace submission
