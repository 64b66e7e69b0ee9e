// The GPU's clocks and why they are held down, read from NVML (the driver's
// libnvidia-ml.so.1, loaded at run time: the scorer builds and runs without
// it, and then says why the clocks are unknown).
//
// A replicate reads them at its start and end; a shape whose SM clock moved,
// or that was throttled by power or heat, is flagged, since its times were
// taken on a slower card than its neighbours'.
#pragma once

#include <cstdint>
#include <string>

namespace scorer {

struct GpuClocks {
  bool available = false;
  std::string why_unavailable;  // when !available: which step failed and NVML's words
  double sm_mhz = 0;
  double mem_mhz = 0;
  uint64_t reasons = 0;  // NVML's clock event reasons, a bit mask (names: throttle_reason_names)
};

// Clocks of the device whose PCI bus id is `pci_bus_id` (as
// cudaDeviceGetPCIBusId writes it). Never throws.
GpuClocks read_gpu_clocks(const std::string& pci_bus_id);

// The PCI bus id of CUDA device `device` ("" when CUDA cannot say).
std::string pci_bus_id(int device);

// The reasons in `mask` that slow the card down by power or heat (not the
// idle state, an application clock setting or the display).
uint64_t throttling_reasons(uint64_t mask);

// "sw_power_cap, hw_thermal_slowdown" for the bits of `mask`, "none" for 0;
// unknown bits as "0x...".
std::string throttle_reason_names(uint64_t mask);

}  // namespace scorer
