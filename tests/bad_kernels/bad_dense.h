// Deliberately bad dense kernels, built only into the GPU test binary, to
// prove that the scorer catches each way a submission can go wrong. Each is a
// plain correct GEMM (one thread per output) plus one misbehaviour.
#pragma once

#include <memory>
#include <string>

#include "submission/submission.h"

namespace bad_kernels {

enum class Misbehaviour {
  none,             // correct: the control
  illegal_address,  // writes far outside any allocation
  trap,             // __trap()
  hang,             // never finishes
  own_stream,       // computes on a stream of its own, outside the timing
  cached_result,    // computes once, then replays that result on new inputs
  partial_write,    // leaves the last output element unwritten
  write_past_end,   // writes one element past the end of its output
  device_sync,      // synchronises the device inside run()
};

bool parse_misbehaviour(const std::string& name, Misbehaviour* m);

std::unique_ptr<submission::Dense> make_bad_dense(const submission::DenseDims& dims, const submission::DenseWeights& w,
                                                  Misbehaviour m);

}  // namespace bad_kernels
