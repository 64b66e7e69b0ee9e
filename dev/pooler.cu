// The pooler's dev variants (dev/small_m_variants.cuh), on the pooler's rows and epilogue.
#include "dev/small_m_variants.cuh"
#include "dev/variants.h"

namespace submission::dev {

std::vector<std::string> dev_pooler_variants() { return small_m::dev_variant_names(); }

std::unique_ptr<Pooler> make_dev_pooler(const PoolerDims& d, const PoolerWeights& w, const std::string& variant) {
  return small_m::make_dev_variant<small_m::PoolerOn, Pooler>(d, w, variant);
}

}  // namespace submission::dev
