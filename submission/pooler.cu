// pooler: out[B, H] = tanh(hidden[cu_seqlens[b+1] - 1] . W^T + bias) on the small-M engine
// (small_m_engine.cuh). The gather is the engine's row lookup, read on the device; bias and tanh
// are its epilogue: one launch. Variants: default (the direct kernel, small_m_direct.cuh) and
// simt (the CUDA-core fallback); dev/ holds the others.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "submission/small_m_engine.cuh"
#include "submission/small_m_rows.cuh"
#include "submission/variants.h"

namespace submission {

namespace detail {
std::vector<std::string> pooler_variants() { return {"default", "simt"}; }
}  // namespace detail

std::unique_ptr<Pooler> make_pooler(const PoolerDims& dims, const PoolerWeights& w, const std::string& variant) {
  using small_m::Path;
  if (variant != "default" && variant != "simt")
    throw std::invalid_argument("unknown pooler variant '" + variant + "'");
  const DimsError e = dims_error(dims);
  if (!e.field.empty()) throw std::invalid_argument("pooler: field " + e.field + ": " + e.why);
  return std::make_unique<small_m::PoolerOn<small_m::Engine>>(dims, w, variant == "simt" ? Path::simt : Path::direct);
}

}  // namespace submission
