// On one GPU: `scorer run --gpus 1`, and `--shard 1/2` + `--shard 2/2` joined
// by `scorer merge`, give the same shapes and statuses as a plain run, and
// intervals that overlap its own (the runs are separate measurements). A few
// shapes with few trials, so that it is quick; each run in a scratch
// directory, so that results/ is not touched.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "scorer/child_process.h"
#include "scorer/results_json.h"
#include "tests/temp_dir.h"

namespace {

namespace fs = std::filesystem;

struct Scorer {
  fs::path bin = fs::canonical("/proc/self/exe").parent_path().parent_path() / "scorer";
  fs::path repo = fs::current_path();
  std::string dir;

  // Runs the scorer in `dir` with `args`; returns its exit code, the output in *out.
  int operator()(const std::string& args, std::string* out) const {
    const std::string cmd = "cd '" + dir + "' && exec '" + bin.string() + "' " + args + " 2>&1";
    const scorer::ChildOutcome c = scorer::run_program({"/bin/sh", "-c", cmd}, 600);
    *out = c.output + c.detail;
    if (c.kind != scorer::ChildOutcome::ok) return c.kind == scorer::ChildOutcome::crashed ? 1000 : -1;
    return 0;
  }
};

void same_run(const scorer::RunResult& plain, const scorer::RunResult& other, const std::string& what) {
  INFO(what);
  REQUIRE(other.shapes.size() == plain.shapes.size());
  CHECK(other.meta.shard.index == 0);
  CHECK(other.meta.replicates == plain.meta.replicates);
  REQUIRE(other.meta.gpus.size() == 1);
  CHECK(other.meta.gpus[0].uuid == plain.meta.gpus.at(0).uuid);
  for (size_t i = 0; i < plain.shapes.size(); ++i) {
    const scorer::ShapeResult &a = plain.shapes[i], &b = other.shapes[i];
    INFO("shape " << a.shape.name << ": " << a.speedup << " [" << a.ci_lo << ", " << a.ci_hi << "] against "
                  << b.speedup << " [" << b.ci_lo << ", " << b.ci_hi << "]");
    CHECK(b.shape.name == a.shape.name);
    CHECK(b.status == a.status);
    CHECK(b.replicates.size() == a.replicates.size());
    for (const scorer::ReplicateResult& p : b.replicates) CHECK(p.gpu == 0);
    if (a.status == "ok" && b.status == "ok") {
      CHECK(b.ci_lo <= a.ci_hi);
      CHECK(a.ci_lo <= b.ci_hi);
    }
  }
}

}  // namespace

TEST_CASE("shards: --gpus 1, and two shards merged, score as a plain run does") {
  Scorer run;
  REQUIRE_MESSAGE(fs::exists(run.bin), "the scorer is built beside the tests: " << run.bin);
  REQUIRE_MESSAGE(fs::exists(run.repo / "shapes.toml"), "run from the repository's root");
  test_util::TempDir dir("scorer-gpu-shards");
  run.dir = dir.path.string();
  const std::string common = "--shapes '" + (run.repo / "shapes.toml").string() +
                             "' --filter dense_m32_o,router_dsv3_t8,pooler_b8_h1024 --replicates 2 "
                             "--min-trials 20 --max-trials 60 --time-cap 0.5 --no-diff";
  std::string out;
  REQUIRE_MESSAGE(run("run " + common + " --out plain.json", &out) == 0, out);
  REQUIRE_MESSAGE(run("run " + common + " --gpus 1 --out gpus1.json", &out) == 0, out);
  CHECK(out.find("on GPU") == std::string::npos);  // one lane: no lane in the labels
  REQUIRE_MESSAGE(run("run " + common + " --shard 1/2", &out) == 0, out);
  REQUIRE_MESSAGE(run("run " + common + " --shard 2/2", &out) == 0, out);
  CHECK(out.find("shard 2 of 2: results/shard-2-of-2.json") != std::string::npos);
  REQUIRE_MESSAGE(run("merge results/shard-2-of-2.json results/shard-1-of-2.json --out merged.json", &out) == 0, out);

  const scorer::RunResult plain = scorer::load_results(run.dir + "/plain.json");
  REQUIRE(plain.shapes.size() == 3);
  same_run(plain, scorer::load_results(run.dir + "/gpus1.json"), "--gpus 1");
  same_run(plain, scorer::load_results(run.dir + "/merged.json"), "--shard 1/2 + 2/2, merged");
  const scorer::RunResult s1 = scorer::load_results(run.dir + "/results/shard-1-of-2.json");
  const scorer::RunResult s2 = scorer::load_results(run.dir + "/results/shard-2-of-2.json");
  CHECK(s1.meta.shard.units.size() + s2.meta.shard.units.size() == 6);
}
