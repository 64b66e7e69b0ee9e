#include "dev/variants.h"

#include <stdexcept>

namespace submission::dev {
std::vector<std::string> dev_moe_variants() { return {}; }
std::unique_ptr<Moe> make_dev_moe(const MoeDims&, const MoeWeights&, const std::string& variant) {
  throw std::invalid_argument("moe: unknown variant '" + variant + "'");
}
}  // namespace submission::dev
