// A passing run of three shapes (two regimes) with fresh random trials around
// a speedup: what the results-file tests write, read and select.
#pragma once

#include <cmath>
#include <random>
#include <string>

#include "scorer/results.h"
#include "scorer/stats.h"

namespace test_util {

inline scorer::RunResult sample_run(double speedup, const std::string& started_at = "2025-01-02T03:04:05Z",
                                    const std::string& commit = "1a2b3c4d5e6f") {
  static std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<double> n(0, 0.03);
  scorer::RunResult run;
  run.meta.gpu_name = "NVIDIA H200";
  run.meta.started_at = started_at;
  run.meta.git_commit = commit;
  run.meta.mode = "events";
  for (const char* name : {"dense_a", "dense_b", "moe_c"}) {
    scorer::ShapeResult r;
    r.shape.name = name;
    r.shape.regime = name[0] == 'd' ? "dense" : "moe";
    r.shape.M = 32, r.shape.N = 64, r.shape.K = 128;  // dims a results file accepts
    scorer::ReplicateResult& rep = r.replicates.emplace_back();
    rep.index = 1;
    for (int i = 0; i < 15; ++i) {
      rep.baseline_us.push_back(30 * std::exp(n(rng)));
      rep.candidate_us.push_back(30 / speedup * std::exp(n(rng)));
    }
    run.shapes.push_back(r);
  }
  scorer::BootstrapOptions bo;
  bo.seed = run.meta.seed;  // the seed a reader recomputes with
  scorer::compute_statistics(run, bo);
  return run;
}

}  // namespace test_util
