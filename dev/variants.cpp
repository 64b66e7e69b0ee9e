#include "dev/variants.h"

#include <algorithm>
#include <stdexcept>

namespace submission::dev {

namespace {

std::vector<std::string> dev_variants(const std::string& op) {
  if (op == "pooler") return dev_pooler_variants();
  if (op == "dense") return dev_dense_variants();
  if (op == "router") return dev_router_variants();
  if (op == "moe_w4a16") return dev_moe_variants();
  throw std::invalid_argument("unknown op '" + op + "'");
}

bool is_dev(const std::string& op, const std::string& name) {
  const std::vector<std::string> names = dev_variants(op);
  return std::find(names.begin(), names.end(), name) != names.end();
}

}  // namespace

std::vector<std::string> variants(const std::string& op) {
  std::vector<std::string> names = submission::variants(op);
  for (const std::string& n : dev_variants(op)) names.push_back(n);
  return names;
}

bool in_upload(const std::string& op, const std::string& name) {
  const std::vector<std::string> names = submission::variants(op);
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::unique_ptr<Pooler> make_pooler(const PoolerDims& d, const PoolerWeights& w, const std::string& variant) {
  return is_dev("pooler", variant) ? make_dev_pooler(d, w, variant) : submission::make_pooler(d, w, variant);
}
std::unique_ptr<Dense> make_dense(const DenseDims& d, const DenseWeights& w, const std::string& variant) {
  return is_dev("dense", variant) ? make_dev_dense(d, w, variant) : submission::make_dense(d, w, variant);
}
std::unique_ptr<Router> make_router(const RouterDims& d, const RouterWeights& w, const std::string& variant) {
  return is_dev("router", variant) ? make_dev_router(d, w, variant) : submission::make_router(d, w, variant);
}
std::unique_ptr<Moe> make_moe(const MoeDims& d, const MoeWeights& w, const std::string& variant) {
  return is_dev("moe_w4a16", variant) ? make_dev_moe(d, w, variant) : submission::make_moe(d, w, variant);
}

}  // namespace submission::dev
