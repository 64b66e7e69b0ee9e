// scorer merge (merge.h): shards of one synthetic run, cut and scored as
// `scorer run --shard I/N` does, merge into the JSON of the same run scored
// on one host; shards that are not of one run are refused with one line
// naming the file and the field.
#include <doctest/doctest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "scorer/commands.h"
#include "scorer/dispatch.h"
#include "scorer/exit_codes.h"
#include "scorer/merge.h"
#include "scorer/results_json.h"
#include "scorer/shard.h"
#include "scorer/stats.h"
#include "tests/command_output.h"
#include "tests/temp_dir.h"

using scorer::RunResult;
using scorer::ShapeResult;
using scorer::ShardFile;

namespace {

constexpr uint64_t kSeed = 7;
constexpr int kReplicates = 3;

std::vector<scorer::Shape> run_shapes() {
  std::vector<scorer::Shape> out;
  for (int i = 0; i < 5; ++i) {
    scorer::Shape s;
    s.name = "s" + std::to_string(i);
    s.regime = i < 3 ? "a" : "b";
    s.op = scorer::Op::dense;
    s.M = 32, s.N = 1024 * (1 + (i * 3) % 5), s.K = 4096;
    out.push_back(s);
  }
  return out;
}

// A replicate's process's result, drawn from its seed; shape 1 fails its
// replicate 2, so that replicate 3 is scored only where the failure is not
// known (another shard) and the merge must drop it.
ShapeResult unit_result(const scorer::Shape& s, const scorer::WorkItem& w) {
  uint64_t x = w.seed | 1;
  auto noise = [&] {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return double(x >> 11) / double(1ull << 53) - 0.5;
  };
  ShapeResult r;
  r.shape = s;
  r.variant = "v";
  r.bytes = 1e6 + 10 * w.replicate, r.flops = 5e6, r.raw_limit_us = r.bytes / 4e3;
  const bool fails = w.shape == 1 && w.replicate == 2;
  r.status = fails ? "incorrect" : "ok";
  scorer::ReplicateResult& p = r.replicates.emplace_back();
  p.index = w.replicate;
  p.seed = w.seed;
  p.status = r.status;
  p.reason = fails ? "check 2 of 3: rel L2 0.5 above 0.01" : "";
  p.check = {3, 0.001 * w.replicate, 0.01, 0.1};
  p.floor_us = 8 + noise(), p.floor_read_us = p.floor_us, p.floor_compute_us = 1;
  for (int t = 0; !fails && t < 40; ++t) {
    p.baseline_us.push_back(20 + noise());
    p.candidate_us.push_back(10 + noise() + 0.2 * w.replicate);
    p.candidate_span_us.push_back(p.candidate_us.back() - 1);
    p.candidate_kernel_us.push_back(p.candidate_us.back() - 1.5);
    p.untouched_baseline_us.push_back(20 + noise());
  }
  p.converged = !fails;
  p.flags = w.replicate == 3 ? std::vector<std::string>{"clock moved"} : std::vector<std::string>{};
  p.sm_clock_mhz_start = 1980, p.sm_clock_mhz_end = 1975;
  p.seconds = 1.5;
  return r;
}

scorer::GpuInfo gpu(const std::string& host) {
  scorer::GpuInfo g;
  g.uuid = "GPU-0000-" + host;
  g.name = "NVIDIA H200";
  g.host = host;
  g.copy_gbps = 4000, g.empty_launch_us = 2.0, g.matrix_tflops = 700, g.sm_clock_mhz = 1980;
  return g;
}

scorer::RunMeta base_meta() {
  scorer::RunMeta m;
  m.scorer_version = "0123456789abcdef";
  m.submission_sha256 = "feed";
  m.git_commit = "c0ffee";
  m.command_line = "scorer run";
  m.started_at = "2026-01-01T00:00:00Z";
  m.shapes_path = "shapes.toml";
  m.shapes_sha256 = "5ha";
  m.seed = kSeed;
  m.mode = "events";
  m.replicates = kReplicates;
  m.timer = "events+cupti";
  m.variants = {{"dense", "default"}};
  m.baselines = {{"dense", "cublaslt"}};
  m.gpu_name = "NVIDIA H200";
  m.copy_gbps = 4000, m.empty_launch_us = 2.0, m.matrix_tflops = 700;
  m.gpus = {gpu("node1")};
  return m;
}

// Scores `work` as run.cpp does: one lane, assembled, judged, with intervals.
RunResult score(const std::vector<scorer::WorkItem>& work, scorer::RunMeta meta, const scorer::ShardSpec& shard) {
  const auto shapes = run_shapes();
  const auto items = scorer::score_on_lanes(
      shapes.size(), work, 1,
      [&](const scorer::WorkItem& w, size_t, size_t) { return unit_result(shapes[w.shape], w); }, [] { return false; });
  RunResult run;
  run.meta = std::move(meta);
  if (shard.index > 0) run.meta.shard = scorer::describe_shard(shard, shapes, work, items);
  scorer::assemble_run(run, shapes, items, kReplicates, true);
  scorer::BootstrapOptions bo;
  bo.seed = run.meta.seed;
  scorer::compute_statistics(run, bo);
  return run;
}

RunResult single_host() { return score(scorer::make_work_list(run_shapes(), kReplicates, kSeed), base_meta(), {}); }

// The N shard files, each read back from its JSON as merge reads them;
// shard I on host nodeI when `hosts`.
std::vector<ShardFile> shards(int n, bool hosts = false) {
  const auto shapes = run_shapes();
  std::vector<double> seconds;
  for (const auto& s : shapes) seconds.push_back(scorer::estimated_seconds(s, kSeed));
  std::vector<scorer::WorkItem> work = scorer::make_work_list(shapes, kReplicates, kSeed);
  scorer::longest_first(work, seconds);
  std::vector<ShardFile> out;
  for (int i = 1; i <= n; ++i) {
    scorer::RunMeta m = base_meta();
    if (hosts) m.gpus = {gpu("node" + std::to_string(i))};
    const RunResult run = score(scorer::shard_work(work, seconds, {i, n}), m, {i, n});
    const std::string path = "shard-" + std::to_string(i) + "-of-" + std::to_string(n) + ".json";
    out.push_back({path, scorer::parse_results(scorer::results_to_json(run).dump(2), path)});
  }
  return out;
}

std::string merge_error(const std::vector<ShardFile>& files) {
  try {
    scorer::merge_shards(files, "scorer merge");
  } catch (const scorer::InputError& e) {
    return e.what();
  }
  return "(merged)";
}

}  // namespace

TEST_CASE("merge: the shards of a run merge into the run's JSON on one host, for 1 to 6 shards") {
  RunResult single = single_host();
  single.meta.command_line = "scorer merge";
  const nlohmann::json want = scorer::results_to_json(single);
  // The run itself: shape 1 failed in replicate 2 and has no replicate 3.
  REQUIRE(single.shapes.size() == 5);
  CHECK(single.shapes[1].status == "incorrect");
  CHECK(single.shapes[1].replicates.size() == 2);
  for (int n = 1; n <= 6; ++n) {
    CAPTURE(n);
    std::vector<ShardFile> files = shards(n);
    std::reverse(files.begin(), files.end());  // any order
    const RunResult merged = scorer::merge_shards(files, "scorer merge");
    const nlohmann::json got = scorer::results_to_json(merged);
    CHECK(got.dump() == want.dump());
    if (n == 3) CHECK(scorer::parse_results(got.dump(2), "merged.json").meta.shard.index == 0);
  }
}

TEST_CASE("merge: replicates keep the GPU they ran on, across hosts") {
  const RunResult merged = scorer::merge_shards(shards(3, true), "scorer merge");
  REQUIRE(merged.meta.gpus.size() == 3);
  for (size_t i = 0; i < 3; ++i) CHECK(merged.meta.gpus[i].host == "node" + std::to_string(i + 1));
  const std::vector<ShardFile> files = shards(3, true);
  for (const ShardFile& f : files)
    for (const scorer::ShardUnit& u : f.run.meta.shard.units) {
      if (!u.scored) continue;
      const auto& shape = *std::find_if(merged.shapes.begin(), merged.shapes.end(),
                                        [&](const ShapeResult& r) { return r.shape.name == u.shape; });
      for (const auto& p : shape.replicates)
        if (p.index == u.replicate) CHECK(merged.meta.gpus[size_t(p.gpu)].host == f.run.meta.gpus[0].host);
    }
}

TEST_CASE("merge: shards of another build, shapes file, seed or rule are refused, naming the file and field") {
  const std::vector<ShardFile> good = shards(2);
  auto with = [&](auto change) {
    std::vector<ShardFile> f = good;
    change(f[1].run.meta);
    return merge_error(f);
  };
  CHECK(with([](scorer::RunMeta& m) { m.scorer_version = "other"; }) ==
        "shard-2-of-2.json: field 'meta.scorer_version': \"other\", but shard-1-of-2.json has \"0123456789abcdef\" "
        "(the shards of one run share it)");
  CHECK(with([](scorer::RunMeta& m) { m.submission_sha256 = "beef"; }).find("field 'meta.submission_sha256'") !=
        std::string::npos);
  CHECK(with([](scorer::RunMeta& m) { m.shapes_sha256 = "x"; }).find("shard-2-of-2.json: field 'meta.shapes_sha256'") ==
        0);
  CHECK(with([](scorer::RunMeta& m) { m.seed = 8; }) ==
        "shard-2-of-2.json: field 'meta.seed': 8, but shard-1-of-2.json has 7 (the shards of one run share it)");
  CHECK(with([](scorer::RunMeta& m) { m.replicates = 5; }).find("field 'meta.replicates'") != std::string::npos);
  CHECK(with([](scorer::RunMeta& m) { m.baselines["dense"] = "other"; }).find("field 'meta.baselines'") !=
        std::string::npos);
  CHECK(with([](scorer::RunMeta& m) { m.scoring.failed_speedup = 0.5; }).find("field 'meta.scoring'") !=
        std::string::npos);
  CHECK(with([](scorer::RunMeta& m) { m.gpu_name = "NVIDIA H100"; }).find("field 'meta.gpu_name'") !=
        std::string::npos);
  CHECK(with([](scorer::RunMeta& m) { m.shard.shapes.pop_back(); }) ==
        "shard-2-of-2.json: field 'meta.shard.shapes': other shapes than shard-1-of-2.json's (the shards of one run "
        "select the same)");
  CHECK(with([](scorer::RunMeta& m) { m.interrupted = true; }) ==
        "shard-2-of-2.json: field 'meta.interrupted': the shard was interrupted: score it again");
}

TEST_CASE("merge: overlapping, missing and foreign shards are refused") {
  const std::vector<ShardFile> two = shards(2), three = shards(3);
  CHECK(merge_error({two[0], two[0]}) ==
        "shard-1-of-2.json: field 'meta.shard.index': shard 1 again (also shard-1-of-2.json)");
  CHECK(merge_error({two[0]}) ==
        "shard-1-of-2.json: field 'meta.shard.count': 2 shards, but shard 2 is not among the files given");
  CHECK(merge_error({two[0], three[1], three[2]}) ==
        "shard-2-of-3.json: field 'meta.shard.count': shard of 3, but shard-1-of-2.json is a shard of 2");
  std::vector<ShardFile> overlap = two;
  overlap[1].run.meta.shard.units.push_back(two[0].run.meta.shard.units[0]);
  const std::string o = merge_error(overlap);
  CHECK(o.find("shard-2-of-2.json: field 'meta.shard.units': ") == 0);
  CHECK(o.find(" is also in shard-1-of-2.json (shards overlap") != std::string::npos);
  std::vector<ShardFile> missing = two;
  const scorer::ShardUnit gone = missing[1].run.meta.shard.units.back();
  missing[1].run.meta.shard.units.pop_back();
  CHECK(merge_error(missing) == "shard-1-of-2.json: field 'meta.shard.units': " + gone.shape + " replicate " +
                                    std::to_string(gone.replicate) + " is in none of the shards given");
  RunResult whole = single_host();
  CHECK(merge_error({{"latest.json", whole}}) ==
        "latest.json: field 'meta.shard': missing: not a shard's file (scorer run --shard I/N writes them)");
  std::vector<ShardFile> unscored = two;
  for (scorer::ShardUnit& u : unscored[0].run.meta.shard.units) u.scored = false;
  CHECK(merge_error(unscored).find("shard-1-of-2.json: field 'shapes[0].replicates[0].index': ") == 0);
}

TEST_CASE("merge: the command writes the merged file, or one line and exit 2") {
  test_util::TempDir dir("scorer-merge");
  std::vector<std::string> args;
  for (const ShardFile& f : shards(2)) {
    const std::string p = (dir.path / f.path).string();
    scorer::save_results(f.run, p);
    args.push_back(p);
  }
  const std::string out = (dir.path / "merged.json").string();
  auto call = [](const std::vector<std::string>& a, std::string* err) {
    const test_util::CommandOutcome o = test_util::call_command(scorer::merge_main, a);
    *err = o.err;
    return o.rc;
  };
  std::string err;
  std::vector<std::string> a = args;
  a.insert(a.end(), {"--out", out});
  // Shape 1 failed its checks: a correctness failure, as run reports it.
  CHECK(call(a, &err) == scorer::kExitIncorrect);
  CHECK(err.empty());
  RunResult single = single_host();
  const RunResult merged = scorer::load_results(out);
  CHECK(merged.shapes.size() == single.shapes.size());
  CHECK(merged.meta.command_line.find("scorer merge ") == 0);
  RunResult other = scorer::load_results(args[1]);
  other.meta.seed = 8;
  scorer::save_results(other, args[1]);
  CHECK(call(a, &err) == scorer::kExitBadInput);
  CHECK(err == args[1] + ": field 'meta.seed': 8, but " + args[0] + " has 7 (the shards of one run share it)\n");
  CHECK(call({args[0], "--bogus"}, &err) == scorer::kExitBadInput);
  CHECK(err == "command line: unexpected argument '--bogus' (see scorer merge --help)\n");
}

// scripts/slurm-score.sh through tests/fake-sbatch, which runs the job array
// and the merge job here; a stand-in scorer hands out the synthetic shards
// and calls the real scorer's merge.
TEST_CASE("merge: slurm-score.sh runs a job array of shards, then the merge after them") {
  namespace fs = std::filesystem;
  const fs::path repo = fs::current_path();
  const fs::path real = fs::canonical("/proc/self/exe").parent_path().parent_path() / "scorer";
  if (!fs::exists(repo / "scripts/slurm-score.sh") || !fs::exists(real)) {
    MESSAGE("not run: needs the repository as the current directory and the scorer built beside the tests");
    return;
  }
  test_util::TempDir dir("scorer-slurm");
  const std::string d = dir.path.string();
  for (const ShardFile& f : shards(3)) scorer::save_results(f.run, d + "/prebuilt/" + f.path);
  dir.write(
      "fake-scorer",
      "#!/bin/sh\n"
      "for a; do printf '[%s]' \"$a\"; done >> " +
          d + "/scorer-calls; echo >> " + d +
          "/scorer-calls\n"
          "if [ \"$1\" = run ]; then\n"
          "  while [ $# -gt 0 ]; do case \"$1\" in --shard) s=$2; shift;; --out) o=$2; shift;; esac; shift; done\n"
          "  [ -f " +
          d +
          "/fail-${s%/*} ] && exit 3\n"
          "  cp " +
          d +
          "/prebuilt/shard-${s%/*}-of-${s#*/}.json \"$o\"\n"
          "  exit 1  # a shape failed its checks: the shard still counts as done\n"
          "fi\n"
          "shift; exec " +
          real.string() + " merge \"$@\"\n");
  fs::permissions(dir.path / "fake-scorer", fs::perms::owner_all);
  fs::create_directories(dir.path / "bin");
  fs::create_symlink(repo / "tests/fake-sbatch", dir.path / "bin/sbatch");
  auto slurm = [&](const std::string& state) {
    const std::string cmd = "cd '" + repo.string() + "' && PATH='" + d + "/bin" + "':\"$PATH\" FAKE_SBATCH_DIR='" + d +
                            "/" + state + "' scripts/slurm-score.sh --shards 3 " + "--gpus-per-task 2 --scorer '" + d +
                            "/fake-scorer' --dir '" + d + "/" + state + "-files' --out '" + d + "/" + state +
                            "-merged.json' --wait -- --filter 'dense_*' " + "--recorded 'my file.toml' >" + d + "/" +
                            state + ".log 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream log(d + "/" + state + ".log");
    std::ostringstream text;
    text << log.rdbuf();
    return std::make_pair(WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, text.str());
  };
  // Shape 1 of the synthetic run fails its checks: the merged run exits 1, as run would.
  const auto [rc, log] = slurm("ok");
  CHECK_MESSAGE(rc == scorer::kExitIncorrect, log);
  RunResult single = single_host();
  RunResult merged = scorer::load_results(d + "/ok-merged.json");
  single.meta.command_line = merged.meta.command_line;
  CHECK(scorer::results_to_json(merged).dump() == scorer::results_to_json(single).dump());
  std::ifstream calls(d + "/scorer-calls");
  std::vector<std::string> lines;
  for (std::string l; std::getline(calls, l);) lines.push_back(l);
  REQUIRE(lines.size() == 4);
  for (int i = 1; i <= 3; ++i)
    CHECK(lines[size_t(i - 1)] == "[run][--shard][" + std::to_string(i) + "/3][--out][" + d + "/ok-files/shard-" +
                                      std::to_string(i) +
                                      "-of-3.json][--gpus][all][--filter][dense_*][--recorded]"
                                      "[my file.toml]");
  CHECK(lines[3].find("[merge][" + d + "/ok-files/shard-1-of-3.json]") == 0);
  std::ifstream sb(d + "/ok/calls");
  std::string array, merge;
  std::getline(sb, array);
  std::getline(sb, merge);
  CHECK(array.find("--array=1-3") != std::string::npos);
  CHECK(array.find("--gpus-per-task=2") != std::string::npos);
  CHECK(merge.find("--dependency=afterok:1001") != std::string::npos);

  // A shard that could not run holds the merge back.
  dir.write("fail-2", "");
  const auto [failed_rc, failed_log] = slurm("failed");
  CHECK_MESSAGE(failed_rc == 3, failed_log);
  CHECK(failed_log.find("slurm-score.sh: the merge did not run: a shard failed") != std::string::npos);
  CHECK(!fs::exists(d + "/failed-merged.json"));
}
