#include "table.h"

#include <algorithm>
#include <string>
#include <vector>

#include "scorer/aggregate_rule.h"
#include "scorer/stats.h"
#include "scorer/text_table.h"

namespace scorer {
namespace {

constexpr size_t kNoteWidth = 60;

// Microseconds: two decimals for short times, one for long ones.
std::string us(double x) { return x > 0 ? format_number(x < 100 ? "%.2f" : "%.1f", x) : "-"; }

std::string speedup(double x) { return format_number("%.4fx", x); }

std::string interval(double lo, double hi) {
  return "[" + format_number("%.4f", lo) + ", " + format_number("%.4f", hi) + "]";
}

std::string count(int n, const char* noun) { return std::to_string(n) + " " + noun + (n == 1 ? "" : "s"); }

std::string pad(const std::string& s, size_t width) {
  return s + std::string(width - std::min(width, display_width(s)), ' ');
}

std::string shorten(const std::string& s, size_t width) {
  const std::string line = s.substr(0, s.find('\n'));
  return line.size() <= width ? line : line.substr(0, width - 3) + "...";
}

std::string note(const ShapeResult& r) {
  if (r.status != "ok") return shorten(r.reason, kNoteWidth);
  std::string n;
  for (const std::string& f : r.flags) n += (n.empty() ? "" : "; ") + f;
  if (!r.converged) n += (n.empty() ? "" : "; ") + std::string("not converged");
  return shorten(n, kNoteWidth);
}

std::string correct(const ShapeResult& r) {
  if (r.status == "ok") return "yes";
  if (r.status == "incorrect") return "NO";
  return r.status;
}

// What the intervals cover, in one line.
std::string coverage_line(const RunResult& run) {
  const int r = interval_replicates(run);
  if (r == 0) return "";
  if (r == 1)
    return "95% intervals from one replicate per shape: they cover the noise within this run only, not a rerun's";
  return "95% intervals from " + std::to_string(r) +
         " replicates per shape (separate processes, fresh inputs): they cover the noise within each replicate "
         "and the offsets between them";
}

}  // namespace

void print_table(std::ostream& os, const RunResult& run) {
  TextTable table(
      {"shape", "regime", "correct", "baseline µs", "submission µs", "% of floor", "speedup [95% interval]", "note"},
      {TextTable::Align::left, TextTable::Align::left, TextTable::Align::left, TextTable::Align::right,
       TextTable::Align::right, TextTable::Align::right, TextTable::Align::left, TextTable::Align::left});
  for (const ShapeResult& r : run.shapes) {
    const bool ok = r.status == "ok";
    table.add({r.shape.name, r.shape.regime, correct(r), ok ? us(r.baseline_median_us) : "-",
               ok ? us(r.candidate_median_us) : "-",
               ok && r.pct_of_floor > 0 ? format_number("%.1f%%", 100 * r.pct_of_floor) : "-",
               ok && r.speedup > 0 ? speedup(r.speedup) + " " + interval(r.ci_lo, r.ci_hi) : "-", note(r)});
  }
  table.print(os);
  const std::string covers = coverage_line(run);
  if (!covers.empty()) os << covers << "\n";
  os << "\n";

  size_t name_width = 0;
  for (const RegimeResult& g : run.regimes) name_width = std::max(name_width, display_width(g.name));
  const bool graph = std::any_of(run.shapes.begin(), run.shapes.end(), [](const ShapeResult& r) {
    return !pooled(r, &ReplicateResult::graph_candidate_us).empty();
  });
  const bool recorded =
      std::any_of(run.shapes.begin(), run.shapes.end(), [](const ShapeResult& r) { return r.recorded_us > 0; });
  auto figure = [](const Interval& i) {
    return i.point > 0 ? speedup(i.point) + "  95% " + interval(i.lo, i.hi) : std::string("-");
  };
  for (const RegimeResult& g : run.regimes) {
    os << "regime " << pad(g.name, name_width) << "  " << figure(g.speedup) << "  " << count(g.shapes, "shape")
       << (g.failed ? ", " + std::to_string(g.failed) + " failed" : "") << "\n";
  }
  if (graph) {
    for (const RegimeResult& g : run.regimes)
      os << "regime " << pad(g.name, name_width) << "  (graph)  " << figure(g.graph_speedup) << "\n";
    os << "aggregate (graph) " << figure(run.graph_aggregate) << "\n";
  }
  if (recorded) {
    for (const RegimeResult& g : run.regimes)
      os << "regime " << pad(g.name, name_width) << "  vs recorded  "
         << (g.recorded_speedup > 0 ? speedup(g.recorded_speedup) : "-") << "\n";
    os << "aggregate vs recorded " << (run.recorded_aggregate > 0 ? speedup(run.recorded_aggregate) : "-")
       << (run.recorded_source.empty() ? "" : "  (" + run.recorded_source + ")") << "\n";
  }
  const std::string outcome = run.correctness_passed
                                  ? "correctness passed, " + count(run.flags, "flag")
                                  : "correctness FAILED, " + count(run.shapes_failed, "shape") + " failed";
  const ScoringRule rule = rule_of(run.meta);
  if (run.aggregate_defined) {
    os << "aggregate " << figure(run.aggregate) << "  " << rule_name(rule, true) << "  " << outcome << "\n";
    os << "  " << rule_name(rule, false) << " instead: " << figure(run.other_aggregate) << "\n";
  } else if (run.shapes_failed) {
    os << "no aggregate: " << count(run.shapes_failed, "shape") << " failed  " << outcome << "\n";
  } else {
    os << "aggregate -  " << outcome << "\n";
  }
}

}  // namespace scorer
