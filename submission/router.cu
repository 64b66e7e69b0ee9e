// router: fp32 logits X . Wg^T, softmax, top k (ties to the lower id), renormalised weights.
// "default" is the tagged one-launch router (router_tagged.cu) where the shape fits it
// (router_plan.h: fused_fits) and gemm_then_topk (router_gemm_then_topk.cu) beyond; both are
// also variants of their own. dev/router.cu holds the designs the tagged one replaced.
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "submission/router_plan.h"
#include "submission/variants.h"

namespace submission {

namespace detail {
std::vector<std::string> router_variants() { return {"default", "fused_tagged", "gemm_then_topk"}; }
}  // namespace detail

std::unique_ptr<Router> make_router(const RouterDims& dims, const RouterWeights& w, const std::string& variant) {
  const DimsError e = dims_error(dims);
  if (!e.field.empty()) throw std::invalid_argument("router: field " + e.field + ": " + e.why);
  if (dims.E > 65535 * router::kTileE) throw std::invalid_argument("router: E past the grid limit");
  if (variant == "gemm_then_topk" || (variant == "default" && !router::fused_fits(dims)))
    return router::make_gemm_then_topk_router(dims, w);
  if (variant != "default" && variant != "fused_tagged")
    throw std::invalid_argument("router: unknown variant '" + variant + "'");
  if (!router::fused_fits(dims))
    throw std::invalid_argument("router fused_tagged: needs T <= " + std::to_string(router::kFusedMaxT) + ", E <= " +
                                std::to_string(router::kFusedMaxE) + ", k <= " + std::to_string(router::kFusedMaxK));
  return router::make_tagged_router(dims, w, router::plan_fused(dims, device_sm_count()));
}

}  // namespace submission
