#include "table.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace scorer {
namespace {

constexpr size_t kNoteWidth = 60;

std::string fmt(const char* format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, x);
  return buf;
}

// Microseconds: two decimals for short times, one for long ones.
std::string us(double x) { return x > 0 ? fmt(x < 100 ? "%.2f" : "%.1f", x) : "-"; }

std::string speedup(double x) { return fmt("%.4fx", x); }

std::string interval(double lo, double hi) {
  return "[" + fmt("%.4f", lo) + ", " + fmt("%.4f", hi) + "]";
}

std::string count(int n, const char* noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// Columns are padded by characters on screen, and "µ" is two bytes of UTF-8.
size_t display_width(const std::string& s) {
  return size_t(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xc0) != 0x80; }));
}

std::string pad(const std::string& s, size_t width, bool right) {
  const std::string fill(width - std::min(width, display_width(s)), ' ');
  return right ? fill + s : s + fill;
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

}  // namespace

void print_table(std::ostream& os, const RunResult& run) {
  const std::vector<std::string> head = {"shape",
                                         "regime",
                                         "correct",
                                         "baseline µs",
                                         "submission µs",
                                         "% of floor",
                                         "speedup [95% interval]",
                                         "note"};
  const std::vector<bool> right = {false, false, false, true, true, true, false, false};
  std::vector<std::vector<std::string>> rows;
  for (const ShapeResult& r : run.shapes) {
    const bool ok = r.status == "ok";
    rows.push_back({r.shape.name, r.shape.regime, correct(r), ok ? us(r.baseline_median_us) : "-",
                    ok ? us(r.candidate_median_us) : "-",
                    ok && r.pct_of_floor > 0 ? fmt("%.1f%%", 100 * r.pct_of_floor) : "-",
                    ok ? speedup(r.speedup) + " " + interval(r.ci_lo, r.ci_hi) : "-", note(r)});
  }
  std::vector<size_t> width(head.size());
  for (size_t c = 0; c < head.size(); ++c) {
    width[c] = display_width(head[c]);
    for (const auto& row : rows) width[c] = std::max(width[c], display_width(row[c]));
  }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c)
      line += (c ? "  " : "") + (c + 1 == row.size() ? row[c] : pad(row[c], width[c], right[c]));
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << "\n";
  };
  print_row(head);
  for (const auto& row : rows) print_row(row);
  os << "\n";

  size_t name_width = 0;
  for (const RegimeResult& g : run.regimes)
    name_width = std::max(name_width, display_width(g.name));
  const bool graph = std::any_of(run.shapes.begin(), run.shapes.end(), [](const ShapeResult& r) {
    return !pooled(r, &ReplicateResult::graph_candidate_us).empty();
  });
  const bool recorded = std::any_of(run.shapes.begin(), run.shapes.end(),
                                    [](const ShapeResult& r) { return r.recorded_us > 0; });
  auto figure = [](const Interval& i) {
    return i.point > 0 ? speedup(i.point) + "  95% " + interval(i.lo, i.hi) : std::string("-");
  };
  for (const RegimeResult& g : run.regimes) {
    os << "regime " << pad(g.name, name_width, false) << "  " << figure(g.speedup) << "  "
       << count(g.shapes, "shape") << (g.failed ? ", " + std::to_string(g.failed) + " failed" : "")
       << "\n";
  }
  if (graph) {
    for (const RegimeResult& g : run.regimes)
      os << "regime " << pad(g.name, name_width, false) << "  (graph)  " << figure(g.graph_speedup)
         << "\n";
    os << "aggregate (graph) " << figure(run.graph_aggregate) << "\n";
  }
  if (recorded) {
    for (const RegimeResult& g : run.regimes)
      os << "regime " << pad(g.name, name_width, false) << "  vs recorded  "
         << (g.recorded_speedup > 0 ? speedup(g.recorded_speedup) : "-") << "\n";
    os << "aggregate vs recorded "
       << (run.recorded_aggregate > 0 ? speedup(run.recorded_aggregate) : "-")
       << (run.recorded_source.empty() ? "" : "  (" + run.recorded_source + ")") << "\n";
  }
  os << "aggregate " << figure(run.aggregate) << "  "
     << (run.correctness_passed
             ? "correctness passed, " + count(run.flags, "flag")
             : "correctness FAILED, " + count(run.shapes_failed, "shape") + " failed")
     << "\n";
}

}  // namespace scorer
