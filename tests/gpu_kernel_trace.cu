// The second timer on a real device (scorer/kernel_trace.h): a tagged call's
// kernels are found with their stream and duration, and work launched by
// another thread, untagged, is found as foreign in the call's window. Also
// NVML's clocks (scorer/gpu_clocks.h), where the driver's library loads.
#include <doctest/doctest.h>

#include <memory>
#include <thread>

#include "scorer/gpu_clocks.h"
#include "scorer/kernel_trace.h"
#include "tests/gpu_test_util.h"

namespace {

__global__ void spin_kernel(unsigned long long ns) {
  unsigned long long t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  while (t - t0 < ns);
}

}  // namespace

TEST_CASE("the kernel trace finds a tagged call's kernels and another thread's work") {
  std::unique_ptr<scorer::KernelTrace> trace;
  try {
    trace = std::make_unique<scorer::KernelTrace>();
  } catch (const scorer::TraceUnavailable& e) {
    WARN_MESSAGE(false, "CUPTI unavailable, the second timer is off: " << e.what());
    return;
  }
  cudaStream_t mine = nullptr, theirs = nullptr;
  GT_CUDA(cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking));
  GT_CUDA(cudaStreamCreateWithFlags(&theirs, cudaStreamNonBlocking));
  spin_kernel<<<1, 1, 0, mine>>>(1000);  // loads the module, untagged and before the window
  GT_CUDA(cudaDeviceSynchronize());
  trace->take();

  // Another thread keeps a kernel running over the window, untagged: 50 ms,
  // since a new thread's first launch took ~3 ms to start on the device.
  cudaError_t other_launch = cudaSuccess;
  std::thread other([&] {
    spin_kernel<<<1, 1, 0, theirs>>>(50000000);
    other_launch = cudaGetLastError();
  });
  other.join();
  GT_CUDA(other_launch);
  trace->tag(42);
  spin_kernel<<<1, 1, 0, mine>>>(50000);
  spin_kernel<<<1, 1, 0, mine>>>(50000);
  trace->untag();
  GT_CUDA(cudaDeviceSynchronize());
  const std::vector<scorer::TraceRecord> records = trace->take();

  const scorer::CallTrace call = scorer::trace_of_call(records, 42);
  for (const scorer::TraceRecord& r : records)
    MESSAGE("record: kind " << int(r.kind) << " stream " << r.stream << " tag " << r.tag << " start "
                            << (int64_t(r.start_ns) - int64_t(call.first_start_ns)) << " ns, "
                            << (r.end_ns - r.start_ns) << " ns, " << r.name.substr(0, 40));
  CHECK(call.records == 2);
  CHECK(call.kernel_us > 95);  // two kernels of 50 us each
  CHECK(call.kernel_us < 400);
  CHECK(call.span_us >= call.kernel_us);
  CHECK(scorer::off_stream_records(records, 42, trace->stream_id(mine)).empty());
  const auto foreign = scorer::foreign_records(records, {42}, call.first_start_ns, call.last_end_ns);
  REQUIRE(foreign.size() == 1);
  CHECK(foreign[0].stream == trace->stream_id(theirs));
  CHECK(foreign[0].tag == 0);
  MESSAGE("foreign: " << scorer::describe(foreign[0], call.first_start_ns, call.last_end_ns));
  trace.reset();
  GT_CUDA(cudaStreamDestroy(mine));
  GT_CUDA(cudaStreamDestroy(theirs));
}

TEST_CASE("NVML gives the card's clocks where the driver's library loads") {
  const scorer::GpuClocks c = scorer::read_gpu_clocks(scorer::pci_bus_id(0));
  if (!c.available) {
    WARN_MESSAGE(false, "NVML unavailable: " << c.why_unavailable);
    return;
  }
  CHECK(c.sm_mhz > 100);
  CHECK(c.mem_mhz > 100);
  MESSAGE("SM " << c.sm_mhz << " MHz, memory " << c.mem_mhz << " MHz, reasons "
                << scorer::throttle_reason_names(c.reasons));
}
