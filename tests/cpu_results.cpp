// Results files: every field survives a round trip; saving is atomic; the
// derived numbers are the trials'. (Bad files: cpu_results_errors.cpp; the
// table printed from them: cpu_table.cpp.)
#include <doctest/doctest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "scorer/results_json.h"
#include "scorer/stats.h"
#include "tests/results_fixture.h"

using namespace results_test;

TEST_CASE("results: every field survives a round trip through JSON and a file") {
  const RunResult run = filled_run();
  check_same(scorer::results_from_json(scorer::results_to_json(run), "mem"), run);

  TempDir dir;
  const std::string path = dir.file("a/b/latest.json");  // directories are created
  scorer::save_results(run, path);
  check_same(scorer::load_results(path), run);

  // Pretty-printed with two spaces; keys are the C++ field names.
  const std::string text = read_file(path);
  CHECK(text.rfind("{\n  \"", 0) == 0);
  CHECK(text.find("\n    \"schema_version\": 2,\n") != std::string::npos);
  CHECK(text.find("\"candidate_us\": [") != std::string::npos);
  CHECK(text.back() == '\n');
}

TEST_CASE("results: a file from before the interrupted field reads as a whole run") {
  json j = scorer::results_to_json(filled_run());
  j["meta"].erase("interrupted");
  CHECK_FALSE(scorer::results_from_json(j, "mem").meta.interrupted);
}

TEST_CASE("results: a shape's dims hold only its op's dims") {
  const RunResult run = filled_run();
  const json pooler = scorer::shape_to_json(run.shapes[0].shape);
  CHECK(pooler.at("dims") == json({{"B", 3}, {"H", 64}, {"min_len", 2}, {"max_len", 40}}));
  const json dense = scorer::shape_to_json(run.shapes[1].shape);
  CHECK(dense.at("dims") == json({{"M", 5}, {"N", 7}, {"K", 16}}));
  CHECK(dense.at("op") == "dense");
  const json moe = scorer::shape_to_json(run.shapes[2].shape);
  CHECK(moe.at("dims").size() == 7);
  CHECK(moe.at("dims").at("ep_rank") == 2);
  check_same(scorer::shape_from_json(moe, "child"), run.shapes[2].shape);
  check_same(scorer::shape_result_from_json(scorer::shape_result_to_json(run.shapes[1]), "child"), run.shapes[1]);

  // Without source text, errors name the file and the field but no line.
  json bad = dense;
  bad["dims"]["E"] = 4;
  CHECK_THROWS_WITH_AS(scorer::shape_from_json(bad, "child"), "child: field 'dims.E': unknown field", InputError);
  bad = dense;
  bad["dims"].erase("K");
  CHECK_THROWS_WITH_AS(scorer::shape_from_json(bad, "child"), "child: field 'dims.K': missing", InputError);
  // A shape's process scores one replicate, whichever: replicate 3 alone reads back.
  ShapeResult third = run.shapes[1];
  third.replicates.erase(third.replicates.begin(), third.replicates.end() - 1);
  third.replicates[0].index = 3;
  CHECK(scorer::shape_result_from_json(scorer::shape_result_to_json(third), "child").replicates.at(0).index == 3);
  json r = scorer::shape_result_to_json(run.shapes[0]);
  r["replicates"][1]["candidate_us"] = "fast";
  CHECK_THROWS_WITH_AS(scorer::shape_result_from_json(r, "child"),
                       "child: field 'replicates[1].candidate_us': expected an array of numbers", InputError);
}

TEST_CASE("results: non-finite numbers are written as null and read back as NaN") {
  RunResult run = filled_run();
  run.shapes[0].check.rel_l2 = NAN;
  run.shapes[2].ci_hi = INFINITY;
  const RunResult back = scorer::results_from_json(json::parse(scorer::results_to_json(run).dump()), "mem");
  CHECK(std::isnan(back.shapes[0].check.rel_l2));
  CHECK(back.shapes[2].ci_lo == run.shapes[2].ci_lo);
  // Not a trial time, which must be a number above 0.
  run.shapes[2].replicates[0].candidate_us[1] = INFINITY;
  CHECK_THROWS_WITH_AS(scorer::results_from_json(json::parse(scorer::results_to_json(run).dump()), "mem"),
                       "mem: field 'shapes[2].replicates[0].candidate_us': trial 2 is null: a time is a number "
                       "of µs in [0.001, 1e11]",
                       InputError);
}

TEST_CASE("results: speedups, intervals and aggregates are the trials', whatever the file says") {
  const RunResult run = filled_run();
  json j = scorer::results_to_json(run);
  j["shapes"][0]["speedup"] = 1e308;
  j["shapes"][0]["ci_hi"] = nullptr;  // NaN
  j["shapes"][1]["candidate_median_us"] = 1e-300;
  j["regimes"][0]["speedup"]["point"] = 99.0;
  j["aggregate"] = {{"point", 1e308}, {"lo", 0.0}, {"hi", nullptr}};
  j["graph_aggregate"]["point"] = -1.0;
  const RunResult back = scorer::results_from_json(j, "mem");
  check_same(run, back);
  for (const ShapeResult& r : back.shapes) {
    CHECK(std::isfinite(r.speedup));
    CHECK(std::isfinite(r.ci_hi));
  }
  CHECK(std::isfinite(back.aggregate.hi));
}

TEST_CASE("results: saving is atomic and replaces the previous file") {
  TempDir dir;
  const std::string path = dir.file("latest.json");
  RunResult run = filled_run();
  scorer::save_results(run, path);
  run.meta.gpu_name = "second";
  scorer::save_results(run, path);
  CHECK(scorer::load_results(path).meta.gpu_name == "second");
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path)) {
    ++entries;
    CHECK(e.path().filename() == "latest.json");  // no temporary left behind
  }
  CHECK(entries == 1);

  // A target that cannot be written leaves nothing behind either.
  write_file(dir.file("plain"), "x");
  CHECK_THROWS_AS(scorer::save_results(run, dir.file("plain/latest.json")), std::runtime_error);
  CHECK(read_file(dir.file("plain")) == "x");
  // A directory in the way fails the rename: the temporary is removed.
  fs::create_directory(dir.file("taken"));
  CHECK_THROWS_AS(scorer::save_results(run, dir.file("taken")), std::runtime_error);
  int left = 0;
  for (const auto& e : fs::directory_iterator(dir.path))
    left += e.path().filename() != "plain" && e.path().filename() != "taken" && e.path().filename() != "latest.json";
  CHECK(left == 0);
  CHECK(scorer::load_results(path).meta.gpu_name == "second");
}
