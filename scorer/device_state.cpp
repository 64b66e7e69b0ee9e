#include "scorer/device_state.h"

#include <cstdio>

namespace scorer {
namespace {

std::string unreadable(cudaError_t e) {
  cudaGetLastError();  // not sticky: clear it so that it is not blamed on later work
  return std::string("unreadable (") + cudaGetErrorName(e) + ")";
}

std::string limit(cudaLimit which, const char* unit) {
  size_t v = 0;
  const cudaError_t e = cudaDeviceGetLimit(&v, which);
  return e == cudaSuccess ? std::to_string(v) + unit : unreadable(e);
}

std::string cache_config() {
  cudaFuncCache c{};
  const cudaError_t e = cudaDeviceGetCacheConfig(&c);
  if (e != cudaSuccess) return unreadable(e);
  switch (c) {
    case cudaFuncCachePreferNone:
      return "prefer none";
    case cudaFuncCachePreferShared:
      return "prefer shared";
    case cudaFuncCachePreferL1:
      return "prefer L1";
    case cudaFuncCachePreferEqual:
      return "prefer equal";
  }
  return "config " + std::to_string(int(c));
}

// Deprecated by CUDA (bank size is fixed on recent cards), but a submission
// can still call its setter: the scorer still looks.
std::string shared_memory_config() {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  cudaSharedMemConfig c{};
  const cudaError_t e = cudaDeviceGetSharedMemConfig(&c);
#pragma GCC diagnostic pop
  return e == cudaSuccess ? "bank size config " + std::to_string(int(c)) : unreadable(e);
}

std::string access_policy_window(cudaStream_t stream) {
  cudaStreamAttrValue v{};
  const cudaError_t e = cudaStreamGetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &v);
  if (e != cudaSuccess) return unreadable(e);
  const cudaAccessPolicyWindow& w = v.accessPolicyWindow;
  if (w.num_bytes == 0) return "none";
  char b[160];
  std::snprintf(b, sizeof b, "%zu bytes at %p, hit ratio %.3g, hit property %d, miss property %d", w.num_bytes,
                w.base_ptr, double(w.hitRatio), int(w.hitProp), int(w.missProp));
  return b;
}

}  // namespace

DeviceState read_device_state(cudaStream_t stream) {
  DeviceState s;
  int dev = -1;
  cudaError_t e = cudaGetDevice(&dev);
  s.push_back({"current device", e == cudaSuccess ? std::to_string(dev) : unreadable(e)});
  unsigned flags = 0;
  e = cudaGetDeviceFlags(&flags);
  // cudaDeviceLmemResizeToMax is left out: the runtime sets it by itself once
  // a kernel has used local memory (seen on every shape with driver 580 and
  // CUDA 13, the scorer's own kernels included), so it tells nothing of the
  // submission.
  flags &= ~unsigned(cudaDeviceLmemResizeToMax);
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%x", flags);
  s.push_back({"device flags", e == cudaSuccess ? hex : unreadable(e)});
  s.push_back({"cache config", cache_config()});
  s.push_back({"shared-memory config", shared_memory_config()});
  s.push_back({"persisting-L2 limit", limit(cudaLimitPersistingL2CacheSize, " bytes")});
  s.push_back({"access-policy window on the scorer's stream", access_policy_window(stream)});
  s.push_back({"L2 fetch granularity", limit(cudaLimitMaxL2FetchGranularity, " bytes")});
  s.push_back({"stack limit", limit(cudaLimitStackSize, " bytes")});
  s.push_back({"heap limit", limit(cudaLimitMallocHeapSize, " bytes")});
  s.push_back({"printf FIFO limit", limit(cudaLimitPrintfFifoSize, " bytes")});
  s.push_back({"device-runtime sync depth", limit(cudaLimitDevRuntimeSyncDepth, "")});
  s.push_back({"device-runtime pending launches", limit(cudaLimitDevRuntimePendingLaunchCount, "")});
  return s;
}

std::string device_state_change(const DeviceState& before, const DeviceState& after, const std::string& when) {
  std::string out;
  for (size_t i = 0; i < before.size() || i < after.size(); ++i) {
    const std::string name = i < before.size() ? before[i].name : after[i].name;
    const std::string was = i < before.size() ? before[i].value : "(not read)";
    const std::string now = i < after.size() && after[i].name == name ? after[i].value : "(not read)";
    if (was == now) continue;
    out += (out.empty() ? "" : "; ") + name + ": " + was + " before prepare, " + now + " " + when;
  }
  return out;
}

}  // namespace scorer
