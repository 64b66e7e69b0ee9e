// What `scorer diff` promises, by simulation (tests/sim_timing.h): 26 shapes
// in four regimes as the public set has, 3 replicates per run, AR(1) trials,
// the scorer's stopping rule, and between-replicate offsets (1% on the
// baseline, 0.25% on the submission, as measured on the H200: the kernels'
// times vary little between runs, the baselines' four times more).
// - Two runs of the same true times: every shape, every regime and the
//   aggregate say `same` in at least 95% of pairs, and all of them at once
//   (what a user sees on a rerun) in at least 95% too.
// - The submission 3% faster on every shape: `better` on every shape, regime
//   and the aggregate in at least 90% of pairs.
// Verdicts come from the functions compute_diff uses (diff.h). Seeds are
// fixed, so the test is reproducible.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "scorer/aggregate_rule.h"
#include "scorer/diff.h"
#include "scorer/text_table.h"
#include "tests/sim_timing.h"

using namespace scorer;

namespace {

struct Tally {
  std::vector<int> same, called;  // per figure
  int all_same = 0, pairs = 0;
  double min_change_sum = 0;
};

std::vector<ReplicateSummary> submission_times(const sim::Run& run) {
  std::vector<ReplicateSummary> out;
  for (const auto& per_replicate : sim::candidate_times_of(run)) out.push_back(summarize(per_replicate));
  return out;
}

// The verdicts of one pair of runs on every figure, as compute_diff forms them.
std::vector<Verdict> verdicts(const std::vector<ReplicateSummary>& latest, const std::vector<ReplicateSummary>& best,
                              const std::vector<LinearFigure>& figures, double* min_change) {
  const double measured = measured_min_change(latest, best);
  *min_change = std::isnan(measured) ? kFallbackMinChange : measured;
  const std::vector<double> no_baseline_change(latest.size(), 0.0);
  std::vector<Verdict> out;
  for (const LinearFigure& f : figures)
    out.push_back(verdict_of(figure_change(latest, best, no_baseline_change, f, 0.95).time, *min_change));
  return out;
}

std::string rate(int n, int of) { return format_number("%.1f%%", 100.0 * n / of); }

std::string lowest(const std::vector<int>& v, size_t from, size_t to, int of) {
  return rate(*std::min_element(v.begin() + long(from), v.begin() + long(to)), of);
}

}  // namespace

TEST_CASE("diff by simulation: a rerun of one build is `same` everywhere; a 3% faster submission is `better`") {
  const std::vector<sim::Shape> shapes = sim::realistic_shapes();
  const size_t n = shapes.size();
  std::vector<std::string> regimes;
  std::vector<int> regime_of;
  for (const sim::Shape& s : shapes) {
    const auto it = std::find(regimes.begin(), regimes.end(), s.regime);
    regime_of.push_back(int(it - regimes.begin()));
    if (it == regimes.end()) regimes.push_back(s.regime);
  }
  const size_t g = regimes.size();
  const ScoringRule rule;
  const RunFigures rf = run_figures(regime_of, regimes, std::vector<ShapeState>(n, ShapeState::scored), rule);
  std::vector<LinearFigure> figures;
  for (size_t i = 0; i < n; ++i) figures.push_back(shape_figure(i, n));
  figures.insert(figures.end(), rf.regimes.begin(), rf.regimes.end());
  figures.push_back(rf.declared(rule));

  struct Case {
    const char* name;
    bool shared;
    int pairs, changed_pairs;
  };
  TextTable table({"offsets", "min change (mean)", "same: shapes (lowest)", "regimes", "aggregate", "all at once",
                   "3% called: shapes (lowest)", "regimes", "aggregate"});
  const std::vector<double> faster(n, 1 / 1.03);
  for (const Case& c : {Case{"each shape its own", false, 1000, 500}, Case{"shared by all shapes", true, 500, 300}}) {
    sim::Noise noise;
    noise.shared = c.shared;
    sim::Draws draws(c.shared ? 31 : 30);
    Tally t;
    t.same.assign(figures.size(), 0);
    t.called.assign(figures.size(), 0);
    // Pairs of consecutive runs of one chain: pair i compares run i + 1 with run i.
    std::vector<ReplicateSummary> previous = submission_times(sim::simulate_run(draws, shapes, noise, {}, 3));
    for (int p = 0; p < c.pairs; ++p) {
      std::vector<ReplicateSummary> next = submission_times(sim::simulate_run(draws, shapes, noise, {}, 3));
      double m;
      const std::vector<Verdict> v = verdicts(next, previous, figures, &m);
      t.min_change_sum += m;
      bool all = true;
      for (size_t f = 0; f < figures.size(); ++f) {
        t.same[f] += v[f] == Verdict::same;
        all &= v[f] == Verdict::same;
      }
      t.all_same += all;
      if (p < c.changed_pairs) {
        const auto changed = submission_times(sim::simulate_run(draws, shapes, noise, {}, 3, faster));
        const std::vector<Verdict> w = verdicts(changed, previous, figures, &m);
        for (size_t f = 0; f < figures.size(); ++f) t.called[f] += w[f] == Verdict::better;
      }
      previous = std::move(next);
    }
    table.add({c.name, format_number("%.2f%%", 100 * t.min_change_sum / c.pairs), lowest(t.same, 0, n, c.pairs),
               lowest(t.same, n, n + g, c.pairs), rate(t.same[n + g], c.pairs), rate(t.all_same, c.pairs),
               lowest(t.called, 0, n, c.changed_pairs), lowest(t.called, n, n + g, c.changed_pairs),
               rate(t.called[n + g], c.changed_pairs)});
    CAPTURE(c.name);
    for (size_t f = 0; f < figures.size(); ++f) {
      CAPTURE(f);
      CHECK(t.same[f] >= 0.95 * c.pairs);
      CHECK(t.called[f] >= 0.90 * c.changed_pairs);
    }
    CHECK(t.all_same >= 0.95 * c.pairs);
  }
  std::ostringstream out;
  table.print(out);
  MESSAGE(
      "scorer diff on simulated pairs of runs (26 shapes, 3 replicates each, 1% baseline and 0.25% submission "
      "offsets):\n"
      << out.str());
}

TEST_CASE("diff by simulation: the measured min change follows the submission's spread") {
  // Noisier submission times give a larger min change, in proportion.
  const std::vector<sim::Shape> shapes = sim::realistic_shapes();
  sim::Draws draws(5);
  auto min_change_at = [&](double cand_offset) {
    sim::Noise noise;
    noise.cand_offset_sd = cand_offset;
    double sum = 0;
    for (int p = 0; p < 20; ++p)
      sum += measured_min_change(submission_times(sim::simulate_run(draws, shapes, noise, {}, 3)),
                                 submission_times(sim::simulate_run(draws, shapes, noise, {}, 3)));
    return sum / 20;
  };
  const double quiet = min_change_at(0.001), noisy = min_change_at(0.02);
  MESSAGE("mean min change: " << 100 * quiet << "% at 0.1% submission offsets, " << 100 * noisy << "% at 2%");
  CHECK(quiet < 0.015);
  CHECK(noisy > 0.05);
  CHECK(std::isnan(measured_min_change({summarize({{1, 2, 3}})}, {summarize({{1, 2, 3}, {2, 3, 4}})})));
}
