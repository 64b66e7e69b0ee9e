#include "scorer/device_buffers.h"

#include <algorithm>
#include <utility>

namespace scorer {

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  SCORER_CUDA(cudaMalloc(&ptr_, std::max<size_t>(bytes, 16)));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept
    : ptr_(std::exchange(o.ptr_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = std::exchange(o.ptr_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
  }
  return *this;
}

GuardedOutput::GuardedOutput(size_t bytes) : buf_(bytes + 2 * kGuardBytes), bytes_(bytes) {
  SCORER_CUDA(cudaMemset(buf_.as<uint8_t>(), kCanary, bytes + 2 * kGuardBytes));
}

void GuardedOutput::poison(cudaStream_t s) const { SCORER_CUDA(cudaMemsetAsync(as<uint8_t>(), 0xff, bytes_, s)); }

void GuardedOutput::download(void* host, cudaStream_t s) const {
  SCORER_CUDA(cudaMemcpyAsync(host, as<uint8_t>(), bytes_, cudaMemcpyDeviceToHost, s));
  SCORER_CUDA(cudaStreamSynchronize(s));
}

bool GuardedOutput::guards_intact(cudaStream_t s) const {
  std::vector<uint8_t> g(2 * kGuardBytes);
  const uint8_t* base = buf_.as<uint8_t>();
  SCORER_CUDA(cudaMemcpyAsync(g.data(), base, kGuardBytes, cudaMemcpyDeviceToHost, s));
  SCORER_CUDA(
      cudaMemcpyAsync(g.data() + kGuardBytes, base + kGuardBytes + bytes_, kGuardBytes, cudaMemcpyDeviceToHost, s));
  SCORER_CUDA(cudaStreamSynchronize(s));
  return std::all_of(g.begin(), g.end(), [](uint8_t b) { return b == kCanary; });
}

}  // namespace scorer
