#include "scorer/diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <set>

#include "scorer/commands.h"
#include "scorer/exit_codes.h"
#include "scorer/results_json.h"

namespace scorer {
namespace {

bool scored(const ShapeResult* s) {
  return s && s->status == "ok" && !pooled(*s, &ReplicateResult::candidate_us).empty();
}

// The paired ratios of every replicate, pooled.
std::vector<double> ratios(const ShapeResult& s) {
  const std::vector<double> base = pooled(s, &ReplicateResult::baseline_us);
  const std::vector<double> cand = pooled(s, &ReplicateResult::candidate_us);
  std::vector<double> r;
  size_t n = std::min(base.size(), cand.size());
  for (size_t i = 0; i < n; ++i)
    if (cand[i] > 0 && base[i] > 0) r.push_back(base[i] / cand[i]);
  return r;
}

// Symmetric in the two runs: swapped, a change of x becomes 1/x, so the
// bound below 1 is 1/(1 + min_change), not 1 - min_change.
Verdict verdict_of(const Interval& change, double min_change) {
  if (change.lo > 1 + min_change) return Verdict::better;
  if (change.hi < 1 / (1 + min_change)) return Verdict::worse;
  return Verdict::same;
}

// Percentile interval of log ratios, returned as ratios.
Interval interval_of(double point_log, std::vector<double> logs, double level) {
  std::sort(logs.begin(), logs.end());
  auto q = [&](double p) {
    double x = p * (logs.size() - 1);
    size_t i = static_cast<size_t>(x);
    if (i + 1 >= logs.size()) return logs.back();
    return logs[i] + (x - i) * (logs[i + 1] - logs[i]);
  };
  double tail = (1 - level) / 2;
  return {std::exp(point_log), std::exp(q(tail)), std::exp(q(1 - tail))};
}

std::string fmt(const char* f, double x) {
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

// "-" for no speedup: a regime none of whose shapes was scored stores 0.
std::string speedup_text(const Interval& i) {
  if (!(i.point > 0)) return "-";
  return fmt("%.4fx", i.point) + " [" + fmt("%.4f", i.lo) + ", " + fmt("%.4f", i.hi) + "]";
}

std::string percent_text(double ratio) { return fmt("%+.1f%%", (ratio - 1) * 100); }

std::string change_text(const Interval& c) {
  return percent_text(c.point) + " [" + percent_text(c.lo) + ", " + percent_text(c.hi) + "]";
}

// " (baseline time +x%, submission +y%)" where the verdict is the baseline's drift, else "".
std::string drift_text(const TimeDrift& t, Verdict v, double min_change) {
  if (!t.moved(v, min_change)) return "";
  return " (baseline time " + percent_text(t.baseline_change) + ", submission " +
         percent_text(t.candidate_change) + ")";
}

std::string shape_cell(const ShapeResult* s) {
  if (!s) return "-";
  if (!scored(s)) return "failed (" + (s->status == "ok" ? std::string("no trials") : s->status) + ")";
  return speedup_text({s->speedup, s->ci_lo, s->ci_hi});
}

std::string run_line(const RunMeta& m) {
  std::string commit = m.git_commit.empty() ? "no commit" : "commit " + m.git_commit.substr(0, 12);
  return m.started_at + ", " + commit + (m.git_dirty ? " (dirty)" : "") + ", " + m.gpu_name +
         ", " + m.mode;
}

const RegimeResult* find_regime(const RunResult& run, const std::string& name) {
  for (const RegimeResult& r : run.regimes)
    if (r.name == name) return &r;
  return nullptr;
}

std::string pad(const std::string& s, size_t w) { return s.size() >= w ? s + " " : s + std::string(w - s.size(), ' '); }

// The verdict of a regime or the aggregate: worse with a shape failed only in
// the latest run, else from the interval of the shapes scored in both; and
// what it rests on, "(2 shapes failed in latest; +1.2% [...] over 3 shapes
// scored in both)".
std::string failed_text(int failed_latest) {
  return std::to_string(failed_latest) + " shape" + (failed_latest == 1 ? "" : "s") + " failed in latest";
}
std::string group_text(Verdict v, int failed_latest, int shapes, const Interval& change) {
  if (!failed_latest && !shapes) return "no shape scored in both";
  std::string why;
  if (failed_latest) why = failed_text(failed_latest) + "; ";
  why += shapes ? change_text(change) + " over " + std::to_string(shapes) + " shape" + (shapes == 1 ? "" : "s") +
                      " scored in both"
                : "no shape scored in both";
  return std::string(verdict_name(v)) + " (" + why + ")";
}

}  // namespace

bool TimeDrift::moved(Verdict v, double min_change) const {
  const double c = std::fabs(std::log(candidate_change));
  return v != Verdict::same && std::fabs(std::log(baseline_change)) > c && c <= std::log1p(min_change);
}

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::better: return "better";
    case Verdict::worse: return "worse";
    default: return "same";
  }
}

bool Diff::any_worse() const {
  if (aggregate == Verdict::worse) return true;
  for (const RegimeDiff& r : regimes)
    if (r.verdict == Verdict::worse) return true;
  for (const ShapeDiff& s : shapes)
    if (s.verdict == Verdict::worse) return true;
  return false;
}

bool Diff::any_change() const {
  if (aggregate != Verdict::same) return true;
  for (const RegimeDiff& r : regimes)
    if (r.verdict != Verdict::same) return true;
  for (const ShapeDiff& s : shapes)
    if (s.verdict != Verdict::same || s.presence == Presence::only_latest ||
        s.presence == Presence::only_best)
      return true;
  return false;
}

Diff compute_diff(const RunResult& latest, const RunResult& best, const BootstrapOptions& opt,
                  double min_change) {
  Diff d;
  auto differs = [&](const char* what, const std::string& a, const std::string& b) {
    if (a != b) d.incomparable.push_back(std::string(what) + " (latest: '" + a + "', selected: '" + b + "')");
  };
  differs("different GPUs", latest.meta.gpu_name, best.meta.gpu_name);
  differs("different shapes files", latest.meta.shapes_sha256, best.meta.shapes_sha256);
  differs("different scorer versions", latest.meta.scorer_version, best.meta.scorer_version);
  differs("different timing modes", latest.meta.mode, best.meta.mode);

  std::map<std::string, const ShapeResult*> in_best;
  for (const ShapeResult& s : best.shapes) in_best[s.shape.name] = &s;
  std::set<std::string> in_latest;
  for (const ShapeResult& s : latest.shapes) {
    in_latest.insert(s.shape.name);
    auto it = in_best.find(s.shape.name);
    d.shapes.push_back({s.shape.name, s.shape.regime, Presence::both, &s,
                        it == in_best.end() ? nullptr : it->second, {}, Verdict::same, {}});
  }
  for (const ShapeResult& s : best.shapes)
    if (!in_latest.count(s.shape.name))
      d.shapes.push_back({s.shape.name, s.shape.regime, Presence::only_best, nullptr, &s, {}, Verdict::same, {}});

  // Shapes scored in both runs, each with its regime's index.
  std::vector<ShapeDiff*> both;
  std::vector<int> regime_of;
  std::map<std::string, int> regime_index;
  for (ShapeDiff& s : d.shapes) {
    if (!regime_index.count(s.regime)) {
      regime_index[s.regime] = static_cast<int>(d.regimes.size());
      d.regimes.push_back({s.regime, 0, 0, {}, Verdict::same, {}});
    }
    bool l = scored(s.latest), b = scored(s.best);
    if (!s.latest) continue;
    if (!s.best) s.presence = Presence::only_latest;
    else if (l && b) s.presence = Presence::both;
    else if (!l && !b) s.presence = Presence::failed_both;
    else s.presence = l ? Presence::failed_best : Presence::failed_latest;
    if (s.presence == Presence::failed_latest) {
      s.verdict = Verdict::worse;
      d.regimes[regime_index[s.regime]].failed_latest++;
      d.failed_latest++;
    }
    if (s.presence == Presence::failed_best) s.verdict = Verdict::better;
    if (s.presence == Presence::both) {
      both.push_back(&s);
      regime_of.push_back(regime_index[s.regime]);
      d.regimes[regime_of.back()].shapes++;
    }
  }
  d.shapes_compared = static_cast<int>(both.size());
  for (RegimeDiff& rd : d.regimes)
    if (rd.failed_latest) rd.verdict = Verdict::worse;
  if (d.failed_latest) d.aggregate = Verdict::worse;
  if (both.empty()) return d;

  std::vector<std::vector<double>> new_r, old_r;
  std::vector<double> point(both.size());
  for (size_t i = 0; i < both.size(); ++i) {
    new_r.push_back(ratios(*both[i]->latest));
    old_r.push_back(ratios(*both[i]->best));
    point[i] = std::log(median(new_r[i]) / median(old_r[i]));
  }

  // Every resample draws each run's trials anew for every shape, and the
  // regime and aggregate figures of that resample are built from the same
  // draws, so their intervals are consistent with the shapes'.
  const int R = std::max(opt.resamples, 100);
  const size_t nreg = d.regimes.size();
  std::vector<std::vector<double>> shape_logs(both.size(), std::vector<double>(R));
  std::vector<std::vector<double>> regime_logs(nreg, std::vector<double>(R));
  std::vector<double> agg_logs(R);
  std::mt19937_64 rng(opt.seed);
  std::vector<double> buf;
  auto resampled_median = [&](const std::vector<double>& v) {
    buf.resize(v.size());
    for (double& x : buf) x = v[draw(rng, v.size())];
    return median(buf);
  };
  for (int r = 0; r < R; ++r) {
    std::vector<double> sum(nreg, 0.0);
    double total = 0;
    for (size_t i = 0; i < both.size(); ++i) {
      double l = std::log(resampled_median(new_r[i]) / resampled_median(old_r[i]));
      shape_logs[i][r] = l;
      sum[regime_of[i]] += l;
      total += l;
    }
    for (size_t g = 0; g < nreg; ++g)
      if (d.regimes[g].shapes) regime_logs[g][r] = sum[g] / d.regimes[g].shapes;
    agg_logs[r] = total / both.size();
  }

  std::vector<double> regime_point(nreg, 0.0), regime_base(nreg, 0.0), regime_cand(nreg, 0.0);
  double agg_point = 0, agg_base = 0, agg_cand = 0;
  for (size_t i = 0; i < both.size(); ++i) {
    ShapeDiff& s = *both[i];
    s.change = interval_of(point[i], shape_logs[i], opt.level);
    s.verdict = verdict_of(s.change, min_change);
    s.drift = {median(pooled(*s.latest, &ReplicateResult::baseline_us)) /
                   median(pooled(*s.best, &ReplicateResult::baseline_us)),
               median(pooled(*s.latest, &ReplicateResult::candidate_us)) /
                   median(pooled(*s.best, &ReplicateResult::candidate_us))};
    regime_point[regime_of[i]] += point[i];
    regime_base[regime_of[i]] += std::log(s.drift.baseline_change);
    regime_cand[regime_of[i]] += std::log(s.drift.candidate_change);
    agg_point += point[i];
    agg_base += std::log(s.drift.baseline_change);
    agg_cand += std::log(s.drift.candidate_change);
  }
  for (size_t g = 0; g < nreg; ++g) {
    RegimeDiff& rd = d.regimes[g];
    if (!rd.shapes) continue;
    rd.change = interval_of(regime_point[g] / rd.shapes, regime_logs[g], opt.level);
    if (!rd.failed_latest) rd.verdict = verdict_of(rd.change, min_change);
    rd.drift = {std::exp(regime_base[g] / rd.shapes), std::exp(regime_cand[g] / rd.shapes)};
  }
  d.aggregate_drift = {std::exp(agg_base / both.size()), std::exp(agg_cand / both.size())};
  d.aggregate_change = interval_of(agg_point / both.size(), agg_logs, opt.level);
  if (!d.failed_latest) d.aggregate = verdict_of(d.aggregate_change, min_change);
  return d;
}

int print_diff(std::ostream& out, const RunResult& latest, const RunResult& best,
               const DiffOptions& opt) {
  Diff d = compute_diff(latest, best, opt.bootstrap, opt.min_change);
  if (!d.incomparable.empty()) {
    std::string why;
    for (const std::string& w : d.incomparable) why += (why.empty() ? "" : "; ") + w;
    if (!opt.force) {
      out << "refusing to compare: " << why << " (--force compares anyway)\n";
      return kExitBadInput;
    }
    out << "comparing anyway (--force) although the runs differ: " << why << "\n";
  }

  out << "latest:   " << run_line(latest.meta) << "\n"
      << "selected: " << run_line(best.meta) << "\n\n";
  const double m = opt.min_change;
  // Every cell first, so that each column is as wide as its widest cell.
  std::vector<std::vector<std::string>> rows = {{"shape", "regime", "latest", "selected", "change", "verdict"}};
  for (const ShapeDiff& s : d.shapes) {
    std::string change, verdict;
    switch (s.presence) {
      case Presence::both:
        change = change_text(s.change);
        verdict = verdict_name(s.verdict) + drift_text(s.drift, s.verdict, m);
        break;
      case Presence::only_latest: verdict = "only in latest"; break;
      case Presence::only_best: verdict = "only in selected"; break;
      case Presence::failed_latest: verdict = "worse: failed in latest"; break;
      case Presence::failed_best: verdict = "better: failed in selected"; break;
      case Presence::failed_both: verdict = "failed in both"; break;
    }
    rows.push_back({s.name, s.regime, shape_cell(s.latest), shape_cell(s.best), change, verdict});
  }
  std::vector<size_t> width(5, 0);
  for (const auto& row : rows)
    for (size_t c = 0; c < width.size(); ++c) width[c] = std::max(width[c], row[c].size() + 2);
  for (const auto& row : rows) {
    for (size_t c = 0; c < width.size(); ++c) out << pad(row[c], width[c]);
    out << row.back() << "\n";
  }
  out << "\n";

  for (const RegimeDiff& r : d.regimes) {
    const RegimeResult* a = find_regime(latest, r.name);
    const RegimeResult* b = find_regime(best, r.name);
    out << "regime " << r.name << " " << (a ? speedup_text(a->speedup) : "-") << " vs selected "
        << (b ? speedup_text(b->speedup) : "-") << ": "
        << group_text(r.verdict, r.failed_latest, r.shapes, r.change)
        << (r.shapes ? drift_text(r.drift, r.verdict, m) : "") << "\n";
  }
  out << "aggregate " << speedup_text(latest.aggregate) << " vs selected " << speedup_text(best.aggregate)
      << ": " << group_text(d.aggregate, d.failed_latest, d.shapes_compared, d.aggregate_change)
      << (d.shapes_compared ? drift_text(d.aggregate_drift, d.aggregate, m) : "") << "\n";

  const char* although = d.aggregate == Verdict::better ? " although the aggregate improved" : "";
  for (const RegimeDiff& r : d.regimes)
    if (r.verdict == Verdict::worse)
      out << "WARNING: regime " << r.name << " got worse ("
          << (r.failed_latest ? failed_text(r.failed_latest) : change_text(r.change))
          << ")" << although << "\n";
  std::string moved;
  for (const ShapeDiff& s : d.shapes)
    if (s.drift.moved(s.verdict, m)) moved += (moved.empty() ? "" : ", ") + s.name;
  if (!moved.empty())
    out << "NOTE: the baseline's own time moved more than the submission's on " << moved
        << ": those verdicts are the baseline's drift, not the submission's (--recorded gives a fixed "
           "reference)\n";
  for (const ShapeDiff& s : d.shapes)
    if (s.presence == Presence::failed_latest)
      out << "WARNING: shape " << s.name << " failed in latest (" << s.latest->status
          << (s.latest->reason.empty() ? "" : ": " + s.latest->reason) << ")" << although << "\n";

  if ((opt.fail_on == FailOn::worse && d.any_worse()) ||
      (opt.fail_on == FailOn::any_change && d.any_change()))
    return kExitIncorrect;
  return kExitOk;
}

int diff_main(const std::vector<std::string>& args) {
  static const char* usage =
      "usage: scorer diff [LATEST.json [BEST.json]] [--results-dir DIR] [--force]\n"
      "                   [--fail-on worse|any-change]\n"
      "Compares a run (default DIR/latest.json) with the selected best (default\n"
      "DIR/best.json; DIR defaults to results): per shape, per regime and overall,\n"
      "each with a verdict better/worse/same from a bootstrap of the ratio of the\n"
      "two runs (95% interval entirely above or below 1).\n"
      "  --force       compare runs from different GPUs, shapes files, scorer\n"
      "                versions or timing modes\n"
      "  --min-change PCT      a change counts only when its whole interval lies\n"
      "                        beyond PCT% (default 1: two runs drift by about that)\n"
      "  --fail-on worse       exit 1 when a shape, a regime or the aggregate got worse\n"
      "  --fail-on any-change  exit 1 when anything changed\n"
      "Exit codes: 0 compared, 1 --fail-on met, 2 bad input or runs not comparable.\n";
  std::string dir = "results";
  std::vector<std::string> files;
  DiffOptions opt;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::cout << usage;
      return kExitOk;
    } else if (a == "--force") {
      opt.force = true;
    } else if ((a == "--results-dir" || a == "--fail-on" || a == "--min-change") && i + 1 < args.size()) {
      const std::string& v = args[++i];
      if (a == "--min-change") {
        char* end = nullptr;
        const double pct = std::strtod(v.c_str(), &end);
        if (end == v.c_str() || *end || !(pct >= 0 && pct < 100)) {
          std::cerr << "scorer diff: --min-change takes a percentage in [0, 100) (got '" << v << "')\n";
          return kExitBadInput;
        }
        opt.min_change = pct / 100;
      } else if (a == "--results-dir") {
        dir = v;
      } else if (v == "worse") {
        opt.fail_on = FailOn::worse;
      } else if (v == "any-change") {
        opt.fail_on = FailOn::any_change;
      } else {
        std::cerr << "scorer diff: --fail-on takes 'worse' or 'any-change' (got '" << v << "')\n";
        return kExitBadInput;
      }
    } else if (a.rfind("-", 0) == 0 || files.size() == 2) {
      std::cerr << "scorer diff: unexpected argument '" << a << "' (see scorer diff --help)\n";
      return kExitBadInput;
    } else {
      files.push_back(a);
    }
  }
  std::string latest_path = files.size() > 0 ? files[0] : dir + "/latest.json";
  std::string best_path = files.size() > 1 ? files[1] : dir + "/best.json";
  if (files.size() < 2 && !std::filesystem::exists(best_path)) {
    std::cerr << "scorer diff: no selected best (" << best_path
              << " does not exist; promote a run with `scorer select`)\n";
    return kExitBadInput;
  }
  try {
    RunResult latest = load_results(latest_path);
    RunResult best = load_results(best_path);
    std::cout << "diff of " << latest_path << " (latest) against " << best_path << " (selected)\n";
    return print_diff(std::cout, latest, best, opt);
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  }
}

}  // namespace scorer
