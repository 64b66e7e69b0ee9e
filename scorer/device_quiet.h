// A bounded wait for the whole device: before a baseline or a floor is timed,
// nothing of the submission's may still run or be queued anywhere on the
// device (issue 40: work left running by a submission landed in the
// baseline's time). cudaDeviceSynchronize has no timeout, so it runs on a
// waiter thread of this object's own, and the caller waits for that thread
// with a bound: a device still busy after it is reported, not waited for.
#pragma once

#include <memory>

namespace scorer {

class DeviceQuiet {
 public:
  // The waiter works on the calling thread's current device.
  DeviceQuiet();
  // Stops the waiter; one still inside cudaDeviceSynchronize is left to the
  // process's exit (it holds no reference to this object).
  ~DeviceQuiet();
  DeviceQuiet(const DeviceQuiet&) = delete;  // owns its waiter thread
  DeviceQuiet& operator=(const DeviceQuiet&) = delete;

  // True when the whole device finished its work within `timeout_us`; false
  // when it is still busy (then every later wait is false at once, the waiter
  // being still inside the earlier one). Throws CudaError when the
  // synchronisation itself reports an error (a crashed kernel).
  bool wait(double timeout_us);

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace scorer
