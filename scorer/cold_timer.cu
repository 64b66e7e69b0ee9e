#include "scorer/cold_timer.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <vector>

#include "scorer/kernel_trace.h"
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

// Reads n16 16-byte words through L2 (cached there, not in L1), so the lines
// it brings in displace whatever the cache held, dirty lines included; the
// XOR is stored only if it equals a value no buffer is expected to give, so
// the loads cannot be dropped.
__global__ void flush_read_kernel(const uint4* __restrict__ p, size_t n16, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n16; i += size_t(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcg(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x5bd1e995u && sink) *sink = acc;
}

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

ColdTimer::ColdTimer(cudaStream_t stream, FlushMode flush) : stream_(stream), flush_mode_(flush) {
  int dev = 0, l2 = 0;
  SCORER_CUDA(cudaGetDevice(&dev));
  SCORER_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
  SCORER_CUDA(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, dev));
  flush_ = DeviceBuffer(std::max<size_t>(2 * size_t(l2), 64u << 20));
  // Written once, so that a read flush reads defined bytes.
  SCORER_CUDA(cudaMemsetAsync(flush_.as<uint8_t>(), 0, flush_.bytes(), stream_));
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
  if (flush_mode_ == FlushMode::write) {
    SCORER_CUDA(cudaMemsetAsync(flush_.as<uint8_t>(), 0, flush_.bytes(), stream_));
    return;
  }
  flush_read_kernel<<<4 * sms_, 512, 0, stream_>>>(flush_.as<uint4>(), flush_.bytes() / 16, nullptr);
  SCORER_CUDA(cudaGetLastError());
}

void ColdTimer::set_trace(KernelTrace* trace, uint64_t first_tag) {
  trace_ = trace;
  next_tag_ = first_tag;
}

std::vector<CallTags> ColdTimer::take_calls() {
  std::vector<CallTags> out;
  out.swap(calls_);
  return out;
}

double ColdTimer::time_us(const std::function<void()>& call, bool hold_stream) {
  if (before_each_call) before_each_call();
  CallTags tags;
  if (trace_) {
    tags = {next_tag_, next_tag_ + 1, hold_stream};
    next_tag_ += 2;
    trace_->tag(tags.hold);
  }
  // Untags on every way out, so that no later work carries this call's tag
  // (a failure to untag is left to the trace's next use to report).
  struct Untag {
    KernelTrace* t;
    ~Untag() {
      try {
        if (t) t->untag();
      } catch (const std::exception&) {
      }
    }
  };
  {
    Untag u{trace_};
    flush_l2();
    if (hold_stream) {
      flag_host_[0] = 0;
      std::atomic_thread_fence(std::memory_order_seq_cst);
      blocking_kernel<<<1, 1, 0, stream_>>>(flag_dev_);
      SCORER_CUDA(cudaGetLastError());
    } else {
      SCORER_CUDA(cudaStreamSynchronize(stream_));
    }
  }
  if (trace_) calls_.push_back(tags);
  SCORER_CUDA(cudaEventRecord(start_, stream_));
  try {
    if (trace_) trace_->tag(tags.call);
    Untag u{trace_};
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
        "the timed call could not be enqueued behind the stream hold within 2 s, so its time is void; "
        "possible causes: the call waited on the device from the host, or launched a kernel for the first time");
  float ms = 0;
  SCORER_CUDA(cudaEventElapsedTime(&ms, start_, stop_));
  return ms * 1e3;
}

double measure_sm_clock_mhz(cudaStream_t stream, const std::function<void()>& while_running) {
  DeviceBuffer d(sizeof(double));
  clock_kernel<<<1, 1, 0, stream>>>(d.as<double>());
  SCORER_CUDA(cudaGetLastError());
  if (while_running) while_running();
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
  for (int i = 0; i < reps; ++i) t.push_back(timer.time_us([&] { empty_kernel<<<1, 1, 0, timer.stream()>>>(); }));
  return median(t);
}

}  // namespace scorer
