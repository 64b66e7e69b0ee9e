#include "scorer/gpu_clocks.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdio>
#include <mutex>

namespace scorer {
namespace {

// NVML's C interface as far as it is used here (its header is not part of the
// CUDA Toolkit): every call returns 0 on success, a device is an opaque handle,
// and clock type 1 is the SM clock, 2 the memory clock.
using NvmlDevice = struct NvmlDeviceOpaque*;
using NvmlInit = int (*)();
using NvmlHandleByPci = int (*)(const char*, NvmlDevice*);
using NvmlClockInfo = int (*)(NvmlDevice, int, unsigned*);
using NvmlReasons = int (*)(NvmlDevice, unsigned long long*);
using NvmlErrorString = const char* (*)(int);
constexpr int kClockSm = 1, kClockMem = 2;

// The reason bits, in bit order.
const char* const kReasonNames[] = {"gpu_idle",
                                    "applications_clocks_setting",
                                    "sw_power_cap",
                                    "hw_slowdown",
                                    "sync_boost",
                                    "sw_thermal_slowdown",
                                    "hw_thermal_slowdown",
                                    "hw_power_brake_slowdown",
                                    "display_clock_setting"};
// sw_power_cap, hw_slowdown, sw_thermal_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown.
constexpr uint64_t kThrottling = 0x4 | 0x8 | 0x20 | 0x40 | 0x80;

struct Nvml {
  bool ok = false;
  std::string why;
  NvmlHandleByPci handle_by_pci = nullptr;
  NvmlClockInfo clock_info = nullptr;
  NvmlReasons reasons = nullptr;
  NvmlErrorString error_string = nullptr;

  std::string error(const char* what, int code) const {
    return std::string(what) + ": " + (error_string ? error_string(code) : "error " + std::to_string(code));
  }
};

// Loaded and initialised once per process; never unloaded (NVML keeps
// threads of its own).
const Nvml& nvml() {
  static Nvml n;
  static std::once_flag once;
  std::call_once(once, [] {
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char* e = dlerror();
      n.why = std::string("cannot load libnvidia-ml.so.1 (") + (e ? e : "no reason given") + ")";
      return;
    }
    auto sym = [&](const char* name) { return dlsym(lib, name); };
    auto init = reinterpret_cast<NvmlInit>(sym("nvmlInit_v2"));
    n.handle_by_pci = reinterpret_cast<NvmlHandleByPci>(sym("nvmlDeviceGetHandleByPciBusId_v2"));
    n.clock_info = reinterpret_cast<NvmlClockInfo>(sym("nvmlDeviceGetClockInfo"));
    // The newer name first; drivers before 535 have only the older one.
    n.reasons = reinterpret_cast<NvmlReasons>(sym("nvmlDeviceGetCurrentClocksEventReasons"));
    if (!n.reasons) n.reasons = reinterpret_cast<NvmlReasons>(sym("nvmlDeviceGetCurrentClocksThrottleReasons"));
    n.error_string = reinterpret_cast<NvmlErrorString>(sym("nvmlErrorString"));
    if (!init || !n.handle_by_pci || !n.clock_info || !n.reasons) {
      n.why = "libnvidia-ml.so.1 lacks the functions used here";
      return;
    }
    if (const int rc = init(); rc != 0) {
      n.why = n.error("nvmlInit", rc);
      return;
    }
    n.ok = true;
  });
  return n;
}

}  // namespace

GpuClocks read_gpu_clocks(const std::string& pci_bus_id) {
  GpuClocks c;
  const Nvml& n = nvml();
  if (!n.ok) {
    c.why_unavailable = n.why;
    return c;
  }
  if (pci_bus_id.empty()) {
    c.why_unavailable = "the device's PCI bus id is unknown";
    return c;
  }
  NvmlDevice dev = nullptr;
  if (const int rc = n.handle_by_pci(pci_bus_id.c_str(), &dev); rc != 0) {
    c.why_unavailable = n.error("nvmlDeviceGetHandleByPciBusId", rc);
    return c;
  }
  unsigned sm = 0, mem = 0;
  unsigned long long reasons = 0;
  int rc = n.clock_info(dev, kClockSm, &sm);
  if (rc == 0) rc = n.clock_info(dev, kClockMem, &mem);
  if (rc != 0) {
    c.why_unavailable = n.error("nvmlDeviceGetClockInfo", rc);
    return c;
  }
  if (rc = n.reasons(dev, &reasons); rc != 0) {
    c.why_unavailable = n.error("nvmlDeviceGetCurrentClocksEventReasons", rc);
    return c;
  }
  c.available = true;
  c.sm_mhz = sm;
  c.mem_mhz = mem;
  c.reasons = reasons;
  return c;
}

std::string pci_bus_id(int device) {
  char id[32] = {};
  if (cudaDeviceGetPCIBusId(id, sizeof id, device) != cudaSuccess) {
    cudaGetLastError();
    return "";
  }
  return id;
}

uint64_t throttling_reasons(uint64_t mask) { return mask & kThrottling; }

std::string throttle_reason_names(uint64_t mask) {
  if (!mask) return "none";
  std::string out;
  const int known = int(sizeof kReasonNames / sizeof kReasonNames[0]);
  for (int b = 0; b < 64; ++b) {
    if (!(mask >> b & 1)) continue;
    if (!out.empty()) out += ", ";
    if (b < known) {
      out += kReasonNames[b];
    } else {
      char hex[24];
      std::snprintf(hex, sizeof hex, "0x%llx", 1ull << b);
      out += hex;
    }
  }
  return out;
}

}  // namespace scorer
