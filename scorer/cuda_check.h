// CUDA errors inside the scorer become exceptions that carry the error code, so
// a shape's child process can report exactly what went wrong and whether the
// context is still usable.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace scorer {

class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t code, const std::string& what)
      : std::runtime_error(what + ": " + cudaGetErrorName(code) + " (" + cudaGetErrorString(code) + ")"), code(code) {}
  cudaError_t code;
};

inline void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw CudaError(e, what);
}

}  // namespace scorer

#define SCORER_CUDA(call) ::scorer::cuda_check((call), #call)
