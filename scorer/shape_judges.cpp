#include "scorer/shape_judges.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "scorer/stats.h"

namespace scorer {
namespace {

std::string us(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f us", v);
  return b;
}

std::string pct(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f%%", 100 * v);
  return b;
}

}  // namespace

void judge_timers(ShapeResult& r, double empty_launch_us) {
  std::vector<double> events, span;
  for (const ReplicateResult& p : r.replicates) {
    if (p.candidate_span_us.empty()) continue;
    events.insert(events.end(), p.candidate_us.begin(), p.candidate_us.end());
    span.insert(span.end(), p.candidate_span_us.begin(), p.candidate_span_us.end());
  }
  if (events.empty()) return;
  const double e = median(events), c = median(span);
  if (e > c * 1.1 + empty_launch_us)
    r.flags.push_back("timers disagree: the events' median " + us(e) + " exceeds the CUPTI span's " + us(c) +
                      " by more than an empty launch (" + us(empty_launch_us) + ") plus 10%");
  else if (e < c - kEventResolutionUs)
    r.flags.push_back("timers disagree: the events' median " + us(e) + " is below the CUPTI span's " + us(c) +
                      ": some of the call's work ran outside the events");
}

void judge_baseline(ShapeResult& r, double empty_launch_us) {
  if (r.status != "ok") return;
  std::vector<double> untouched;
  for (const ReplicateResult& p : r.replicates)
    if (!p.untouched_baseline_us.empty()) untouched.push_back(median(p.untouched_baseline_us));
  if (untouched.empty()) return;
  const double u = median(untouched);
  const double paired = median_of_medians(r, &ReplicateResult::baseline_us);
  const auto [lo, hi] = std::minmax_element(untouched.begin(), untouched.end());
  const double spread = (*hi - *lo) / u;
  const double bound = std::max({spread, kMinDisturbance, empty_launch_us / u});
  const double slower = paired / u - 1;
  if (!(slower > bound)) return;
  r.status = "baseline disturbed";
  r.reason = "the paired baseline's median " + us(paired) + " is " + pct(slower) +
             " slower than the untouched baseline's " + us(u) +
             " (timed in the same processes before any submission code ran); the bound is " + pct(bound) +
             " (the largest of the untouched medians' spread over " + std::to_string(untouched.size()) +
             " replicates, " + pct(kMinDisturbance) + " and one empty launch, " + us(empty_launch_us) +
             "). Possible causes: work of the submission running beside the baseline, a device setting the "
             "submission changed, the card slowed by the heat or power of the submission's kernels";
}

}  // namespace scorer
