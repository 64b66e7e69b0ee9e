// Results files as JSON: the run's meta, its shapes (shape_result_json.cpp),
// regimes and aggregates; reading through json_reader.h, writing through
// file_io.h.
#include "results_json.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "scorer/file_io.h"
#include "scorer/json_fields.h"
#include "scorer/stats.h"

namespace scorer {
namespace {

using namespace json_in;

constexpr auto kGpuFields = std::make_tuple(
    field("uuid", &GpuInfo::uuid), field("name", &GpuInfo::name), field("host", &GpuInfo::host),
    field("device", &GpuInfo::device), field("sm_clock_mhz", &GpuInfo::sm_clock_mhz),
    field("mem_clock_mhz", &GpuInfo::mem_clock_mhz), field("copy_gbps", &GpuInfo::copy_gbps),
    field("empty_launch_us", &GpuInfo::empty_launch_us), field("matrix_tflops", &GpuInfo::matrix_tflops));

constexpr auto kShardUnitFields =
    std::make_tuple(field("shape", &ShardUnit::shape), field("replicate", &ShardUnit::replicate),
                    field("scored", &ShardUnit::scored), field("bytes", &ShardUnit::bytes),
                    field("flops", &ShardUnit::flops), field("raw_limit_us", &ShardUnit::raw_limit_us));

constexpr auto kRegimeFields = std::make_tuple(
    field("name", &RegimeResult::name), field("shapes", &RegimeResult::shapes), field("failed", &RegimeResult::failed),
    field("speedup", &RegimeResult::speedup), field("graph_speedup", &RegimeResult::graph_speedup),
    field("recorded_speedup", &RegimeResult::recorded_speedup));

// The meta's fields in groups, as version 1 lacks some and others stand
// between them: the build and the run's settings, the replication (version 2),
// the device, NVML's clocks (version 2) and the rates measured at start-up.
constexpr auto kMetaBuild =
    std::make_tuple(field("scorer_version", &RunMeta::scorer_version), field("git_commit", &RunMeta::git_commit),
                    field("git_dirty", &RunMeta::git_dirty), field("submission_sha256", &RunMeta::submission_sha256),
                    field("command_line", &RunMeta::command_line), field("started_at", &RunMeta::started_at),
                    field("shapes_path", &RunMeta::shapes_path), field("shapes_sha256", &RunMeta::shapes_sha256),
                    field("seed", &RunMeta::seed), field("mode", &RunMeta::mode));
constexpr auto kMetaReplication =
    std::make_tuple(field("replicates", &RunMeta::replicates, at_least<1>), field("timer", &RunMeta::timer));
constexpr auto kMetaDevice = std::make_tuple(
    field("gpu_name", &RunMeta::gpu_name), field("sm_count", &RunMeta::sm_count), field("l2_bytes", &RunMeta::l2_bytes),
    field("driver_version", &RunMeta::driver_version), field("runtime_version", &RunMeta::runtime_version),
    field("sm_clock_mhz_start", &RunMeta::sm_clock_mhz_start), field("sm_clock_mhz_end", &RunMeta::sm_clock_mhz_end));
constexpr auto kMetaNvml =
    std::make_tuple(field("mem_clock_mhz_start", &RunMeta::mem_clock_mhz_start),
                    field("mem_clock_mhz_end", &RunMeta::mem_clock_mhz_end),
                    field("throttle_reasons", &RunMeta::throttle_reasons), field("nvml", &RunMeta::nvml));
constexpr auto kMetaRates =
    std::make_tuple(field("copy_gbps", &RunMeta::copy_gbps), field("matrix_tflops", &RunMeta::matrix_tflops),
                    field("empty_launch_us", &RunMeta::empty_launch_us));

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

ShardInfo read_shard(const Reader& rd, Obj o) {
  ShardInfo sh;
  sh.index = o.integer("index");
  sh.count = o.integer("count");
  if (sh.count < 1 || sh.index < 1 || sh.index > sh.count)
    o.fail("index",
           "shard " + std::to_string(sh.index) + " of " + std::to_string(sh.count) + " (expected 1 <= index <= count)");
  sh.shapes = o.strings("shapes");
  sh.units = read_array<ShardUnit>(rd, o, "units", [](Obj u) { return read_record<ShardUnit>(u, kShardUnitFields); });
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
  read_fields(o, m, kMetaBuild);
  if (!v1) read_fields(o, m, kMetaReplication);
  m.interrupted = o.boolean_or("interrupted", false);
  m.variants = o.string_map("variants");
  // Added within version 2: absent, the defaults of their time.
  if (o.has("baselines")) m.baselines = o.string_map("baselines");
  if (o.has("scoring")) m.scoring = read_scoring(o.object("scoring"));
  if (o.has("gpus"))
    m.gpus = read_array<GpuInfo>(rd, o, "gpus", [](Obj g) { return read_record<GpuInfo>(g, kGpuFields); });
  if (o.has("shard")) m.shard = read_shard(rd, o.object("shard"));
  read_fields(o, m, kMetaDevice);
  if (!v1) read_fields(o, m, kMetaNvml);
  read_fields(o, m, kMetaRates);
  o.finish();
  return m;
}

}  // namespace

json results_to_json(const RunResult& run) {
  const RunMeta& m = run.meta;
  json meta = fields_to_json(m, kMetaBuild, kMetaReplication, kMetaDevice, kMetaNvml, kMetaRates);
  meta["schema_version"] = m.schema_version;
  meta["interrupted"] = m.interrupted;
  meta["variants"] = m.variants;
  meta["baselines"] = m.baselines;
  meta["scoring"] = {{"aggregate", aggregate_name(m.scoring.aggregate)},
                     {"regime_weights", m.scoring.regime_weights},
                     {"failed_speedup", m.scoring.failed_speedup}};
  meta["gpus"] = json::array();
  for (const GpuInfo& g : m.gpus) meta["gpus"].push_back(fields_to_json(g, kGpuFields));
  if (m.shard.index > 0) {  // a whole run has no shard field
    json units = json::array();
    for (const ShardUnit& u : m.shard.units) units.push_back(fields_to_json(u, kShardUnitFields));
    meta["shard"] = {{"index", m.shard.index}, {"count", m.shard.count}, {"shapes", m.shard.shapes}, {"units", units}};
  }
  json shapes = json::array();
  for (const ShapeResult& r : run.shapes) shapes.push_back(shape_result_to_json(r));
  json regimes = json::array();
  for (const RegimeResult& g : run.regimes) regimes.push_back(fields_to_json(g, kRegimeFields));
  return {
      {"meta", meta},
      {"shapes", shapes},
      {"regimes", regimes},
      {"aggregate", run.aggregate},
      {"graph_aggregate", run.graph_aggregate},
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
  run.regimes =
      read_array<RegimeResult>(rd, o, "regimes", [](Obj g) { return read_record<RegimeResult>(g, kRegimeFields); });
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