// Device memory owned by an op, and the device facts its plans read. Shared
// by every op of the submission (host code only).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "submission/cuda_check.h"

namespace submission {

// A cudaMalloc'd block freed with its owner, also when a constructor throws
// half-way. Default-constructed it owns nothing and as<T>() is null.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(size_t bytes) { SUBMISSION_CUDA(cudaMalloc(&p_, bytes ? bytes : 1)); }
  DeviceMemory(DeviceMemory&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() { cudaFree(p_); }
  template <class T>  // T: the element type the memory holds
  T* as() const {
    return static_cast<T*>(p_);
  }

 private:
  void* p_ = nullptr;
};

// SMs of the current device.
inline int device_sm_count() {
  int dev = 0, sms = 0;
  SUBMISSION_CUDA(cudaGetDevice(&dev));
  SUBMISSION_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  return sms;
}

}  // namespace submission
