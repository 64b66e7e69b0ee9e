// Device memory owned by the scorer: plain buffers, and output buffers with
// guard regions on both sides that catch writes past either end.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "scorer/cuda_check.h"

namespace scorer {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;  // owns one allocation, freed once
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <class T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// An output tensor of `bytes` with kGuardBytes of canary before and after it.
// poison() fills the tensor with 0xff (NaN as bf16/fp32, -1 as int32) so that
// elements the kernel does not write fail the check; guards_intact() says
// whether anything wrote into either guard.
class GuardedOutput {
 public:
  static constexpr size_t kGuardBytes = 4096;
  static constexpr uint8_t kCanary = 0xa5;

  GuardedOutput() = default;
  explicit GuardedOutput(size_t bytes);
  template <class T>
  T* as() const {
    return reinterpret_cast<T*>(buf_.as<uint8_t>() + kGuardBytes);
  }
  size_t bytes() const { return bytes_; }

  void poison(cudaStream_t s) const;
  void download(void* host, cudaStream_t s) const;  // synchronous on s
  bool guards_intact(cudaStream_t s) const;         // synchronous on s

 private:
  DeviceBuffer buf_;
  size_t bytes_ = 0;
};

}  // namespace scorer
