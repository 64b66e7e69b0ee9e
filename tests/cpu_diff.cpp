// scorer diff: verdicts from the submission's own times, the baselines'
// drift shown beside them, the warnings, the refusals and the command's
// handling of bad files. What the verdicts promise over many simulated pairs
// of runs is tests/cpu_diff_simulation.cpp.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "scorer/commands.h"
#include "scorer/diff.h"
#include "scorer/exit_codes.h"
#include "scorer/results_json.h"
#include "scorer/stats.h"

namespace {

using namespace scorer;
namespace fs = std::filesystem;

struct Spec {
  std::string name, regime;
  double speedup;
};

// A run whose shape s has paired ratios around specs[s].speedup (baseline
// around `baseline_us`), each time with log-normal noise of sd `noise`, in
// `replicates` replicates of `trials` trials.
RunResult make_run(const std::vector<Spec>& specs, std::mt19937_64& rng, int trials = 40, double noise = 0.05,
                   double baseline_us = 20, int replicates = 3) {
  RunResult run;
  run.meta.gpu_name = "NVIDIA H200";
  run.meta.shapes_sha256 = "shapes-1";
  run.meta.scorer_version = "scorer-1";
  run.meta.mode = "events";
  run.meta.started_at = "2025-06-01T10:00:00Z";
  run.meta.git_commit = "0123456789abcdef0123";
  std::normal_distribution<double> n(0, noise);
  for (const Spec& s : specs) {
    ShapeResult r;
    r.shape.name = s.name;
    r.shape.regime = s.regime;
    r.shape.M = 37, r.shape.N = 1000 + 8 * static_cast<int>(run.shapes.size()), r.shape.K = 4096;
    for (int k = 1; k <= replicates; ++k) {
      scorer::ReplicateResult& rep = r.replicates.emplace_back();
      rep.index = k;
      for (int i = 0; i < trials; ++i) {
        rep.baseline_us.push_back(baseline_us * std::exp(n(rng)));
        rep.candidate_us.push_back(baseline_us / s.speedup * std::exp(n(rng)));
      }
    }
    run.shapes.push_back(r);
  }
  compute_statistics(run);
  return run;
}

std::vector<Spec> specs(const std::vector<double>& dense, const std::vector<double>& moe) {
  std::vector<Spec> v;
  for (size_t i = 0; i < dense.size(); ++i) v.push_back({"dense_" + std::to_string(i), "dense", dense[i]});
  for (size_t i = 0; i < moe.size(); ++i) v.push_back({"moe_" + std::to_string(i), "moe", moe[i]});
  return v;
}

std::mt19937_64 fresh_rng() { return std::mt19937_64(std::random_device{}()); }

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Redirects a standard stream into a string for the scope.
struct Capture {
  std::ostream& os;
  std::ostringstream buf;
  std::streambuf* old;
  explicit Capture(std::ostream& s) : os(s), old(s.rdbuf(buf.rdbuf())) {}
  ~Capture() { os.rdbuf(old); }
  std::string str() const { return buf.str(); }
};

struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "cpu_diff-XXXXXX").string();
    REQUIRE(mkdtemp(t.data()) != nullptr);
    path = t;
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("diff: a large improvement is better on every shape, regime and overall") {
  auto rng = fresh_rng();
  RunResult best = make_run(specs({1.1, 0.9, 1.3, 1.0, 1.2}, {0.8, 1.4, 1.0}), rng, 31);
  RunResult latest = make_run(specs({1.6, 1.35, 1.9, 1.5, 1.8}, {1.2, 2.1, 1.5}), rng, 53);
  Diff d = compute_diff(latest, best);
  REQUIRE(d.incomparable.empty());
  CHECK(d.shapes_compared == 8);
  for (const ShapeDiff& s : d.shapes) {
    CHECK_MESSAGE(s.verdict == Verdict::better, s.name);
    // The submission's time fell by a third: latest / selected about 1/1.5.
    CHECK(s.change.time.hi < 0.8);
    CHECK(s.change.time.point == doctest::Approx(1 / 1.5).epsilon(0.1));
    CHECK(s.change.baseline_change == doctest::Approx(1).epsilon(0.05));
  }
  for (const RegimeDiff& r : d.regimes) CHECK(r.verdict == Verdict::better);
  CHECK(d.aggregate == Verdict::better);
  CHECK(d.aggregate_change.time.lo <= d.aggregate_change.time.point);
  CHECK(d.aggregate_change.time.point <= d.aggregate_change.time.hi);

  std::ostringstream out;
  DiffOptions opt;
  opt.fail_on = FailOn::worse;
  CHECK(print_diff(out, latest, best, opt) == kExitOk);
  CHECK(out.str().find("aggregate ") != std::string::npos);
  CHECK(out.str().find(": better (submission time -") != std::string::npos);
  CHECK(out.str().find("WARNING") == std::string::npos);
  opt.fail_on = FailOn::any_change;
  std::ostringstream out2;
  CHECK(print_diff(out2, latest, best, opt) == kExitIncorrect);
}

TEST_CASE("diff: the baselines' drift is shown beside the verdict and never decides it") {
  auto rng = fresh_rng();
  // The same submission times (20/1.5 us); the baseline 20% slower in the
  // latest run, so the speedups rose by 20%.
  RunResult best = make_run(specs({1.5, 1.5}, {}), rng, 41, 0.005, 20);
  RunResult latest = make_run(specs({1.8, 1.8}, {}), rng, 41, 0.005, 24);
  Diff d = compute_diff(latest, best);
  for (const ShapeDiff& s : d.shapes) {
    CHECK(s.verdict == Verdict::same);
    CHECK(s.change.baseline_change == doctest::Approx(1.2).epsilon(0.03));
    CHECK(s.change.time.point == doctest::Approx(1.0).epsilon(0.03));
  }
  CHECK(d.aggregate == Verdict::same);
  CHECK(d.aggregate_change.baseline_change == doctest::Approx(1.2).epsilon(0.03));
  std::ostringstream out;
  CHECK(print_diff(out, latest, best, DiffOptions{}) == kExitOk);
  CHECK(out.str().find("; baseline time +") != std::string::npos);
  CHECK(out.str().find("never decide") != std::string::npos);
  // The min change is measured from the replicates, and the diff says so.
  CHECK(d.min_change_measured);
  CHECK(d.min_change > 0);
  CHECK(d.min_change < 0.02);
  CHECK(out.str().find("standard errors of a typical shape's change") != std::string::npos);
  CHECK(out.str().find("within each run only") == std::string::npos);

  // A faster submission against a baseline that slowed as much is better all the same.
  RunResult faster = make_run(specs({1.8 * 1.2, 1.8 * 1.2}, {}), rng, 41, 0.005, 24);
  Diff f = compute_diff(faster, best);
  for (const ShapeDiff& s : f.shapes) CHECK(s.verdict == Verdict::better);
}

TEST_CASE("diff: a large regression is worse, and --fail-on worse fails") {
  auto rng = fresh_rng();
  RunResult best = make_run(specs({1.5, 1.2, 1.7}, {2.0, 1.1}), rng, 47);
  RunResult latest = make_run(specs({1.0, 0.8, 1.1}, {1.3, 0.7}), rng, 29);
  Diff d = compute_diff(latest, best);
  for (const ShapeDiff& s : d.shapes) CHECK_MESSAGE(s.verdict == Verdict::worse, s.name);
  for (const RegimeDiff& r : d.regimes) CHECK(r.verdict == Verdict::worse);
  CHECK(d.aggregate == Verdict::worse);
  CHECK(d.aggregate_change.time.lo > 1.25);

  std::ostringstream out;
  DiffOptions opt;
  opt.fail_on = FailOn::worse;
  CHECK(print_diff(out, latest, best, opt) == kExitIncorrect);
  CHECK(out.str().find("vs selected") != std::string::npos);
  CHECK(out.str().find("WARNING: regime moe got worse") != std::string::npos);
  CHECK(out.str().find("although the aggregate improved") == std::string::npos);
  opt.fail_on = FailOn::nothing;
  std::ostringstream quiet;
  CHECK(print_diff(quiet, latest, best, opt) == kExitOk);
}

TEST_CASE("diff: two runs of the same distribution are the same") {
  // A 95% interval excludes 1 for about 5% of pure-noise pairs by design, and
  // the min change keeps those from a verdict; the data is seeded rather than
  // fresh (how often that holds is tests/cpu_diff_simulation.cpp's business).
  std::mt19937_64 rng(20250601);
  std::vector<double> dense = {1.1, 0.9, 1.3, 1.0, 1.2, 1.05}, moe = {0.8, 1.4, 1.0, 1.7};
  RunResult best = make_run(specs(dense, moe), rng);
  RunResult latest = make_run(specs(dense, moe), rng);
  Diff d = compute_diff(latest, best);
  int flagged = 0;
  for (const ShapeDiff& s : d.shapes) {
    flagged += s.verdict != Verdict::same;
    CHECK(s.change.time.lo < s.change.time.point);
    CHECK(s.change.time.point < s.change.time.hi);
  }
  CHECK(flagged == 0);
  for (const RegimeDiff& r : d.regimes) CHECK_MESSAGE(r.verdict == Verdict::same, r.name);
  CHECK(d.aggregate == Verdict::same);
  CHECK(std::fabs(std::log(d.aggregate_change.time.point)) < d.min_change);
}

TEST_CASE("diff: a regime that got worse is a loud warning even when the aggregate improved") {
  auto rng = fresh_rng();
  RunResult best = make_run(specs({1.0, 1.0, 1.0, 1.0, 1.0, 1.0}, {1.5, 1.5}), rng, 41);
  RunResult latest = make_run(specs({2.0, 2.0, 2.0, 2.0, 2.0, 2.0}, {1.2, 1.2}), rng, 41);
  Diff d = compute_diff(latest, best);
  REQUIRE(d.aggregate == Verdict::better);
  REQUIRE(d.regimes.size() == 2);
  CHECK(d.regimes[0].verdict == Verdict::better);
  CHECK(d.regimes[1].name == "moe");
  CHECK(d.regimes[1].verdict == Verdict::worse);

  std::ostringstream out;
  DiffOptions opt;
  opt.fail_on = FailOn::worse;
  CHECK(print_diff(out, latest, best, opt) == kExitIncorrect);
  const std::string text = out.str();
  CHECK(count(text, "WARNING: regime moe got worse") == 1);
  CHECK(text.find("although the aggregate improved") != std::string::npos);
  CHECK(text.find("WARNING: regime dense") == std::string::npos);
}

TEST_CASE("diff: runs from another GPU, shapes file, scorer version or mode are refused unless forced") {
  auto rng = fresh_rng();
  RunResult best = make_run(specs({1.0, 1.2}, {0.9}), rng, 20);
  RunResult latest = make_run(specs({1.1, 1.2}, {0.9}), rng, 20);
  struct Case {
    std::string RunMeta::*field;
    const char* why;
  };
  for (const Case& c :
       {Case{&RunMeta::gpu_name, "different GPUs"}, Case{&RunMeta::shapes_sha256, "different shapes files"},
        Case{&RunMeta::scorer_version, "different scorer versions"}, Case{&RunMeta::mode, "different timing modes"}}) {
    CAPTURE(c.why);
    RunResult other = best;
    other.meta.*c.field += "-other";
    std::ostringstream printed, refused;
    CHECK(print_diff(printed, latest, other, {}, refused) == kExitBadInput);
    CHECK(printed.str().empty());  // a refusal goes to stderr, as every refusal does
    CHECK(refused.str().find(c.why) != std::string::npos);
    CHECK(refused.str().find("refusing") != std::string::npos);
    CHECK(refused.str().find("aggregate") == std::string::npos);

    DiffOptions force;
    force.force = true;
    std::ostringstream forced;
    CHECK(print_diff(forced, latest, other, force) == kExitOk);
    CHECK(forced.str().find(c.why) != std::string::npos);
    CHECK(forced.str().find("aggregate") != std::string::npos);
  }
  std::ostringstream same;
  CHECK(print_diff(same, latest, best, {}) == kExitOk);
  CHECK(same.str().find("refusing") == std::string::npos);
}

TEST_CASE("diff: shapes in one run only, or failed in one, are listed as such") {
  auto rng = fresh_rng();
  RunResult best = make_run({{"a", "r", 1.2}, {"b", "r", 1.2}, {"gone", "r", 1.1}, {"c", "r", 1.3}}, rng, 25);
  RunResult latest = make_run({{"a", "r", 1.2}, {"b", "r", 1.2}, {"new", "r", 1.0}, {"c", "r", 1.3}}, rng, 25);
  latest.shapes[1].status = "incorrect";
  latest.shapes[1].reason = "rel_l2 0.5 > 0.01";
  best.shapes[3].status = "timeout";
  compute_statistics(latest);
  compute_statistics(best);

  Diff d = compute_diff(latest, best);
  auto find = [&](const std::string& n) -> const ShapeDiff& {
    for (const ShapeDiff& s : d.shapes)
      if (s.name == n) return s;
    FAIL("no shape " << n);
    return d.shapes[0];
  };
  CHECK(find("a").presence == Presence::both);
  CHECK(find("b").presence == Presence::failed_latest);
  CHECK(find("b").verdict == Verdict::worse);
  CHECK(find("c").presence == Presence::failed_best);
  CHECK(find("new").presence == Presence::only_latest);
  CHECK(find("gone").presence == Presence::only_best);
  CHECK(d.shapes_compared == 1);
  CHECK(d.any_worse());

  std::ostringstream out;
  DiffOptions opt;
  opt.fail_on = FailOn::worse;
  CHECK(print_diff(out, latest, best, opt) == kExitIncorrect);
  const std::string text = out.str();
  CHECK(text.find("failed (incorrect)") != std::string::npos);
  CHECK(text.find("worse: failed in latest") != std::string::npos);
  CHECK(text.find("failed (timeout)") != std::string::npos);
  CHECK(text.find("only in latest") != std::string::npos);
  CHECK(text.find("only in selected") != std::string::npos);
  CHECK(text.find("WARNING: shape b failed in latest (incorrect: rel_l2 0.5 > 0.01)") != std::string::npos);

  // A shape only missing is a change but not a regression.
  RunResult partial = make_run({{"a", "r", 1.2}, {"b", "r", 1.2}}, rng, 25);
  RunResult full = make_run({{"a", "r", 1.2}, {"b", "r", 1.2}, {"c", "r", 1.2}}, rng, 25);
  Diff p = compute_diff(partial, full);
  CHECK(p.any_change());
  CHECK(p.shapes.back().presence == Presence::only_best);
  CHECK(p.shapes.back().verdict == Verdict::same);
}

TEST_CASE("scorer diff: a truncated results file is one line naming file and line, exit 2") {
  auto rng = fresh_rng();
  TempDir dir;
  RunResult run = make_run(specs({1.0, 1.1}, {1.2}), rng, 12);
  save_results(run, (dir.path / "best.json").string());
  std::string text = results_to_json(run).dump(2);
  {
    std::ofstream f(dir.path / "latest.json", std::ios::binary);
    f << text.substr(0, text.size() * 2 / 3);
  }
  const std::string best_bytes = read(dir.path / "best.json");
  int rc;
  std::string err, out;
  {
    Capture ce(std::cerr), co(std::cout);
    rc = diff_main({"--results-dir", dir.path.string()});
    err = ce.str();
    out = co.str();
  }
  CHECK(rc == kExitBadInput);
  CHECK(count(err, "\n") == 1);
  CHECK(err.rfind((dir.path / "latest.json").string() + ":", 0) == 0);
  CHECK(std::isdigit(static_cast<unsigned char>(err[(dir.path / "latest.json").string().size() + 1])));
  CHECK(out.empty());
  CHECK(read(dir.path / "best.json") == best_bytes);
  CHECK(std::distance(fs::directory_iterator(dir.path), fs::directory_iterator()) == 2);

  // The same files in good order compare; --fail-on takes only its two values.
  save_results(run, (dir.path / "latest.json").string());
  {
    Capture co(std::cout);
    CHECK(diff_main({"--results-dir", dir.path.string(), "--fail-on", "any-change"}) == kExitOk);
    CHECK(co.str().find("aggregate") != std::string::npos);
  }
  Capture ce(std::cerr);
  CHECK(diff_main({"--results-dir", dir.path.string(), "--fail-on", "better"}) == kExitBadInput);
  CHECK(diff_main({"--results-dir", (dir.path / "none").string()}) == kExitBadInput);
}

TEST_CASE("diff: a shape failed only in the latest run makes its regime and the aggregate worse") {
  auto rng = fresh_rng();
  // moe_1 is 3x in the best and times out in the latest; the shapes still
  // scored in both improve, so their intervals alone say better.
  RunResult best = make_run(specs({1.0, 1.0}, {1.0, 3.0}), rng, 41, 0.02);
  RunResult latest = make_run(specs({1.3, 1.3}, {1.3, 3.0}), rng, 41, 0.02);
  latest.shapes[3].status = "timeout";
  latest.shapes[3].reason = "hung";
  compute_statistics(latest);
  const Diff d = compute_diff(latest, best);
  CHECK(d.regimes[0].verdict == Verdict::better);
  CHECK(d.regimes[1].verdict == Verdict::worse);
  CHECK(d.regimes[1].failed_latest == 1);
  CHECK(d.aggregate == Verdict::worse);
  std::ostringstream out;
  DiffOptions opt;
  opt.fail_on = FailOn::worse;
  CHECK(print_diff(out, latest, best, opt) == kExitIncorrect);
  const std::string text = out.str();
  CHECK(text.find(": worse (1 shape failed in latest; submission time -") != std::string::npos);
  CHECK(text.find("WARNING: regime moe got worse (1 shape failed in latest)\n") != std::string::npos);
  CHECK(text.find("although the aggregate improved") == std::string::npos);

  // Every shape of a regime failed: worse, with no interval and no speedup.
  latest.shapes[2].status = "crash";
  compute_statistics(latest);
  std::ostringstream out2;
  print_diff(out2, latest, best, DiffOptions{});
  CHECK(out2.str().find("regime moe - vs selected ") != std::string::npos);
  CHECK(out2.str().find(": worse (2 shapes failed in latest; no shape scored in both)") != std::string::npos);
}

TEST_CASE("diff: swapping the runs swaps better and worse, whatever --min-change") {
  auto rng = fresh_rng();
  const RunResult a = make_run(specs({1.49}, {}), rng, 41, 0.003);
  const RunResult b = make_run(specs({1.0}, {}), rng, 41, 0.003);
  DiffOptions opt;
  for (double m : {0.01, 0.2, 0.4}) {
    CAPTURE(m);
    opt.min_change = m;
    const Diff ab = compute_diff(a, b, opt), ba = compute_diff(b, a, opt);
    CHECK(ab.shapes[0].verdict == Verdict::better);
    CHECK(ba.shapes[0].verdict == Verdict::worse);
  }
  opt.min_change = 0.6;
  const Diff ab = compute_diff(a, b, opt), ba = compute_diff(b, a, opt);
  CHECK(ab.shapes[0].verdict == Verdict::same);
  CHECK(ba.shapes[0].verdict == Verdict::same);
}

TEST_CASE("diff: columns as wide as their widest cell") {
  auto rng = fresh_rng();
  const RunResult best = make_run({{"a_very_long_shape_name_here", "dense", 1.0}, {"b", "dense", 1.0}}, rng, 41);
  const RunResult latest = make_run({{"a_very_long_shape_name_here", "dense", 149.0}, {"b", "dense", 1.0}}, rng, 41);
  std::ostringstream out;
  print_diff(out, latest, best, DiffOptions{});
  std::istringstream lines(out.str());
  std::vector<size_t> verdict_at;
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("shape", 0) == 0 || line.rfind("a_very", 0) == 0 || line.rfind("b ", 0) == 0) {
      // The verdict column starts where "verdict" does in the header.
      const size_t at = line.rfind("  ") + 2;
      verdict_at.push_back(at);
    }
  REQUIRE(verdict_at.size() == 3);
  CHECK(verdict_at[0] == verdict_at[1]);
  CHECK(verdict_at[1] == verdict_at[2]);
}

TEST_CASE("diff: runs of one replicate fall back to a 1% min change and say why") {
  auto rng = fresh_rng();
  const RunResult best = make_run(specs({1.5, 1.5}, {}), rng, 41, 0.005, 20, 1);
  const RunResult latest = make_run(specs({1.5, 1.5}, {}), rng, 41, 0.005, 20, 3);
  const Diff d = compute_diff(latest, best);
  CHECK(d.min_change == kFallbackMinChange);
  CHECK_FALSE(d.min_change_measured);
  for (const ShapeDiff& s : d.shapes) CHECK(s.change.replicates == 1);
  std::ostringstream out;
  print_diff(out, latest, best, DiffOptions{});
  CHECK(out.str().find("changes count from 1%: the runs have too few replicates to measure it") != std::string::npos);
  CHECK(out.str().find("NOTE: 2 shapes compared from one replicate in a run") != std::string::npos);
  // --min-change overrides either.
  DiffOptions given;
  given.min_change = 0.05;
  CHECK(compute_diff(latest, best, given).min_change == 0.05);
}
