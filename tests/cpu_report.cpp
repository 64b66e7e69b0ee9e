// scorer report: one bar per scored shape for each run, failed shapes marked,
// no external resources, and bad input writes nothing.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "scorer/commands.h"
#include "scorer/exit_codes.h"
#include "scorer/report.h"
#include "scorer/results_json.h"
#include "scorer/stats.h"

namespace {

using namespace scorer;
namespace fs = std::filesystem;

// A run of the given shapes (name, regime, speedup), fresh random trials.
RunResult make_run(const std::vector<std::tuple<std::string, std::string, double>>& shapes,
                   const std::string& started_at) {
  static std::mt19937_64 rng(std::random_device{}());
  std::normal_distribution<double> n(0, 0.04);
  RunResult run;
  run.meta.started_at = started_at;
  run.meta.gpu_name = "NVIDIA H200";
  run.meta.git_commit = "feedface0123";
  for (const auto& [name, regime, speedup] : shapes) {
    ShapeResult r;
    r.shape.name = name;
    r.shape.regime = regime;
    r.shape.M = 32, r.shape.N = 4096, r.shape.K = 4096;
    r.floor_us = 8;
    scorer::ReplicateResult& rep = r.replicates.emplace_back();
    rep.index = 1;
    for (int i = 0; i < 17; ++i) {
      rep.baseline_us.push_back(40 * std::exp(n(rng)));
      rep.candidate_us.push_back(40 / speedup * std::exp(n(rng)));
    }
    run.shapes.push_back(r);
  }
  compute_statistics(run);
  return run;
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("report: one bar per shape for the run and the best, grouped by regime") {
  RunResult latest = make_run({{"dense_qkv", "dense-32", 1.4},
                               {"dense_o", "dense-32", 0.8},
                               {"router_t1", "router", 2.5},
                               {"moe_m1", "moe", 3.0},
                               {"moe_new", "moe", 1.1}},
                              "2025-06-02T09:00:00Z");
  latest.shapes[3].status = "incorrect";
  latest.shapes[3].reason = "rel_l2 <bad> & worse";
  compute_statistics(latest);
  RunResult best = make_run({{"dense_qkv", "dense-32", 1.2},
                             {"dense_o", "dense-32", 0.9},
                             {"router_t1", "router", 2.0},
                             {"moe_m1", "moe", 2.2},
                             {"moe_old", "moe", 1.3}},
                            "2025-05-30T18:00:00Z");

  const std::string html = render_report(latest, &best);
  CHECK(count(html, "class=\"bar latest\"") == 4);
  CHECK(count(html, "class=\"bar best\"") == 5);
  for (const char* s : {"dense_qkv", "dense_o", "router_t1", "moe_new"})
    CHECK_MESSAGE(count(html, std::string("class=\"bar latest\" data-shape=\"") + s + "\"") == 1, s);
  for (const char* s : {"dense_qkv", "dense_o", "router_t1", "moe_m1", "moe_old"})
    CHECK_MESSAGE(count(html, std::string("class=\"bar best\" data-shape=\"") + s + "\"") == 1, s);
  CHECK(count(html, "class=\"failed\" data-shape=\"moe_m1\"") == 1);
  CHECK(html.find("failed: incorrect (rel_l2 &lt;bad&gt; &amp; worse)") != std::string::npos);
  CHECK(html.find("<bad>") == std::string::npos);
  CHECK(count(html, "class=\"regime\"") == 3);
  CHECK(html.find("latest: 2025-06-02T09:00:00Z") != std::string::npos);
  CHECK(html.find("selected best: 2025-05-30T18:00:00Z") != std::string::npos);
  CHECK(html.find(">baseline</text>") != std::string::npos);
  // The caption and the table carry the numbers.
  char agg[64];
  std::snprintf(agg, sizeof agg, "aggregate %.3f\u00d7 [%.3f, %.3f]", latest.aggregate.point, latest.aggregate.lo,
                latest.aggregate.hi);
  CHECK(html.find(agg) != std::string::npos);
  CHECK(html.find("(1 failed)") != std::string::npos);
  CHECK(count(html, "<tr><td>") == 6);
  // Self-contained.
  for (const char* external : {"<script", "<link", "src=", "href=", "url(", "@import"})
    CHECK_MESSAGE(html.find(external) == std::string::npos, external);

  const std::string alone = render_report(latest, nullptr);
  CHECK(count(alone, "class=\"bar latest\"") == 4);
  CHECK(count(alone, "class=\"bar best\"") == 0);
}

TEST_CASE("scorer report: writes the page, and a truncated run writes nothing") {
  std::string t = (fs::temp_directory_path() / "cpu_report-XXXXXX").string();
  REQUIRE(mkdtemp(t.data()) != nullptr);
  const fs::path dir = t;
  RunResult run = make_run({{"a", "r", 1.5}, {"b", "r", 1.1}}, "2025-06-01T00:00:00Z");
  save_results(run, (dir / "latest.json").string());
  save_results(run, (dir / "best.json").string());
  {
    std::ostringstream captured;
    std::streambuf* old = std::cout.rdbuf(captured.rdbuf());
    int rc = report_main({"--results-dir", dir.string()});
    std::cout.rdbuf(old);
    CHECK(rc == kExitOk);
  }
  REQUIRE(fs::exists(dir / "report.html"));
  std::ifstream f(dir / "report.html");
  std::stringstream html;
  html << f.rdbuf();
  CHECK(count(html.str(), "class=\"bar best\"") == 2);

  std::string text = results_to_json(run).dump(2);
  std::ofstream(dir / "cut.json") << text.substr(0, text.size() / 3);
  std::ostringstream captured;
  std::streambuf* old = std::cerr.rdbuf(captured.rdbuf());
  int rc = report_main({(dir / "cut.json").string(), "--out", (dir / "cut.html").string()});
  std::cerr.rdbuf(old);
  CHECK(rc == kExitBadInput);
  CHECK(captured.str().rfind((dir / "cut.json").string() + ":", 0) == 0);
  CHECK(count(captured.str(), "\n") == 1);
  CHECK_FALSE(fs::exists(dir / "cut.html"));
  fs::remove_all(dir);
}
