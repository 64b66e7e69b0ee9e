// dense through cuBLASLt, the baseline's own path (see dense_cublaslt.cu).
#pragma once

#include <memory>

#include "submission/submission.h"

namespace submission {
// Throws std::runtime_error if cuBLASLt has no algorithm for the shape.
std::unique_ptr<Dense> make_dense_cublaslt(const DenseDims& dims, const DenseWeights& w);
}  // namespace submission
