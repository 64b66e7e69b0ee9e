// print_diff: the comparison of two runs as the user reads it (diff.h).
#include <cmath>

#include "scorer/diff.h"
#include "scorer/exit_codes.h"
#include "scorer/text_table.h"

namespace scorer {
namespace {

// "-" for no speedup: a regime none of whose shapes was scored stores 0.
std::string speedup_text(const Interval& i) {
  if (!(i.point > 0)) return "-";
  return format_number("%.4fx", i.point) + " [" + format_number("%.4f", i.lo) + ", " + format_number("%.4f", i.hi) +
         "]";
}

// "+1.2%"; a change that rounds to zero reads +0.0%, never -0.0%.
std::string percent_text(double ratio) {
  const double tenths = std::round((ratio - 1) * 1000);
  return format_number("%+.1f%%", tenths == 0 ? 0.0 : tenths / 10);
}

std::string interval_text(const Interval& c) {
  return percent_text(c.point) + " [" + percent_text(c.lo) + ", " + percent_text(c.hi) + "]";
}

std::string shape_cell(const ShapeResult* s) {
  if (!s) return "-";
  if (s->status != "ok") return "failed (" + s->status + ")";
  if (!(s->candidate_median_us > 0)) return "failed (no trials)";
  return speedup_text({s->speedup, s->ci_lo, s->ci_hi});
}

std::string run_line(const RunMeta& m) {
  std::string commit = m.git_commit.empty() ? "no commit" : "commit " + m.git_commit.substr(0, 12);
  return m.started_at + ", " + commit + (m.git_dirty ? " (dirty)" : "") + ", " + m.gpu_name + ", " + m.mode;
}

const RegimeResult* find_regime(const RunResult& run, const std::string& name) {
  for (const RegimeResult& r : run.regimes)
    if (r.name == name) return &r;
  return nullptr;
}

std::string plural(int n, const std::string& noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

std::string failed_text(int failed_latest) { return plural(failed_latest, "shape") + " failed in latest"; }

// The verdict of a regime or the aggregate and what it rests on: "worse (2
// shapes failed in latest; submission time -1.2% [...] over 3 shapes scored
// in both; baseline time +0.4%)".
std::string group_text(Verdict v, int failed_latest, int shapes, const Change& c) {
  if (!failed_latest && !shapes) return "no shape scored in both";
  std::string why;
  if (failed_latest) why = failed_text(failed_latest) + "; ";
  why += shapes ? "submission time " + interval_text(c.time) + " over " + plural(shapes, "shape") +
                      " scored in both; baseline time " + percent_text(c.baseline_change)
                : "no shape scored in both";
  return std::string(verdict_name(v)) + " (" + why + ")";
}

std::string min_change_text(const Diff& d, const DiffOptions& opt) {
  const std::string m = format_number("%.2g%%", 100 * d.min_change);
  if (!std::isnan(opt.min_change)) return "changes count from " + m + " (--min-change)";
  if (d.min_change_measured)
    return "changes count from " + m + ": " + format_number("%g", kMinChangeStandardErrors) +
           " standard errors of a typical shape's change, from the submission's replicate-to-replicate spread in "
           "these runs (--min-change sets it)";
  return "changes count from " + m + ": the runs have too few replicates to measure it (--min-change sets it)";
}

}  // namespace

int print_diff(std::ostream& out, const RunResult& latest, const RunResult& best, const DiffOptions& opt,
               std::ostream& err) {
  const Diff d = compute_diff(latest, best, opt);
  if (!d.incomparable.empty()) {
    std::string why;
    for (const std::string& w : d.incomparable) why += (why.empty() ? "" : "; ") + w;
    if (!opt.force) {
      err << "scorer diff: refusing to compare: " << why << " (--force compares anyway)\n";
      return kExitBadInput;
    }
    out << "comparing anyway (--force) although the runs differ: " << why << "\n";
  }

  out << "latest:   " << run_line(latest.meta) << "\n"
      << "selected: " << run_line(best.meta) << "\n"
      << "verdicts from the submission's own times (latest / selected, 95% intervals); the baselines' times are "
         "shown, never decide\n\n";
  TextTable table(
      {"shape", "regime", "speedup latest", "speedup selected", "submission time", "verdict", "baseline time"});
  int within_run_only = 0;
  for (const ShapeDiff& s : d.shapes) {
    std::string change, verdict, baseline;
    switch (s.presence) {
      case Presence::both:
        change = interval_text(s.change.time);
        verdict = verdict_name(s.verdict);
        baseline = percent_text(s.change.baseline_change);
        within_run_only += s.change.replicates < 2;
        break;
      case Presence::only_latest:
        verdict = "only in latest";
        break;
      case Presence::only_best:
        verdict = "only in selected";
        break;
      case Presence::failed_latest:
        verdict = "worse: failed in latest";
        break;
      case Presence::failed_best:
        verdict = "better: failed in selected";
        break;
      case Presence::failed_both:
        verdict = "failed in both";
        break;
    }
    table.add({s.name, s.regime, shape_cell(s.latest), shape_cell(s.best), change, verdict, baseline});
  }
  table.print(out);
  out << "\n";

  for (const RegimeDiff& r : d.regimes) {
    const RegimeResult* a = find_regime(latest, r.name);
    const RegimeResult* b = find_regime(best, r.name);
    out << "regime " << r.name << " " << (a ? speedup_text(a->speedup) : "-") << " vs selected "
        << (b ? speedup_text(b->speedup) : "-") << ": " << group_text(r.verdict, r.failed_latest, r.shapes, r.change)
        << "\n";
  }
  out << "aggregate " << speedup_text(latest.aggregate) << " vs selected " << speedup_text(best.aggregate) << ": "
      << group_text(d.aggregate, d.failed_latest, d.shapes_compared, d.aggregate_change) << "\n";
  out << min_change_text(d, opt) << "\n";
  if (within_run_only)
    out << "NOTE: " << plural(within_run_only, "shape")
        << " compared from one replicate in a run: their intervals cover the noise within each run only\n";

  const char* although = d.aggregate == Verdict::better ? " although the aggregate improved" : "";
  for (const RegimeDiff& r : d.regimes)
    if (r.verdict == Verdict::worse)
      out << "WARNING: regime " << r.name << " got worse ("
          << (r.failed_latest ? failed_text(r.failed_latest) : "submission time " + interval_text(r.change.time)) << ")"
          << although << "\n";
  for (const ShapeDiff& s : d.shapes)
    if (s.presence == Presence::failed_latest)
      out << "WARNING: shape " << s.name << " failed in latest (" << s.latest->status
          << (s.latest->reason.empty() ? "" : ": " + s.latest->reason) << ")" << although << "\n";

  if ((opt.fail_on == FailOn::worse && d.any_worse()) || (opt.fail_on == FailOn::any_change && d.any_change()))
    return kExitIncorrect;
  return kExitOk;
}

}  // namespace scorer
