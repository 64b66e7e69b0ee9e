// Recorded baselines: per-shape times of some other system, measured elsewhere
// and kept in a TOML file (baselines/*.toml), so that a run can also be
// compared with what that system costs on the same GPU model:
//
//   source = "one line of provenance"       (required)
//   gpu = "NVIDIA H200"                     (required)
//   [us]                                    (required) eager time per shape name, µs
//   dense_m32_qkv = 23.0
//   [graph_us]                              (optional) the same call replayed in a CUDA graph
//   dense_m32_qkv = 23.3
//
// Every time is a number > 0; unknown fields are errors (so a typo does not
// silently drop a table). Shapes missing from a table simply have no recorded
// time; a name that is no shape of the run's shapes file is warned about (a
// typo, or a file written for other shapes). The times apply only to a run on
// the GPU named. Compiled by g++ only: toml++ does not compile under nvcc.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "results.h"
#include "shapes.h"

namespace scorer {

struct Recorded {
  std::string path, source, gpu;
  int gpu_line = 1;
  std::map<std::string, double> us, graph_us;  // shape name -> µs
  std::map<std::string, int> lines;            // "us.NAME" or "graph_us.NAME" -> its line
};

// Throws InputError ("file:line: field 'us.dense_m32_qkv': ...") on the first problem.
Recorded load_recorded(const std::string& path);
// The same on a string, for tests; `path` is only used in messages.
Recorded parse_recorded(const std::string& text, const std::string& path);

// Sets every shape's recorded_us from `us`, or from `graph_us` when the run's
// primary times are graph replays (meta.mode == "graph"); 0 for a shape the
// file does not list. Sets recorded_source. compute_statistics() then derives
// the recorded speedups.
void apply_recorded(RunResult& run, const Recorded& rec);

// One warning line ("file:line: field 'us.NAME': ...") per time whose name is
// no shape of `shapes`.
std::vector<std::string> recorded_unknown_names(const Recorded& rec, const ShapesFile& shapes);

// Throws InputError at the file's gpu field unless it names `gpu_name`, the
// GPU the run measured.
void check_recorded_gpu(const Recorded& rec, const std::string& gpu_name);

}  // namespace scorer
