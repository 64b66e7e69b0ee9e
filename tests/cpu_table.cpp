// The run table: rows, what the intervals cover, regimes, the aggregate by
// its rule with the other rule's value below, and the graph and recorded
// lines.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "scorer/stats.h"
#include "scorer/table.h"

using scorer::RunResult;
using scorer::ShapeResult;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

std::string interval_text(const scorer::Interval& i) {
  char b[96];
  std::snprintf(b, sizeof b, "%.4fx  95%% [%.4f, %.4f]", i.point, i.lo, i.hi);
  return b;
}

}  // namespace

TEST_CASE("print_table: rows, what the intervals cover, regimes and the aggregate lines") {
  RunResult run;
  // n trials per replicate, each replicate's ratios a little off the others'.
  auto add = [&](const std::string& name, const std::string& regime, double ratio, int n, int replicates) {
    ShapeResult r;
    r.shape.name = name;
    r.shape.regime = regime;
    for (int k = 1; k <= replicates; ++k) {
      scorer::ReplicateResult& p = r.replicates.emplace_back();
      p.index = k;
      for (int i = 0; i < n; ++i) {
        p.candidate_us.push_back(10.0 + 0.01 * i);
        p.baseline_us.push_back(p.candidate_us.back() * ratio * (1 + 0.003 * k) * (1 + 0.002 * ((i * 7) % 5 - 2)));
      }
    }
    r.floor_us = 5;
    r.converged = true;
    run.shapes.push_back(r);
  };
  add("dense_m32_qkv", "dense-32", 1.2, 30, 3);
  add("dense_m32_o", "dense-32", 1.1, 30, 3);
  add("pooler_b8", "pooler-8", 0.9, 30, 3);
  add("moe_m1", "moe", 1.0, 0, 1);
  run.shapes[1].flags = {"clock drift"};
  run.shapes[2].converged = false;
  run.shapes[3].status = "incorrect";
  run.shapes[3].reason = "output off at element 17: got 3, expected 2";
  scorer::compute_statistics(run, {});

  std::ostringstream os;
  scorer::print_table(os, run);
  const std::vector<std::string> lines = lines_of(os.str());
  REQUIRE(lines.size() >= 10);

  const std::string& head = lines[0];
  CHECK(head.rfind("shape", 0) == 0);
  for (const char* col :
       {"regime", "correct", "baseline µs", "submission µs", "% of floor", "speedup [95% interval]", "note"})
    CHECK_MESSAGE(head.find(col) != std::string::npos, col);
  // Each row's regime starts in the regime column.
  const size_t regime_col = head.find("regime");
  CHECK(lines[1].compare(regime_col, 9, "dense-32 ") == 0);
  CHECK(lines[4].compare(regime_col, 4, "moe ") == 0);
  char speedup[64];
  std::snprintf(speedup, sizeof speedup, "%.4fx [%.4f, %.4f]", run.shapes[0].speedup, run.shapes[0].ci_lo,
                run.shapes[0].ci_hi);
  CHECK(lines[1].find(speedup) != std::string::npos);
  CHECK(lines[1].find("yes") != std::string::npos);
  char median[32];
  std::snprintf(median, sizeof median, "  %.2f  ", run.shapes[0].candidate_median_us);
  CHECK(lines[1].find(median) != std::string::npos);
  CHECK(lines[2].find("clock drift") != std::string::npos);
  CHECK(lines[3].find("not converged") != std::string::npos);
  CHECK(lines[4].find("NO") != std::string::npos);
  CHECK(lines[4].find("output off at element 17") != std::string::npos);
  // One line says what the intervals cover.
  CHECK(lines[5].rfind("95% intervals from 3 replicates per shape", 0) == 0);

  const scorer::RegimeResult& dense = run.regimes[0];
  CHECK(std::find(lines.begin(), lines.end(), "regime dense-32  " + interval_text(dense.speedup) + "  2 shapes") !=
        lines.end());
  CHECK(std::find(lines.begin(), lines.end(), "regime moe       -  0 shapes, 1 failed") != lines.end());
  // A failed shape voids the aggregate (the default scoring rule).
  CHECK_FALSE(run.aggregate_defined);
  CHECK(lines.back() == "no aggregate: 1 shape failed  correctness FAILED, 1 shape failed");

  // Without it: the aggregate by the rule, and the other rule's value below.
  run.shapes.pop_back();
  scorer::compute_statistics(run, {});
  std::ostringstream again;
  scorer::print_table(again, run);
  const std::vector<std::string> after = lines_of(again.str());
  REQUIRE(after.size() >= 2);
  CHECK(after[after.size() - 2] ==
        "aggregate " + interval_text(run.aggregate) + "  over shapes  correctness passed, 1 flag");
  CHECK(after.back() == "  over regimes instead: " + interval_text(run.other_aggregate));
  // Over regimes: the geometric mean of the two regimes' figures.
  CHECK(run.other_aggregate.point ==
        doctest::Approx(std::sqrt(run.regimes[0].speedup.point * run.regimes[1].speedup.point)));
  CHECK(again.str().find("(graph)") == std::string::npos);
  CHECK(again.str().find("vs recorded") == std::string::npos);
}

TEST_CASE("print_table: one replicate says its intervals cover that run's noise only") {
  RunResult run;
  ShapeResult r;
  r.shape.name = "s";
  r.shape.regime = "g";
  scorer::ReplicateResult& p = r.replicates.emplace_back();
  p.index = 1;
  p.baseline_us = {20, 21, 22};
  p.candidate_us = {10, 10, 10};
  p.graph_baseline_us = {6, 6};
  p.graph_candidate_us = {4, 4};
  r.recorded_us = 25;
  r.converged = true;
  run.shapes.push_back(r);
  run.recorded_source = "vllm.json";
  scorer::compute_statistics(run, {});
  std::ostringstream os;
  scorer::print_table(os, run);
  const std::string out = os.str();
  CHECK(out.find("95% intervals from one replicate per shape: they cover the noise within this run only") !=
        std::string::npos);
  CHECK(out.find("regime g  (graph)  1.5000x  95% [1.5000, 1.5000]\n") != std::string::npos);
  CHECK(out.find("aggregate (graph) 1.5000x  95% [1.5000, 1.5000]\n") != std::string::npos);
  CHECK(out.find("regime g  vs recorded  2.5000x\n") != std::string::npos);
  CHECK(out.find("aggregate vs recorded 2.5000x  (vllm.json)\n") != std::string::npos);
}
