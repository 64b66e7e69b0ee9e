// Results files as JSON: the run's meta, its shapes (shape_result_json.cpp),
// regimes and aggregates; reading through json_reader.h, writing through
// file_io.h.
#include "results_json.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "scorer/file_io.h"
#include "scorer/json_reader.h"
#include "scorer/stats.h"

namespace scorer {
namespace {

using namespace json_in;

json interval_to_json(const Interval& i) { return {{"point", i.point}, {"lo", i.lo}, {"hi", i.hi}}; }

ScoringRule read_scoring(Obj o) {
  ScoringRule r;
  const std::string a = o.str("aggregate");
  if (a == aggregate_name(ScoringRule::Aggregate::regimes))
    r.aggregate = ScoringRule::Aggregate::regimes;
  else if (a != aggregate_name(ScoringRule::Aggregate::shapes))
    o.fail("aggregate", "expected \"shapes\" or \"regimes\" (got \"" + printable(a) + "\")");
  const json& w = o.get("regime_weights");
  if (!w.is_object()) o.fail("regime_weights", "expected an object of numbers");
  for (const auto& [k, x] : w.items()) {
    if (!x.is_number() || !(x.get<double>() >= 0) || !std::isfinite(x.get<double>()))
      o.fail("regime_weights", "the weight of '" + printable(k) + "' is not a finite number >= 0");
    r.regime_weights[k] = x.get<double>();
  }
  r.failed_speedup = o.num("failed_speedup");
  if (!(r.failed_speedup >= 0 && r.failed_speedup <= 1))
    o.fail("failed_speedup", "expected 0 (a failure voids the aggregate) or a speedup in (0, 1]");
  o.finish();
  return r;
}

GpuInfo read_gpu(Obj o) {
  GpuInfo g;
  g.uuid = o.str("uuid");
  g.name = o.str("name");
  g.host = o.str("host");
  g.device = o.integer("device");
  g.sm_clock_mhz = o.num("sm_clock_mhz");
  g.mem_clock_mhz = o.num("mem_clock_mhz");
  g.copy_gbps = o.num("copy_gbps");
  g.empty_launch_us = o.num("empty_launch_us");
  g.matrix_tflops = o.num("matrix_tflops");
  o.finish();
  return g;
}

ShardInfo read_shard(const Reader& rd, Obj o) {
  ShardInfo sh;
  sh.index = o.integer("index");
  sh.count = o.integer("count");
  if (sh.count < 1 || sh.index < 1 || sh.index > sh.count)
    o.fail("index",
           "shard " + std::to_string(sh.index) + " of " + std::to_string(sh.count) + " (expected 1 <= index <= count)");
  sh.shapes = o.strings("shapes");
  sh.units = read_array<ShardUnit>(rd, o, "units", [](Obj u) {
    ShardUnit x;
    x.shape = u.str("shape");
    x.replicate = u.integer("replicate");
    x.scored = u.boolean("scored");
    x.bytes = u.num("bytes");
    x.flops = u.num("flops");
    x.raw_limit_us = u.num("raw_limit_us");
    u.finish();
    return x;
  });
  o.finish();
  return sh;
}

RunMeta read_meta(const Reader& rd, Obj o) {
  RunMeta m;
  // First, so that a file of another schema fails on its version alone.
  m.schema_version = o.integer("schema_version");
  if (m.schema_version != 1 && m.schema_version != kResultsSchemaVersion)
    o.fail("schema_version", "unsupported schema version " + std::to_string(m.schema_version) +
                                 " (this scorer reads versions 1 to " + std::to_string(kResultsSchemaVersion) + ")");
  const bool v1 = m.schema_version == 1;
  m.scorer_version = o.str("scorer_version");
  m.git_commit = o.str("git_commit");
  m.git_dirty = o.boolean("git_dirty");
  m.submission_sha256 = o.str("submission_sha256");
  m.command_line = o.str("command_line");
  m.started_at = o.str("started_at");
  m.shapes_path = o.str("shapes_path");
  m.shapes_sha256 = o.str("shapes_sha256");
  m.seed = o.u64("seed");
  m.mode = o.str("mode");
  if (!v1) {
    m.replicates = o.integer("replicates");
    if (m.replicates < 1) o.fail("replicates", "must be at least 1 (got " + std::to_string(m.replicates) + ")");
    m.timer = o.str("timer");
  }
  m.interrupted = o.boolean_or("interrupted", false);
  m.variants = o.string_map("variants");
  // Added within version 2: absent, the defaults of their time.
  if (o.has("baselines")) m.baselines = o.string_map("baselines");
  if (o.has("scoring")) m.scoring = read_scoring(o.object("scoring"));
  if (o.has("gpus")) m.gpus = read_array<GpuInfo>(rd, o, "gpus", read_gpu);
  if (o.has("shard")) m.shard = read_shard(rd, o.object("shard"));
  m.gpu_name = o.str("gpu_name");
  m.sm_count = o.integer("sm_count");
  m.l2_bytes = o.integer("l2_bytes");
  m.driver_version = o.integer("driver_version");
  m.runtime_version = o.integer("runtime_version");
  m.sm_clock_mhz_start = o.num("sm_clock_mhz_start");
  m.sm_clock_mhz_end = o.num("sm_clock_mhz_end");
  if (!v1) {
    m.mem_clock_mhz_start = o.num("mem_clock_mhz_start");
    m.mem_clock_mhz_end = o.num("mem_clock_mhz_end");
    m.throttle_reasons = o.u64("throttle_reasons");
    m.nvml = o.str("nvml");
  }
  m.copy_gbps = o.num("copy_gbps");
  m.matrix_tflops = o.num("matrix_tflops");
  m.empty_launch_us = o.num("empty_launch_us");
  o.finish();
  return m;
}

}  // namespace

json results_to_json(const RunResult& run) {
  const RunMeta& m = run.meta;
  json meta = {
      {"schema_version", m.schema_version},
      {"scorer_version", m.scorer_version},
      {"git_commit", m.git_commit},
      {"git_dirty", m.git_dirty},
      {"submission_sha256", m.submission_sha256},
      {"command_line", m.command_line},
      {"started_at", m.started_at},
      {"shapes_path", m.shapes_path},
      {"shapes_sha256", m.shapes_sha256},
      {"seed", m.seed},
      {"mode", m.mode},
      {"replicates", m.replicates},
      {"timer", m.timer},
      {"interrupted", m.interrupted},
      {"variants", m.variants},
      {"baselines", m.baselines},
      {"scoring",
       {{"aggregate", aggregate_name(m.scoring.aggregate)},
        {"regime_weights", m.scoring.regime_weights},
        {"failed_speedup", m.scoring.failed_speedup}}},
      {"gpus", json::array()},
      {"gpu_name", m.gpu_name},
      {"sm_count", m.sm_count},
      {"l2_bytes", m.l2_bytes},
      {"driver_version", m.driver_version},
      {"runtime_version", m.runtime_version},
      {"sm_clock_mhz_start", m.sm_clock_mhz_start},
      {"sm_clock_mhz_end", m.sm_clock_mhz_end},
      {"mem_clock_mhz_start", m.mem_clock_mhz_start},
      {"mem_clock_mhz_end", m.mem_clock_mhz_end},
      {"throttle_reasons", m.throttle_reasons},
      {"nvml", m.nvml},
      {"copy_gbps", m.copy_gbps},
      {"matrix_tflops", m.matrix_tflops},
      {"empty_launch_us", m.empty_launch_us},
  };
  for (const GpuInfo& g : m.gpus)
    meta["gpus"].push_back({{"uuid", g.uuid},
                            {"name", g.name},
                            {"host", g.host},
                            {"device", g.device},
                            {"sm_clock_mhz", g.sm_clock_mhz},
                            {"mem_clock_mhz", g.mem_clock_mhz},
                            {"copy_gbps", g.copy_gbps},
                            {"empty_launch_us", g.empty_launch_us},
                            {"matrix_tflops", g.matrix_tflops}});
  if (m.shard.index > 0) {  // a whole run has no shard field
    json units = json::array();
    for (const ShardUnit& u : m.shard.units)
      units.push_back({{"shape", u.shape},
                       {"replicate", u.replicate},
                       {"scored", u.scored},
                       {"bytes", u.bytes},
                       {"flops", u.flops},
                       {"raw_limit_us", u.raw_limit_us}});
    meta["shard"] = {{"index", m.shard.index}, {"count", m.shard.count}, {"shapes", m.shard.shapes}, {"units", units}};
  }
  json shapes = json::array();
  for (const ShapeResult& r : run.shapes) shapes.push_back(shape_result_to_json(r));
  json regimes = json::array();
  for (const RegimeResult& g : run.regimes)
    regimes.push_back({{"name", g.name},
                       {"shapes", g.shapes},
                       {"failed", g.failed},
                       {"speedup", interval_to_json(g.speedup)},
                       {"graph_speedup", interval_to_json(g.graph_speedup)},
                       {"recorded_speedup", g.recorded_speedup}});
  return {
      {"meta", meta},
      {"shapes", shapes},
      {"regimes", regimes},
      {"aggregate", interval_to_json(run.aggregate)},
      {"graph_aggregate", interval_to_json(run.graph_aggregate)},
      {"recorded_aggregate", run.recorded_aggregate},
      {"recorded_source", run.recorded_source},
      {"shapes_failed", run.shapes_failed},
      {"flags", run.flags},
      {"correctness_passed", run.correctness_passed},
  };
}

RunResult results_from_json(const json& j, const std::string& path, const std::string& text) {
  const Reader rd(path, text);
  Obj o(rd, j, "");
  RunResult run;
  run.meta = read_meta(rd, o.object("meta"));
  const int version = run.meta.schema_version;
  run.meta.schema_version = kResultsSchemaVersion;  // held in memory as the current version
  run.shapes = read_array<ShapeResult>(rd, o, "shapes", [&](Obj s) {
    // A shard holds the replicates it was given, under their run-wide index.
    return read_shape_result(rd, std::move(s), version, run.meta.seed, run.meta.shard.index == 0);
  });
  std::map<std::string, size_t> first;
  for (size_t i = 0; i < run.shapes.size(); ++i) {
    // Only timed runs are saved (a child's result of `scorer check` has none):
    // a shape that passed has replicates, each passed with its trials.
    const ShapeResult& r = run.shapes[i];
    const std::string at = "shapes[" + std::to_string(i) + "]";
    if (r.status == "ok" && r.replicates.empty()) rd.fail(at + ".replicates", "no replicates, though the status is ok");
    for (size_t k = 0; r.status == "ok" && k < r.replicates.size(); ++k) {
      const ReplicateResult& p = r.replicates[k];
      const std::string rat = version == 1 ? at : at + ".replicates[" + std::to_string(k) + "]";
      if (p.status != "ok")
        rd.fail(rat + ".status",
                "replicate " + std::to_string(p.index) + " is '" + p.status + "', though the shape's status is ok");
      if (p.baseline_us.empty()) rd.fail(rat + ".baseline_us", "no trials, though the status is ok");
    }
    const auto [it, fresh] = first.emplace(run.shapes[i].shape.name, i);
    if (!fresh)
      rd.fail("shapes[" + std::to_string(i) + "].shape.name",
              "duplicate shape '" + it->first + "' (also shapes[" + std::to_string(it->second) + "])");
  }
  run.regimes = read_array<RegimeResult>(rd, o, "regimes", [](Obj g) {
    RegimeResult r;
    r.name = g.str("name");
    r.shapes = g.integer("shapes");
    r.failed = g.integer("failed");
    r.speedup = g.interval("speedup");
    r.graph_speedup = g.interval("graph_speedup");
    r.recorded_speedup = g.num("recorded_speedup");
    g.finish();
    return r;
  });
  run.aggregate = o.interval("aggregate");
  run.graph_aggregate = o.interval("graph_aggregate");
  run.recorded_aggregate = o.num("recorded_aggregate");
  run.recorded_source = o.str("recorded_source");
  run.shapes_failed = o.integer("shapes_failed");
  const long failed =
      std::count_if(run.shapes.begin(), run.shapes.end(), [](const ShapeResult& r) { return r.status != "ok"; });
  if (run.shapes_failed != failed)
    o.fail("shapes_failed", std::to_string(run.shapes_failed) + ", but " + std::to_string(failed) +
                                " of the shapes have a status other than ok");
  run.flags = o.integer("flags");
  run.correctness_passed = o.boolean("correctness_passed");
  if (run.correctness_passed != (failed == 0))
    o.fail("correctness_passed", std::string(run.correctness_passed ? "true" : "false") + ", but " +
                                     std::to_string(failed) + " of the shapes have a status other than ok");
  o.finish();
  // The derived numbers (medians, speedups, intervals, regimes, aggregates)
  // are recomputed from the trials, as the run computed them, never taken
  // from the file: select, diff, report and package then judge what was
  // measured, and a forged speedup or aggregate changes nothing.
  try {
    compute_run_statistics(run);
  } catch (const std::exception& e) {  // a scoring rule that does not fit the shapes
    rd.fail("meta.scoring", e.what());
  }
  return run;
}

RunResult load_results(const std::string& path) {
  return parse_results(read_input_file(path, kMaxResultsFileBytes, "a results file"), path);
}

RunResult parse_results(const std::string& text, const std::string& path) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // a syntax error, or a number beyond a double
    fail_syntax(text, path, e.what());
  }
  return results_from_json(j, path, text);
}

void save_results(const RunResult& run, const std::string& path) {
  // Serialised in full before the file is touched, so that a failure here
  // leaves the previous file as it was. Invalid UTF-8 (say in a CUDA error
  // message) is replaced rather than failing the whole run.
  write_file_atomic(path, results_to_json(run).dump(2, ' ', false, json::error_handler_t::replace) + "\n");
}

}  // namespace scorer