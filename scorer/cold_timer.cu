#include "scorer/cold_timer.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <vector>

#include "scorer/stats.h"

namespace scorer {
namespace {

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// How long the stream may be held. Enqueueing a call takes microseconds; a
// hold that runs out means the host could not enqueue it behind a running
// kernel (a host-side wait in the call, or a kernel's first launch, which
// loads its module only once the device is idle), and its time is void.
constexpr uint64_t kHoldLimitNs = 2000000000ull;

// Spins until the host sets flag[0], or the hold limit passes (so a host that
// never releases the stream cannot hang the GPU); then flag[1] says which.
__global__ void blocking_kernel(volatile int* flag) {
  const uint64_t t0 = globaltimer_ns();
  bool released;
  while (!(released = flag[0] != 0) && globaltimer_ns() - t0 < kHoldLimitNs) {
  }
  flag[1] = released ? 0 : 1;
}

__global__ void empty_kernel() {}

__global__ void clock_kernel(double* mhz) {
  const uint64_t t0 = globaltimer_ns();
  const long long c0 = clock64();
  uint64_t t1;
  do t1 = globaltimer_ns();
  while (t1 - t0 < 2000000);
  const long long c1 = clock64();
  *mhz = double(c1 - c0) / double(t1 - t0) * 1e3;
}

}  // namespace

ColdTimer::ColdTimer(cudaStream_t stream) : stream_(stream) {
  int dev = 0, l2 = 0;
  SCORER_CUDA(cudaGetDevice(&dev));
  SCORER_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  flush_ = DeviceBuffer(std::max<size_t>(2 * size_t(l2), 64u << 20));
  int* h = nullptr;
  SCORER_CUDA(cudaHostAlloc(&h, 2 * sizeof(int), cudaHostAllocMapped));
  flag_host_ = h;
  flag_host_[0] = 1;
  flag_host_[1] = 0;
  SCORER_CUDA(cudaHostGetDevicePointer(&flag_dev_, h, 0));
  SCORER_CUDA(cudaEventCreate(&start_));
  SCORER_CUDA(cudaEventCreate(&stop_));
}

ColdTimer::~ColdTimer() {
  cudaEventDestroy(start_);
  cudaEventDestroy(stop_);
  cudaFreeHost(const_cast<int*>(flag_host_));
}

void ColdTimer::flush_l2() {
  SCORER_CUDA(cudaMemsetAsync(flush_.as<uint8_t>(), 0, flush_.bytes(), stream_));
}

double ColdTimer::time_us(const std::function<void()>& call, bool hold_stream) {
  flush_l2();
  if (hold_stream) {
    flag_host_[0] = 0;
    std::atomic_thread_fence(std::memory_order_seq_cst);
    blocking_kernel<<<1, 1, 0, stream_>>>(flag_dev_);
    SCORER_CUDA(cudaGetLastError());
  } else {
    SCORER_CUDA(cudaStreamSynchronize(stream_));
  }
  SCORER_CUDA(cudaEventRecord(start_, stream_));
  try {
    call();
  } catch (...) {
    flag_host_[0] = 1;
    throw;
  }
  SCORER_CUDA(cudaEventRecord(stop_, stream_));
  std::atomic_thread_fence(std::memory_order_seq_cst);
  flag_host_[0] = 1;
  SCORER_CUDA(cudaEventSynchronize(stop_));
  SCORER_CUDA(cudaGetLastError());
  if (hold_stream && flag_host_[1] != 0)
    throw std::runtime_error(
        "the timed call could not be enqueued behind the stream hold (it waited on the device from the host, "
        "or launched a kernel for the first time): its time is void");
  float ms = 0;
  SCORER_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
  return ms * 1e3;
}

double measure_sm_clock_mhz(cudaStream_t stream) {
  DeviceBuffer d(sizeof(double));
  clock_kernel<<<1, 1, 0, stream>>>(d.as<double>());
  SCORER_CUDA(cudaGetLastError());
  double mhz = 0;
  SCORER_CUDA(cudaMemcpyAsync(&mhz, d.as<double>(), sizeof mhz, cudaMemcpyDeviceToHost, stream));
  SCORER_CUDA(cudaStreamSynchronize(stream));
  return mhz;
}

double measure_empty_launch_us(ColdTimer& timer, int reps) {
  // Once untimed: a first launch cannot be enqueued behind the hold.
  empty_kernel<<<1, 1, 0, timer.stream()>>>();
  SCORER_CUDA(cudaStreamSynchronize(timer.stream()));
  std::vector<double> t;
  for (int i = 0; i < reps; ++i)
    t.push_back(timer.time_us([&] { empty_kernel<<<1, 1, 0, timer.stream()>>>(); }));
  return median(t);
}

}  // namespace scorer
