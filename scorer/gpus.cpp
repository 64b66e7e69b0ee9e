#include "scorer/gpus.h"

#include <cuda_runtime.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "scorer/child_process.h"
#include "scorer/cuda_check.h"
#include "scorer/dispatch.h"
#include "scorer/gpu_clocks.h"
#include "scorer/kernel_trace.h"
#include "scorer/shape_runner.h"
#include "scorer/stats.h"

namespace scorer {
namespace {

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi and CUDA_VISIBLE_DEVICES spell it.
std::string uuid_string(const cudaUUID_t& u) {
  std::string s = "GPU-";
  char b[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) s += '-';
    std::snprintf(b, sizeof b, "%02x", unsigned(static_cast<unsigned char>(u.bytes[i])));
    s += b;
  }
  return s;
}

nlohmann::json gpu_info_json(int device) {
  cudaDeviceProp p{};
  SCORER_CUDA(cudaGetDeviceProperties(&p, device));
  return {{"device", device}, {"uuid", uuid_string(p.uuid)}, {"name", p.name}};
}

nlohmann::json meta_json(const RunMeta& m) {
  return {{"gpu_name", m.gpu_name},
          {"sm_count", m.sm_count},
          {"l2_bytes", m.l2_bytes},
          {"driver_version", m.driver_version},
          {"runtime_version", m.runtime_version},
          {"sm_clock_mhz_start", m.sm_clock_mhz_start},
          {"mem_clock_mhz_start", m.mem_clock_mhz_start},
          {"throttle_reasons", m.throttle_reasons},
          {"nvml", m.nvml},
          {"copy_gbps", m.copy_gbps},
          {"matrix_tflops", m.matrix_tflops},
          {"empty_launch_us", m.empty_launch_us}};
}

void apply_meta(RunMeta& m, const nlohmann::json& j) {
  m.gpu_name = j.at("gpu_name").get<std::string>();
  m.sm_count = j.at("sm_count").get<int>();
  m.l2_bytes = j.at("l2_bytes").get<int>();
  m.driver_version = j.at("driver_version").get<int>();
  m.runtime_version = j.at("runtime_version").get<int>();
  m.sm_clock_mhz_start = j.at("sm_clock_mhz_start").get<double>();
  m.mem_clock_mhz_start = j.at("mem_clock_mhz_start").get<double>();
  m.throttle_reasons = j.at("throttle_reasons").get<uint64_t>();
  m.nvml = j.at("nvml").get<std::string>();
  m.copy_gbps = j.at("copy_gbps").get<double>();
  m.matrix_tflops = j.at("matrix_tflops").get<double>();
  m.empty_launch_us = j.at("empty_launch_us").get<double>();
}

std::string gpu_label(size_t i, const GpuInfo& g) {
  return "GPU " + std::to_string(i) + " (" + (g.host.empty() ? "" : g.host + ", ") + "device " +
         std::to_string(g.device) + (g.uuid.empty() ? "" : ", " + g.uuid) + ")";
}

// `what` of GPU i against the median of every GPU's (one outlier does not
// move it), or against the other one's where there are two.
void outlier(std::vector<std::string>& out, const std::vector<GpuInfo>& gpus, size_t i, double GpuInfo::*field,
             const char* what, const char* unit, double tolerance) {
  std::vector<double> all;
  for (size_t k = 0; k < gpus.size(); ++k)
    if (gpus[k].*field > 0 && (gpus.size() > 2 || k != i)) all.push_back(gpus[k].*field);
  const double v = gpus[i].*field;
  if (gpus.size() < 2 || all.empty() || !(v > 0)) return;
  const double m = median(all), d = v / m - 1;
  if (!(std::fabs(d) > tolerance)) return;
  char b[256];
  std::snprintf(b, sizeof b, "%s: %s %.4g %s is %.1f%% %s %s %.4g %s", gpu_label(i, gpus[i]).c_str(), what, v, unit,
                100 * std::fabs(d), d > 0 ? "above" : "below", gpus.size() > 2 ? "the GPUs' median" : "the other GPU's",
                m, unit);
  out.push_back(b);
}

}  // namespace

GpuChoice parse_gpu_choice(const std::string& v) {
  GpuChoice c;
  c.given = true;
  if (v == "all") {
    c.all = true;
    return c;
  }
  auto ordinal = [&](const std::string& t) {
    if (t.empty() || t.size() > 4 || t.find_first_not_of("0123456789") != std::string::npos)
      throw std::invalid_argument("expected all, a count or a list of device ordinals (0,1,...), got '" + v + "'");
    return std::stoi(t);
  };
  if (v.find(',') == std::string::npos) {
    c.count = ordinal(v);
    if (c.count < 1) throw std::invalid_argument("expected at least one GPU, got '" + v + "'");
    return c;
  }
  std::stringstream ss(v);
  for (std::string t; std::getline(ss, t, ',');) {
    const int d = ordinal(t);
    if (std::find(c.list.begin(), c.list.end(), d) != c.list.end())
      throw std::invalid_argument("device " + t + " given twice in '" + v + "'");
    c.list.push_back(d);
  }
  if (v.back() == ',') ordinal("");
  return c;
}

std::vector<int> chosen_devices(const GpuChoice& c, int available, std::string* error) {
  std::vector<int> out;
  error->clear();
  if (!c.given) return {0};
  if (c.all || c.count > 0) {
    const int n = c.all ? available : c.count;
    if (n > available) {
      *error = std::to_string(n) + " GPUs asked for, " + std::to_string(available) + " found";
      return {};
    }
    for (int d = 0; d < n; ++d) out.push_back(d);
    return out;
  }
  for (int d : c.list) {
    if (d >= available) {
      *error = "device " + std::to_string(d) + " asked for, " + std::to_string(available) + " found (0 to " +
               std::to_string(available - 1) + ")";
      return {};
    }
    out.push_back(d);
  }
  return out;
}

nlohmann::json gpu_child(const std::function<nlohmann::json()>& work, double timeout_s, std::string* failure,
                         const std::string& visible) {
  const ChildOutcome c = run_in_child(
      [&] {
        try {
          // Before the child's first CUDA call: it then sees this GPU alone, as device 0.
          if (!visible.empty()) setenv("CUDA_VISIBLE_DEVICES", visible.c_str(), 1);
          return work().dump();
        } catch (const std::exception& e) {
          return nlohmann::json{{"error", e.what()}}.dump();
        }
      },
      timeout_s);
  if (c.kind != ChildOutcome::ok) {
    *failure = c.detail;
    return nullptr;
  }
  try {
    nlohmann::json j = nlohmann::json::parse(c.output);
    if (j.contains("error")) {
      *failure = j["error"].get<std::string>();
      return nullptr;
    }
    return j;
  } catch (const std::exception& e) {
    *failure = std::string("unreadable result from the child: ") + e.what();
    return nullptr;
  }
}

std::vector<GpuLane> start_lanes(const GpuChoice& choice, const RunMeta& base, bool probe_trace,
                                 std::string* trace_unavailable, std::string* failure, std::string* bad_choice) {
  std::vector<GpuLane> lanes;
  const std::string host = host_name();
  if (!choice.given) {
    lanes.push_back({GpuInfo{}, base, ""});
  } else {
    // Listed in a child: the parent stays without CUDA.
    const nlohmann::json listed = gpu_child(
        [] {
          int n = 0;
          SCORER_CUDA(cudaGetDeviceCount(&n));
          nlohmann::json j = nlohmann::json::array();
          for (int d = 0; d < n; ++d) j.push_back(gpu_info_json(d));
          return nlohmann::json{{"gpus", j}};
        },
        120, failure);
    if (listed.is_null()) return {};
    const nlohmann::json& all = listed["gpus"];
    for (int d : chosen_devices(choice, int(all.size()), bad_choice)) {
      GpuLane lane{GpuInfo{}, base, ""};
      lane.info.device = d;
      lane.info.uuid = all[size_t(d)]["uuid"].get<std::string>();
      lane.visible = lane.info.uuid;
      lanes.push_back(lane);
    }
    if (!bad_choice->empty()) return {};
  }
  std::vector<std::string> failures(lanes.size()), no_trace(lanes.size());
  run_in_parallel(lanes.size(), [&](size_t i) {
    GpuLane& lane = lanes[i];
    const nlohmann::json cal = gpu_child(
        [&] {
          RunMeta m;
          nlohmann::json j;
          // CUPTI first, before the process has done CUDA work: a trace that cannot
          // start here would not start in a shape's process either.
          if (probe_trace) {
            try {
              KernelTrace probe;
            } catch (const TraceUnavailable& e) {
              j["trace_unavailable"] = e.what();
            }
          }
          calibrate(m);
          j.update(meta_json(m));
          j["info"] = gpu_info_json(0);
          return j;
        },
        300, &failures[i], lane.visible);
    if (cal.is_null()) return;
    apply_meta(lane.meta, cal);
    if (cal.contains("trace_unavailable")) no_trace[i] = cal["trace_unavailable"].get<std::string>();
    if (lane.visible.empty()) lane.info.uuid = cal["info"]["uuid"].get<std::string>();
    lane.info.name = lane.meta.gpu_name;
    lane.info.host = host;
    lane.info.sm_clock_mhz = lane.meta.sm_clock_mhz_start;
    lane.info.mem_clock_mhz = lane.meta.mem_clock_mhz_start;
    lane.info.copy_gbps = lane.meta.copy_gbps;
    lane.info.empty_launch_us = lane.meta.empty_launch_us;
    lane.info.matrix_tflops = lane.meta.matrix_tflops;
  });
  for (size_t i = 0; i < lanes.size(); ++i) {
    if (!failures[i].empty()) {
      *failure = lanes.size() == 1 ? failures[i] : gpu_label(i, lanes[i].info) + ": " + failures[i];
      return {};
    }
    if (!no_trace[i].empty()) *trace_unavailable = no_trace[i];
  }
  return lanes;
}

void read_end_clocks(std::vector<GpuLane>& lanes) {
  run_in_parallel(lanes.size(), [&](size_t i) {
    std::string failure;
    const nlohmann::json end = gpu_child(
        [] {
          const ClockReading c = read_clocks_now();
          return nlohmann::json{{"sm", c.sm_mhz}, {"mem", c.mem_mhz}, {"reasons", c.reasons}};
        },
        120, &failure, lanes[i].visible);
    if (end.is_null()) return;
    RunMeta& m = lanes[i].meta;
    m.sm_clock_mhz_end = end["sm"].get<double>();
    m.mem_clock_mhz_end = end["mem"].get<double>();
    m.throttle_reasons |= end["reasons"].get<uint64_t>();
  });
}

std::vector<std::string> gpu_outliers(const std::vector<GpuInfo>& gpus, double tolerance) {
  std::vector<std::string> out;
  for (size_t i = 0; i < gpus.size(); ++i) {
    outlier(out, gpus, i, &GpuInfo::copy_gbps, "copy bandwidth", "GB/s", tolerance);
    outlier(out, gpus, i, &GpuInfo::empty_launch_us, "empty launch", "us", tolerance);
  }
  return out;
}

std::string clocks_line(double sm, double mem, uint64_t reasons, const std::string& nvml) {
  std::string s = "SM " + std::to_string(int(sm + 0.5)) + " MHz";
  if (!nvml.empty()) return s + " (NVML unavailable: " + nvml + ")";
  return s + ", memory " + std::to_string(int(mem + 0.5)) +
         " MHz, clock event reasons: " + throttle_reason_names(reasons);
}

void print_gpu_header(std::ostream& err, const std::vector<GpuLane>& lanes) {
  std::vector<GpuInfo> infos;
  for (size_t i = 0; i < lanes.size(); ++i) {
    const RunMeta& m = lanes[i].meta;
    infos.push_back(lanes[i].info);
    err << "scorer: " << (lanes.size() > 1 ? gpu_label(i, lanes[i].info) + " " : "") << m.gpu_name << ", copy "
        << int(m.copy_gbps) << " GB/s, bf16 " << int(m.matrix_tflops) << " TFLOP/s, empty launch " << m.empty_launch_us
        << " us\nscorer:   clocks "
        << clocks_line(m.sm_clock_mhz_start, m.mem_clock_mhz_start, m.throttle_reasons, m.nvml) << "\n";
  }
  for (const std::string& f : gpu_outliers(infos))
    err << "scorer: WARNING: " << f << " (differs by more than " << int(kGpuTolerance * 100)
        << "%: its replicates are timed on a different card)\n";
}

std::string host_name() {
  char b[256] = {};
  if (gethostname(b, sizeof b - 1) != 0) return "";
  return b;
}

}  // namespace scorer
