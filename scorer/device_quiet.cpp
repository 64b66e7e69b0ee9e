#include "scorer/device_quiet.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "scorer/cuda_check.h"

namespace scorer {

// What the caller and the waiter share, kept alive by whichever ends last.
struct DeviceQuiet::Shared {
  std::mutex mutex;
  std::condition_variable cv;
  int device = 0;
  unsigned requested = 0, done = 0;  // requests made and finished
  cudaError_t result = cudaSuccess;  // of the last finished request
  bool stop = false;
};

DeviceQuiet::DeviceQuiet() : shared_(std::make_shared<Shared>()) {
  SCORER_CUDA(cudaGetDevice(&shared_->device));
  std::thread([s = shared_] {
    if (cudaSetDevice(s->device) != cudaSuccess) return;
    std::unique_lock<std::mutex> lock(s->mutex);
    for (;;) {
      s->cv.wait(lock, [&] { return s->stop || s->requested != s->done; });
      if (s->stop) return;
      lock.unlock();
      const cudaError_t e = cudaDeviceSynchronize();
      lock.lock();
      s->result = e;
      ++s->done;
      s->cv.notify_all();
    }
  }).detach();
}

DeviceQuiet::~DeviceQuiet() {
  std::lock_guard<std::mutex> lock(shared_->mutex);
  shared_->stop = true;
  shared_->cv.notify_all();
}

bool DeviceQuiet::wait(double timeout_us) {
  Shared& s = *shared_;
  std::unique_lock<std::mutex> lock(s.mutex);
  if (s.requested != s.done) return false;  // still inside an earlier wait
  const unsigned ticket = ++s.requested;
  s.cv.notify_all();
  const bool finished =
      s.cv.wait_for(lock, std::chrono::duration<double, std::micro>(timeout_us), [&] { return s.done >= ticket; });
  if (!finished) return false;
  if (s.result != cudaSuccess) {
    const cudaError_t e = s.result;
    s.result = cudaSuccess;
    throw CudaError(e, "cudaDeviceSynchronize (waiting for a quiet device)");
  }
  return true;
}

}  // namespace scorer
