#include "submission/variants.h"

#include <stdexcept>

namespace submission {

std::vector<std::string> variants(const std::string& op) {
  if (op == "pooler") return detail::pooler_variants();
  if (op == "dense") return detail::dense_variants();
  if (op == "router") return detail::router_variants();
  if (op == "moe_w4a16") return detail::moe_variants();
  throw std::invalid_argument("unknown op '" + op + "'");
}

}  // namespace submission
