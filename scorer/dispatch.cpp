#include "scorer/dispatch.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "scorer/shape_judges.h"
#include "scorer/workload.h"

namespace scorer {
namespace {

// The floor model's rates and a replicate's typical make-up (the defaults of
// StoppingRule end most replicates after a few dozen paired trials).
constexpr double kModelBytesPerS = 3e12, kModelFlopsPerS = 700e12;
constexpr double kLaunchS = 5e-6, kTrialOverheadS = 30e-6, kChildStartS = 0.8;
constexpr int kTypicalTrials = 60;

}  // namespace

void run_in_parallel(size_t n, const std::function<void(size_t)>& fn) {
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t i = 0; i < n; ++i) threads.emplace_back(fn, i);
  for (std::thread& t : threads) t.join();
}

double estimated_seconds(const Shape& s, uint64_t run_seed) {
  const std::vector<Routing> pool =
      s.op == Op::moe_w4a16 ? routing_pool(s, shape_seed(run_seed, s)) : std::vector<Routing>{};
  const double call = std::max(pool_min_bytes(s, pool) / kModelBytesPerS, pool_flops(s, pool) / kModelFlopsPerS);
  // Each trial times a baseline call and a candidate call.
  return kChildStartS + kTypicalTrials * 2 * (call + kLaunchS + kTrialOverheadS);
}

void longest_first(std::vector<WorkItem>& work, const std::vector<double>& seconds) {
  std::stable_sort(work.begin(), work.end(), [&](const WorkItem& a, const WorkItem& b) {
    if (a.replicate != b.replicate) return a.replicate < b.replicate;
    return seconds.at(a.shape) > seconds.at(b.shape);
  });
}

void trim_after_failure(std::vector<ShapeResult>& items) {
  std::stable_sort(items.begin(), items.end(), [](const ShapeResult& a, const ShapeResult& b) {
    return a.replicates.at(0).index < b.replicates.at(0).index;
  });
  for (size_t i = 0; i < items.size(); ++i)
    if (items[i].status != "ok") {
      items.resize(i + 1);
      break;
    }
}

std::vector<std::vector<ShapeResult>> score_on_lanes(size_t shapes, const std::vector<WorkItem>& work, size_t lanes,
                                                     const ScoreOnLane& score, const std::function<bool()>& stopped) {
  std::vector<std::vector<ShapeResult>> items(shapes);
  std::vector<bool> failed(shapes, false);
  std::mutex m;  // guards next, items, failed, halt
  size_t next = 0;
  bool halt = false;
  auto take = [&](size_t* k) {
    std::lock_guard<std::mutex> lock(m);
    while (!halt && next < work.size() && failed.at(work[next].shape)) ++next;  // failed: not scored again
    if (halt || next >= work.size()) return false;
    *k = next++;
    return true;
  };
  auto lane_loop = [&](size_t lane) {
    for (size_t k; take(&k);) {
      ShapeResult r = score(work[k], k, lane);
      std::lock_guard<std::mutex> lock(m);
      if (stopped()) {
        halt = true;
        return;
      }
      if (r.status != "ok") failed[work[k].shape] = true;
      items[work[k].shape].push_back(std::move(r));
    }
  };
  if (lanes <= 1)
    lane_loop(0);  // one GPU: no thread, the items in list order
  else
    run_in_parallel(lanes, lane_loop);
  for (std::vector<ShapeResult>& it : items) trim_after_failure(it);
  return items;
}

void assemble_run(RunResult& run, const std::vector<Shape>& shapes, const std::vector<std::vector<ShapeResult>>& items,
                  int replicates, bool timed) {
  run.shapes.clear();
  for (size_t i = 0; i < shapes.size(); ++i)
    if (!items.at(i).empty()) run.shapes.push_back(assemble_shape(shapes[i], items[i], replicates));
  if (!timed) return;
  for (ShapeResult& r : run.shapes) {
    double empty_launch_us = run.meta.gpus.empty() ? run.meta.empty_launch_us : 0;
    for (const ReplicateResult& p : r.replicates)
      if (p.gpu >= 0 && size_t(p.gpu) < run.meta.gpus.size())
        empty_launch_us = std::max(empty_launch_us, run.meta.gpus[size_t(p.gpu)].empty_launch_us);
    judge_timers(r, empty_launch_us);
    judge_baseline(r, empty_launch_us);
  }
}

}  // namespace scorer
