// Dense's dev variants (dev/small_m_variants.cuh), on dense's rows and epilogue.
#include "dev/small_m_variants.cuh"
#include "dev/variants.h"

namespace submission::dev {

std::vector<std::string> dev_dense_variants() { return small_m::dev_variant_names(); }

std::unique_ptr<Dense> make_dev_dense(const DenseDims& d, const DenseWeights& w, const std::string& variant) {
  return small_m::make_dev_variant<small_m::DenseOn, Dense>(d, w, variant);
}

}  // namespace submission::dev
