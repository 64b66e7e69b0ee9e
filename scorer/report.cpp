#include "scorer/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <vector>

#include "scorer/command_line.h"
#include "scorer/commands.h"
#include "scorer/exit_codes.h"
#include "scorer/file_io.h"
#include "scorer/results_json.h"

namespace scorer {
namespace {

namespace fs = std::filesystem;

const char* kLatestColour = "#2563eb";
const char* kBestColour = "#f59e0b";

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

std::string num(const char* f, double x) {
  char b[64];
  std::snprintf(b, sizeof b, f, x);
  return b;
}

std::string speedup_text(double p, double lo, double hi) {
  return num("%.3f", p) + "\u00d7 [" + num("%.3f", lo) + ", " + num("%.3f", hi) + "]";
}

bool scored(const ShapeResult* s) { return s && s->status == "ok" && s->speedup > 0; }

std::string status_text(const ShapeResult& s) {
  return "failed: " + s.status + (s.reason.empty() ? "" : " (" + s.reason + ")");
}

std::string run_label(const RunMeta& m) {
  std::string commit = m.git_commit.empty() ? "no commit" : m.git_commit.substr(0, 10);
  return m.started_at + ", " + commit + (m.git_dirty ? " (dirty)" : "");
}

struct Row {
  std::string name, regime;
  const ShapeResult* a = nullptr;  // latest
  const ShapeResult* b = nullptr;  // best
};

// Shapes grouped by regime, regimes in order of first appearance (latest
// first, then shapes only in the best).
std::vector<std::vector<Row>> group_rows(const RunResult& latest, const RunResult* best) {
  std::vector<Row> rows;
  std::map<std::string, size_t> at;
  for (const ShapeResult& s : latest.shapes) {
    at[s.shape.name] = rows.size();
    rows.push_back({s.shape.name, s.shape.regime, &s, nullptr});
  }
  if (best)
    for (const ShapeResult& s : best->shapes) {
      auto it = at.find(s.shape.name);
      if (it != at.end()) {
        rows[it->second].b = &s;
      } else {
        at[s.shape.name] = rows.size();
        rows.push_back({s.shape.name, s.shape.regime, nullptr, &s});
      }
    }
  std::vector<std::vector<Row>> groups;
  std::map<std::string, size_t> gi;
  for (const Row& r : rows) {
    if (!gi.count(r.regime)) {
      gi[r.regime] = groups.size();
      groups.emplace_back();
    }
    groups[gi[r.regime]].push_back(r);
  }
  return groups;
}

// Tick values for a log axis over [lo, hi]: the sparsest of these mantissa
// sets that gives at least four ticks, so that narrow ranges (0.9x to 1.3x)
// are labelled as well as wide ones (0.5x to 20x).
std::vector<double> log_ticks(double lo, double hi) {
  static const std::vector<std::vector<double>> sets = {
      {1, 2, 5},
      {1, 1.5, 2, 3, 5, 7},
      {1, 1.2, 1.4, 1.6, 1.8, 2, 2.5, 3, 4, 5, 6, 7, 8, 9},
      {1,   1.05, 1.1, 1.15, 1.2, 1.25, 1.3, 1.35, 1.4, 1.45, 1.5, 1.6, 1.7,
       1.8, 1.9,  2,   2.5,  3,   3.5,  4,   4.5,  5,   6,    7,   8,   9}};
  std::vector<double> t;
  for (const auto& set : sets) {
    t.clear();
    for (int e = static_cast<int>(std::floor(std::log10(lo))); e <= static_cast<int>(std::ceil(std::log10(hi))); ++e)
      for (double m : set) {
        double v = m * std::pow(10.0, e);
        if (v >= lo && v <= hi) t.push_back(v);
      }
    if (t.size() >= 4) break;
  }
  return t;
}

std::string tick_label(double v) {
  std::string s = num(v >= 10 ? "%.0f" : v >= 1 ? "%.2f" : "%.3f", v);
  while (s.find('.') != std::string::npos && (s.back() == '0' || s.back() == '.')) {
    bool dot = s.back() == '.';
    s.pop_back();
    if (dot) break;
  }
  return s + "\u00d7";
}

std::string chart(const RunResult& latest, const RunResult* best, const std::vector<std::vector<Row>>& groups) {
  const double W = 1320, label_w = 250, x0 = 260, x1 = W - 210, top = 92;
  const double group_h = 22, row_h = best ? 26 : 18, bar_h = best ? 9 : 12;

  double lo = 1, hi = 1;
  auto widen = [&](const ShapeResult* s) {
    if (!scored(s)) return;
    lo = std::min({lo, s->speedup, s->ci_lo > 0 ? s->ci_lo : s->speedup});
    hi = std::max({hi, s->speedup, s->ci_hi});
  };
  size_t n_rows = 0;
  for (const auto& g : groups)
    for (const Row& r : g) {
      widen(r.a);
      widen(r.b);
      ++n_rows;
    }
  lo /= 1.15;
  hi *= 1.15;
  auto X = [&](double v) { return x0 + (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo)) * (x1 - x0); };
  const double plot_h = groups.size() * group_h + n_rows * row_h;
  const double H = top + plot_h + 40;

  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" viewBox=\"0 0 " << W
    << " " << H << "\" font-family=\"system-ui, sans-serif\" font-size=\"12\">\n";
  o << "<text x=\"8\" y=\"22\" font-size=\"16\" font-weight=\"600\">Speedup over the baseline per shape"
       " (log scale, bars from 1.0\u00d7, whiskers: 95% interval)</text>\n";
  // Legend.
  double lx = 8;
  auto legend = [&](const char* colour, const std::string& text) {
    o << "<rect x=\"" << lx << "\" y=\"36\" width=\"14\" height=\"12\" fill=\"" << colour << "\"/>"
      << "<text x=\"" << lx + 20 << "\" y=\"46\">" << esc(text) << "</text>\n";
    lx += 40 + 6.5 * text.size();
  };
  legend(kLatestColour, "latest: " + run_label(latest.meta));
  if (best) legend(kBestColour, "selected best: " + run_label(best->meta));
  o << "<line x1=\"" << lx << "\" y1=\"42\" x2=\"" << lx + 24 << "\" y2=\"42\" stroke=\"#111\"/>"
    << "<line x1=\"" << lx << "\" y1=\"38\" x2=\"" << lx << "\" y2=\"46\" stroke=\"#111\"/>"
    << "<line x1=\"" << lx + 24 << "\" y1=\"38\" x2=\"" << lx + 24 << "\" y2=\"46\" stroke=\"#111\"/>"
    << "<text x=\"" << lx + 30 << "\" y=\"46\">95% interval</text>\n";

  // Grid and axis labels, top and bottom.
  for (double t : log_ticks(lo, hi)) {
    double x = X(t);
    o << "<line x1=\"" << x << "\" y1=\"" << top << "\" x2=\"" << x << "\" y2=\"" << top + plot_h
      << "\" stroke=\"#e5e7eb\"/>";
    for (double y : {top - 6, top + plot_h + 16})
      o << "<text x=\"" << x << "\" y=\"" << y << "\" text-anchor=\"middle\" fill=\"#444\">" << tick_label(t)
        << "</text>";
    o << "\n";
  }

  auto bar = [&](const ShapeResult* s, const std::string& name, const char* cls, const char* colour, double y) {
    if (!s) {
      o << "<text class=\"absent\" x=\"" << X(1) + 6 << "\" y=\"" << y + bar_h - 2
        << "\" font-size=\"10\" fill=\"#6b7280\" font-style=\"italic\">not in this run</text>\n";
      return;
    }
    if (!scored(s)) {
      o << "<text class=\"failed\" data-shape=\"" << esc(name) << "\" x=\"" << X(1) + 6 << "\" y=\"" << y + bar_h - 2
        << "\" font-size=\"10\" fill=\"#b91c1c\" font-weight=\"600\">\u2716 " << esc(status_text(*s)) << "</text>\n";
      return;
    }
    double xa = X(1), xb = X(s->speedup), yc = y + bar_h / 2;
    o << "<rect class=\"bar " << cls << "\" data-shape=\"" << esc(name) << "\" x=\"" << std::min(xa, xb) << "\" y=\""
      << y << "\" width=\"" << std::max(std::abs(xb - xa), 1.0) << "\" height=\"" << bar_h << "\" fill=\"" << colour
      << "\"><title>" << esc(name) << ": " << speedup_text(s->speedup, s->ci_lo, s->ci_hi) << "</title></rect>";
    if (s->ci_lo > 0 && s->ci_hi > 0) {
      double wl = X(s->ci_lo), wh = X(s->ci_hi);
      o << "<line x1=\"" << wl << "\" y1=\"" << yc << "\" x2=\"" << wh << "\" y2=\"" << yc
        << "\" stroke=\"#111\"/><line x1=\"" << wl << "\" y1=\"" << yc - 4 << "\" x2=\"" << wl << "\" y2=\"" << yc + 4
        << "\" stroke=\"#111\"/><line x1=\"" << wh << "\" y1=\"" << yc - 4 << "\" x2=\"" << wh << "\" y2=\"" << yc + 4
        << "\" stroke=\"#111\"/>";
    }
    o << "<text x=\"" << x1 + 10 << "\" y=\"" << y + bar_h - 1 << "\" font-size=\"10\" fill=\"" << colour << "\">"
      << speedup_text(s->speedup, s->ci_lo, s->ci_hi) << "</text>\n";
  };

  auto regime_of = [](const RunResult& run, const std::string& name) -> const RegimeResult* {
    for (const RegimeResult& r : run.regimes)
      if (r.name == name) return &r;
    return nullptr;
  };
  double y = top;
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const std::string& regime = groups[gi][0].regime;
    double gh = group_h + groups[gi].size() * row_h;
    o << "<rect x=\"0\" y=\"" << y << "\" width=\"" << W << "\" height=\"" << gh << "\" fill=\""
      << (gi % 2 ? "#ffffff" : "#f3f4f6") << "\"/>\n";
    o << "<text class=\"regime\" x=\"8\" y=\"" << y + 16 << "\" font-weight=\"700\" font-size=\"13\">regime "
      << esc(regime) << "</text>";
    std::string gm;
    if (const RegimeResult* r = regime_of(latest, regime); r && r->shapes)
      gm += "<tspan fill=\"" + std::string(kLatestColour) + "\">" + num("%.3f", r->speedup.point) + "\u00d7</tspan>";
    if (best)
      if (const RegimeResult* r = regime_of(*best, regime); r && r->shapes)
        gm += std::string(gm.empty() ? "" : " / ") + "<tspan fill=\"" + kBestColour + "\">" +
              num("%.3f", r->speedup.point) + "\u00d7</tspan>";
    if (!gm.empty())
      o << "<text x=\"" << x1 + 10 << "\" y=\"" << y + 16 << "\" font-weight=\"600\">geomean " << gm << "</text>";
    o << "\n";
    y += group_h;
    for (const Row& r : groups[gi]) {
      o << "<text x=\"" << label_w << "\" y=\"" << y + row_h / 2 + 4 << "\" text-anchor=\"end\">" << esc(r.name)
        << "</text>\n";
      bar(r.a, r.name, "latest", kLatestColour, y + 3);
      if (best) bar(r.b, r.name, "best", kBestColour, y + 4 + bar_h);
      y += row_h;
    }
  }
  // The baseline line last, so that it is drawn over the bands and bars.
  o << "<line x1=\"" << X(1) << "\" y1=\"" << top - 2 << "\" x2=\"" << X(1) << "\" y2=\"" << top + plot_h + 2
    << "\" stroke=\"#111\" stroke-width=\"2\"/>\n";
  o << "<text x=\"" << X(1) << "\" y=\"" << top - 20 << "\" text-anchor=\"middle\" font-weight=\"600\">"
    << "baseline</text>\n";
  o << "</svg>\n";
  return o.str();
}

std::string aggregate_line(const char* who, const RunResult& run) {
  std::string s = std::string(who) + ": aggregate " +
                  speedup_text(run.aggregate.point, run.aggregate.lo, run.aggregate.hi) + " over " +
                  std::to_string(run.shapes.size() - run.shapes_failed) + " scored shapes";
  if (run.shapes_failed) s += " (" + std::to_string(run.shapes_failed) + " failed)";
  if (!run.correctness_passed) s += "; correctness FAILED";
  return s;
}

std::string table(const std::vector<std::vector<Row>>& groups, bool with_best) {
  bool recorded = false;
  for (const auto& g : groups)
    for (const Row& r : g) recorded = recorded || (r.a && r.a->recorded_us > 0);
  std::ostringstream o;
  o << "<table>\n<tr><th>regime</th><th>shape</th><th>dims</th><th>latest speedup [95%]</th>"
       "<th>candidate \u00b5s</th><th>baseline \u00b5s</th><th>% of floor</th>";
  if (recorded) o << "<th>recorded \u00b5s</th><th>vs recorded</th>";
  if (with_best) o << "<th>selected speedup [95%]</th><th>change</th>";
  o << "</tr>\n";
  for (const auto& g : groups)
    for (const Row& r : g) {
      const ShapeResult* s = r.a ? r.a : r.b;
      o << "<tr><td>" << esc(r.regime) << "</td><td>" << esc(r.name) << "</td><td class=\"dims\">"
        << esc(s->shape.dims_string()) << "</td>";
      if (!r.a) {
        o << "<td class=\"na\">not in this run</td><td></td><td></td><td></td>";
      } else if (!scored(r.a)) {
        o << "<td class=\"fail\">" << esc(status_text(*r.a)) << "</td><td></td><td></td><td></td>";
      } else {
        o << "<td>" << speedup_text(r.a->speedup, r.a->ci_lo, r.a->ci_hi) << "</td><td>"
          << num("%.2f", r.a->candidate_median_us) << "</td><td>" << num("%.2f", r.a->baseline_median_us) << "</td><td>"
          << num("%.1f", 100 * r.a->pct_of_floor) << "</td>";
      }
      if (recorded) {
        if (r.a && r.a->recorded_us > 0)
          o << "<td>" << num("%.1f", r.a->recorded_us) << "</td><td>"
            << (r.a->recorded_speedup > 0 ? num("%.3f", r.a->recorded_speedup) + "\u00d7" : "") << "</td>";
        else
          o << "<td></td><td></td>";
      }
      if (with_best) {
        if (!r.b)
          o << "<td class=\"na\">not in the selected run</td><td></td>";
        else if (!scored(r.b))
          o << "<td class=\"fail\">" << esc(status_text(*r.b)) << "</td><td></td>";
        else
          o << "<td>" << speedup_text(r.b->speedup, r.b->ci_lo, r.b->ci_hi) << "</td><td>"
            << (scored(r.a) ? num("%+.1f%%", 100 * (r.a->speedup / r.b->speedup - 1)) : "") << "</td>";
      }
      o << "</tr>\n";
    }
  o << "</table>\n";
  return o.str();
}

std::string meta_table(const RunResult& latest, const RunResult* best) {
  std::ostringstream o;
  o << "<table class=\"meta\">\n<tr><th></th><th>latest</th>" << (best ? "<th>selected best</th>" : "") << "</tr>\n";
  auto row = [&](const char* k, const std::string& a, const std::string& b) {
    o << "<tr><th>" << k << "</th><td>" << esc(a) << "</td>" << (best ? "<td>" + esc(b) + "</td>" : "") << "</tr>\n";
  };
  const RunMeta& a = latest.meta;
  const RunMeta b = best ? best->meta : RunMeta{};
  row("started", a.started_at, b.started_at);
  row("commit", a.git_commit + (a.git_dirty ? " (dirty)" : ""), b.git_commit + (b.git_dirty ? " (dirty)" : ""));
  row("submission sha256", a.submission_sha256, b.submission_sha256);
  row("scorer version", a.scorer_version, b.scorer_version);
  row("GPU", a.gpu_name, b.gpu_name);
  row("timing mode", a.mode, b.mode);
  row("shapes file", a.shapes_path + " " + a.shapes_sha256.substr(0, 12),
      b.shapes_path + " " + b.shapes_sha256.substr(0, 12));
  o << "</table>\n";
  return o.str();
}

}  // namespace

std::string render_report(const RunResult& latest, const RunResult* best) {
  auto groups = group_rows(latest, best);
  std::ostringstream o;
  o << "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Scoring report "
    << esc(latest.meta.started_at)
    << "</title>\n<style>\n"
       "body { font-family: system-ui, sans-serif; margin: 16px; color: #111; }\n"
       "figure { margin: 0; }\n"
       "figcaption { margin: 0 0 8px; line-height: 1.4; font-size: 14px; }\n"
       "table { border-collapse: collapse; margin: 12px 0; font-size: 12px; }\n"
       "th, td { border: 1px solid #d1d5db; padding: 3px 8px; text-align: left; white-space: nowrap; }\n"
       "td { font-variant-numeric: tabular-nums; }\n"
       "td.dims { white-space: normal; min-width: 240px; }\n"
       ".fail { color: #b91c1c; font-weight: 600; }\n"
       ".na { color: #6b7280; font-style: italic; }\n"
       "</style>\n</head>\n<body>\n<figure>\n"
    // The caption comes first so that a screenshot of the top of the page
    // shows the aggregates.
    << "<figcaption>\n<div style=\"color:" << kLatestColour << "\">" << esc(aggregate_line("latest", latest))
    << "</div>\n";
  if (best)
    o << "<div style=\"color:" << kBestColour << "\">" << esc(aggregate_line("selected best", *best)) << "</div>\n";
  if (latest.recorded_aggregate > 0)
    o << "<div>latest against recorded times: " << num("%.3f", latest.recorded_aggregate) << "\u00d7 (geometric mean"
      << " over the shapes with one; " << esc(latest.recorded_source) << ")</div>\n";
  o << "<div>Speedup = baseline time / candidate time, median of paired trials; regimes and the aggregate"
       " are geometric means over scored shapes.</div>\n</figcaption>\n"
    << chart(latest, best, groups) << "</figure>\n"
    << table(groups, best != nullptr) << meta_table(latest, best) << "</body>\n</html>\n";
  return o.str();
}

int report_main(const std::vector<std::string>& args) {
  ReportArgs a;
  if (const int rc = parse_report_args(args, &a); rc != kGoOn) return rc;
  const std::string& dir = a.results_dir;
  std::string latest_path = a.latest, best_path = a.best, out = a.out;
  if (latest_path.empty()) latest_path = dir + "/latest.json";
  if (best_path.empty() && fs::exists(dir + "/best.json")) best_path = dir + "/best.json";
  if (out.empty()) out = dir + "/report.html";
  try {
    RunResult latest = load_results(latest_path);
    RunResult best;
    if (!best_path.empty()) best = load_results(best_path);
    std::string html = render_report(latest, best_path.empty() ? nullptr : &best);
    write_file_atomic(out, html);
    std::cout << "wrote " << out << " (" << latest_path << (best_path.empty() ? "" : " beside " + best_path) << ")\n";
    return kExitOk;
  } catch (const InputError& e) {
    std::cerr << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::exception& e) {
    std::cerr << "scorer report: " << e.what() << "\n";
    return kExitBadInput;
  }
}

}  // namespace scorer
