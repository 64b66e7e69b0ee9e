// dense: out[M, N] = X[M, K] . W[N, K]^T. "default" runs the small-M engine's direct kernel
// (small_m_direct.cuh) where its blocks fit one wave (small_m::direct_tiles_one_wave), where it
// ran 1.10-1.17x of cuBLASLt, and cuBLASLt (dense_cublaslt.cu) everywhere else, where every
// kernel of ours lost (docs/perf-log.md, rounds 51, 57 and 89). "cublaslt" and "simt" (the
// CUDA-core fallback) force one path; dev/ holds the other variants.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "submission/dense_cublaslt.h"
#include "submission/small_m_engine.cuh"
#include "submission/small_m_rows.cuh"
#include "submission/variants.h"

namespace submission {

namespace detail {
std::vector<std::string> dense_variants() { return {"default", "cublaslt", "simt"}; }
}  // namespace detail

std::unique_ptr<Dense> make_dense(const DenseDims& dims, const DenseWeights& w, const std::string& variant) {
  using small_m::Path;
  using Direct = small_m::DenseOn<small_m::Engine>;
  const DimsError e = dims_error(dims);
  if (!e.field.empty()) throw std::invalid_argument("dense: field " + e.field + ": " + e.why);
  if (variant == "default")
    return small_m::direct_tiles_one_wave(dims.M, dims.N, dims.K, device_sm_count())
               ? std::make_unique<Direct>(dims, w, Path::direct)
               : make_dense_cublaslt(dims, w);
  if (variant == "cublaslt") return make_dense_cublaslt(dims, w);
  if (variant == "simt") return std::make_unique<Direct>(dims, w, Path::simt);
  throw std::invalid_argument("unknown dense variant '" + variant + "'");
}

}  // namespace submission
