// The GPUs a run scores on (`scorer run --gpus`): which ones, their start-up
// measurements, and the header that lists them. Every CUDA call happens in a
// child process (the parent never initialises CUDA, which keeps fork() safe);
// a lane's children see its GPU alone, through CUDA_VISIBLE_DEVICES.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>  // includers that build a json value include the full header
#include <ostream>
#include <string>
#include <vector>

#include "scorer/results.h"

namespace scorer {

// What --gpus asked for: every GPU, the first N, or a list of ordinals.
struct GpuChoice {
  bool given = false;  // false: the default, GPU 0 as the process finds it, no CUDA_VISIBLE_DEVICES set
  bool all = false;
  int count = 0;          // "N": the first N
  std::vector<int> list;  // "0,2,5": these ordinals
};

// Parses "all", "N" or "I,J,...". Throws std::invalid_argument with the
// reason (the caller names the option).
GpuChoice parse_gpu_choice(const std::string& v);

// The ordinals chosen among `available` GPUs, in order; "" in *error unless
// the choice asks for GPUs that are not there.
std::vector<int> chosen_devices(const GpuChoice& c, int available, std::string* error);

// One GPU a run scores on: what it is, its start-up measurements as the
// shapes' processes on it are given them (floors, raw limits, launch cost),
// and the CUDA_VISIBLE_DEVICES its children get ("" for the default run).
struct GpuLane {
  GpuInfo info;
  RunMeta meta;
  std::string visible;
};

// Runs `work` in a child that must return a JSON document; a child that
// failed reports {"error": "..."}, which comes back as null with *failure
// set. `visible`, when not empty, is the child's CUDA_VISIBLE_DEVICES.
nlohmann::json gpu_child(const std::function<nlohmann::json()>& work, double timeout_s, std::string* failure,
                         const std::string& visible = "");

// The lanes of a run: for the default choice GPU 0 as the process finds it,
// else every chosen GPU; each calibrated (calibrate()) in a child of its
// own, the GPUs at once. `base` is the run's meta, copied into each lane's.
// With `probe_trace`, each child first checks that CUPTI starts; where it
// does not, *trace_unavailable says why. Returns no lanes, with *failure
// set, when no usable GPU answered; *bad_choice is set instead when the
// choice names GPUs that are not there.
std::vector<GpuLane> start_lanes(const GpuChoice& choice, const RunMeta& base, bool probe_trace,
                                 std::string* trace_unavailable, std::string* failure, std::string* bad_choice);

// Each lane's SM and memory clocks now, read in its child, at once. A lane
// whose child failed keeps its fields; the lanes' RunMeta get the end clocks.
void read_end_clocks(std::vector<GpuLane>& lanes);

// The GPUs whose copy bandwidth or empty-launch cost differs by more than
// `tolerance` from the median over all GPUs (from the other one's, of two):
// one line each, "GPU 3 (host, device 3, GPU-...): copy bandwidth 3890 GB/s
// is 4.1% below the GPUs' median 4056 GB/s". None with a single GPU.
constexpr double kGpuTolerance = 0.03;
std::vector<std::string> gpu_outliers(const std::vector<GpuInfo>& gpus, double tolerance = kGpuTolerance);

// "SM 1980 MHz, memory 3201 MHz, clock event reasons: none", or the SM clock
// alone with why NVML could not say more.
std::string clocks_line(double sm, double mem, uint64_t reasons, const std::string& nvml);

// The run's header on stderr: one line per GPU (name, uuid, clocks, copy
// bandwidth, matrix rate, empty launch), then the outliers flagged.
void print_gpu_header(std::ostream& err, const std::vector<GpuLane>& lanes);

// This host's name ("" when it cannot say).
std::string host_name();

}  // namespace scorer
