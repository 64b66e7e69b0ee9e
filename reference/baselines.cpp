#include "reference/baselines.h"

#include <stdexcept>

#include "reference/reference.h"

namespace reference {

const std::vector<BaselineInfo>& baselines(const std::string& op) {
  static const std::vector<BaselineInfo> pooler = {{"cublas", false}};
  static const std::vector<BaselineInfo> dense = {{"cublaslt", false}};
  static const std::vector<BaselineInfo> router = {{"cublas", false}};
  static const std::vector<BaselineInfo> moe = {{"cublas_batched", false}, {"cublas_grouped_sync", true}};
  if (op == "pooler") return pooler;
  if (op == "dense") return dense;
  if (op == "router") return router;
  if (op == "moe_w4a16") return moe;
  throw std::invalid_argument("no op '" + op + "' (pooler, dense, router, moe_w4a16)");
}

const BaselineInfo* find_baseline(const std::string& op, const std::string& name) {
  const std::vector<BaselineInfo>& all = baselines(op);
  if (name == "default") return &all.front();
  for (const BaselineInfo& b : all)
    if (name == b.name) return &b;
  return nullptr;
}

std::unique_ptr<submission::Moe> make_moe_baseline(const submission::MoeDims& d, const submission::MoeWeights& w,
                                                   const std::string& name) {
  const BaselineInfo* b = find_baseline("moe_w4a16", name);
  if (!b) throw std::invalid_argument("moe_w4a16: no baseline '" + name + "'");
  if (std::string(b->name) == "cublas_grouped_sync") return make_moe_grouped_sync_baseline(d, w);
  return make_moe_batched_baseline(d, w);
}

}  // namespace reference
