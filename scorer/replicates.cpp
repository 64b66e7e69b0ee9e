#include "scorer/replicates.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "scorer/dispatch.h"
#include "scorer/random_fill.h"
#include "scorer/stats.h"
#include "scorer/workload.h"

namespace scorer {
namespace {

// Tags a later replicate's seed apart from every other use of the shape's seed.
constexpr uint64_t kReplicateTag = 0x7265706c69636174ull;  // "replicat"

// Median of the values above 0 (0 when none is).
double median_positive(const std::vector<ShapeResult>& items, double ReplicateResult::*field) {
  std::vector<double> v;
  for (const ShapeResult& it : items)
    for (const ReplicateResult& p : it.replicates)
      if (p.*field > 0) v.push_back(p.*field);
  return v.empty() ? 0 : median(v);
}

double median_positive(const std::vector<ShapeResult>& items, double ShapeResult::*field) {
  std::vector<double> v;
  for (const ShapeResult& it : items)
    if (it.*field > 0) v.push_back(it.*field);
  return v.empty() ? 0 : median(v);
}

void merge_check(CheckSummary& sum, const CheckSummary& c) {
  sum.checks += c.checks;
  sum.rel_l2 = std::max(sum.rel_l2, c.rel_l2);
  sum.max_abs_err = std::max(sum.max_abs_err, c.max_abs_err);
  sum.worst_elem = std::max(sum.worst_elem, c.worst_elem);
}

}  // namespace

uint64_t replicate_seed(uint64_t run_seed, const Shape& s, int replicate) {
  const uint64_t base = shape_seed(run_seed, s);
  return replicate == 1 ? base : derive_seed(base, kReplicateTag + uint64_t(replicate));
}

std::vector<WorkItem> make_work_list(const std::vector<Shape>& shapes, int replicates, uint64_t run_seed) {
  std::vector<WorkItem> list;
  for (int r = 1; r <= replicates; ++r)
    for (size_t i = 0; i < shapes.size(); ++i) list.push_back({i, r, replicate_seed(run_seed, shapes[i], r), 0});
  return list;
}

ShapeResult assemble_shape(const Shape& s, const std::vector<ShapeResult>& items, int replicates) {
  ShapeResult r;
  r.shape = s;
  r.converged = !items.empty();
  std::map<std::string, std::vector<int>> raised_by;  // flag -> replicates that raised it, in order
  std::vector<std::string> flag_order;
  for (const ShapeResult& it : items) {
    if (r.variant.empty()) r.variant = it.variant;
    for (const ReplicateResult& p : it.replicates) {
      r.replicates.push_back(p);
      merge_check(r.check, p.check);
      if (r.status == "ok" && p.status != "ok") {
        r.status = p.status;
        r.reason = (replicates > 1 ? "replicate " + std::to_string(p.index) + ": " : "") + p.reason;
      }
      if (p.status == "ok") r.converged = r.converged && p.converged;
      for (const std::string& f : p.flags) {
        auto& by = raised_by[f];
        if (by.empty()) flag_order.push_back(f);
        if (by.empty() || by.back() != p.index) by.push_back(p.index);
      }
    }
  }
  if (r.status != "ok") r.converged = false;
  for (const std::string& f : flag_order) {
    const std::vector<int>& by = raised_by[f];
    if (replicates <= 1 || (int(by.size()) == int(r.replicates.size()) && int(by.size()) == replicates))
      r.flags.push_back(f);
    else
      for (int index : by) r.flags.push_back("replicate " + std::to_string(index) + ": " + f);
  }
  r.bytes = median_positive(items, &ShapeResult::bytes);
  r.flops = median_positive(items, &ShapeResult::flops);
  r.raw_limit_us = median_positive(items, &ShapeResult::raw_limit_us);
  r.floor_us = median_positive(items, &ReplicateResult::floor_us);
  r.floor_read_us = median_positive(items, &ReplicateResult::floor_read_us);
  r.floor_compute_us = median_positive(items, &ReplicateResult::floor_compute_us);
  return r;
}

std::vector<ShapeResult> score_work_list(const std::vector<Shape>& shapes, const std::vector<WorkItem>& work,
                                         int replicates, const ScoreItem& score, const std::function<bool()>& stopped) {
  const auto items = score_on_lanes(
      shapes.size(), work, 1, [&](const WorkItem& w, size_t k, size_t) { return score(w, k); }, stopped);
  std::vector<ShapeResult> out;
  for (size_t i = 0; i < shapes.size(); ++i)
    if (!items[i].empty()) out.push_back(assemble_shape(shapes[i], items[i], replicates));
  return out;
}

}  // namespace scorer
