// Deliberately imprecise kernels, built only into the GPU test binary: dense
// and pooler kernels that quantize their weights in prepare() (to read fewer
// bytes, as a submission might) and compute with the dequantized weights in
// fp32. The scorer's bf16 criteria (scorer/check.h) must fail every one of
// them on every public shape; with Scheme::none they use the exact weights,
// the control that must pass.
#pragma once

#include <memory>

#include "submission/submission.h"
#include "tests/bad_kernels/quantize.h"

namespace bad_kernels {

std::unique_ptr<submission::Dense> make_quantized_dense(const submission::DenseDims& dims,
                                                        const submission::DenseWeights& w, quant::Scheme scheme);
std::unique_ptr<submission::Pooler> make_quantized_pooler(const submission::PoolerDims& dims,
                                                          const submission::PoolerWeights& w, quant::Scheme scheme);

}  // namespace bad_kernels
