// The device-wide settings a submission could change to tilt the field (issue
// 40: a persisting-L2 carve-out made in prepare slowed the baseline by up to
// 38%): the persisting-L2 limit, the access-policy window on the scorer's
// stream, the cache and shared-memory configuration, the stack, heap and other
// limits, the current device and its flags. Read before prepare and compared
// after prepare and after the last trial; a change fails the shape as
// `changed device state`, naming the setting.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace scorer {

struct DeviceSetting {
  std::string name;   // e.g. "persisting-L2 limit"
  std::string value;  // as printed, e.g. "0 bytes"; "unreadable (cudaError...)" when CUDA would not say
};

// Every setting, always in the same order.
using DeviceState = std::vector<DeviceSetting>;

// Reads the settings of the current device and of `stream`. Never throws: a
// setting CUDA cannot read is recorded as unreadable, with CUDA's error.
DeviceState read_device_state(cudaStream_t stream);

// "" when `after` equals `before`; else one clause per changed setting,
// "persisting-L2 limit: 0 bytes before prepare, 31457280 bytes <when>", joined by "; ".
std::string device_state_change(const DeviceState& before, const DeviceState& after, const std::string& when);

}  // namespace scorer
