// How the submission reports a CUDA error: an exception naming the failed
// call, so that a failing prepare() or launch is reported for its shape.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace submission {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

}  // namespace submission

#define SUBMISSION_CUDA(call) ::submission::check_cuda((call), #call)
