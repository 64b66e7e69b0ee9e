// A shape's result in a results file or a shape process's reply: the shape,
// its status, its replicates with every trial, and the derived figures.
#include <algorithm>
#include <cmath>

#include "scorer/json_fields.h"
#include "scorer/results_json.h"
#include "scorer/workload.h"

namespace scorer {
namespace {

using namespace json_in;

const std::string kNoText;  // for readers of a JSON value with no source text

const char* const kStatuses[] = {"ok",
                                 "incorrect",
                                 "crash",
                                 "timeout",
                                 "impossible",
                                 "error",
                                 "escaped work",
                                 "foreign work",
                                 "changed device state",
                                 "baseline disturbed"};

std::string status_list() {
  std::string list;
  for (const char* st : kStatuses) list += (list.empty() ? "" : ", ") + std::string(st);
  return list;
}

Shape read_shape(Obj o) {
  Shape s;
  const std::string op = o.str("op");
  if (!parse_op(op, &s.op)) o.fail("op", "unknown op '" + op + "' (expected pooler, dense, router or moe_w4a16)");
  s.name = o.str("name");
  s.regime = o.str("regime");
  s.line = o.integer("line");
  Obj dims = o.object("dims");
  for (const OpDim& d : op_dims(s.op)) {
    s.*d.field = dims.integer(d.name);
    if (s.*d.field < d.min)
      dims.fail(d.name, "must be at least " + std::to_string(d.min) + " (got " + std::to_string(s.*d.field) + ")");
  }
  dims.finish();
  o.finish();
  return s;
}

void check_status(Obj& o, const char* key, const std::string& st) {
  if (std::find(std::begin(kStatuses), std::end(kStatuses), st) == std::end(kStatuses))
    o.fail(key, "unknown status '" + st + "' (expected one of " + status_list() + ")");
}

constexpr auto kCheckFields =
    std::make_tuple(field("checks", &CheckSummary::checks), field("rel_l2", &CheckSummary::rel_l2),
                    field("max_abs_err", &CheckSummary::max_abs_err), field("worst_elem", &CheckSummary::worst_elem));

}  // namespace

// A check summary nested in the lists below: outside the unnamed namespace,
// where argument-dependent lookup finds them.
void to_json(json& j, const CheckSummary& c) { j = fields_to_json(c, kCheckFields); }

namespace json_in {
void read_value(Obj& o, const char* key, CheckSummary& c) {
  c = read_record<CheckSummary>(o.object(key), kCheckFields);
}
}  // namespace json_in

namespace {

// The trials a replicate pairs, baseline with candidate: what a version-1
// shape held itself.
constexpr auto kPairedTrials =
    std::make_tuple(field("baseline_us", &ReplicateResult::baseline_us, check_times),
                    field("candidate_us", &ReplicateResult::candidate_us, check_times),
                    field("graph_baseline_us", &ReplicateResult::graph_baseline_us, check_times),
                    field("graph_candidate_us", &ReplicateResult::graph_candidate_us, check_times));

// A replicate's fields before its trials, its other trials, and its fields after.
constexpr auto kReplicateHead = std::make_tuple(
    field("index", &ReplicateResult::index, at_least<1>), field("seed", &ReplicateResult::seed),
    field("gpu", &ReplicateResult::gpu, at_least<0>), field("status", &ReplicateResult::status, check_status),
    field("reason", &ReplicateResult::reason), field("check", &ReplicateResult::check),
    field("floor_us", &ReplicateResult::floor_us), field("floor_read_us", &ReplicateResult::floor_read_us),
    field("floor_compute_us", &ReplicateResult::floor_compute_us));
constexpr auto kReplicateTrials =
    std::make_tuple(field("untouched_baseline_us", &ReplicateResult::untouched_baseline_us, check_times),
                    field("candidate_kernel_us", &ReplicateResult::candidate_kernel_us, check_durations),
                    field("candidate_span_us", &ReplicateResult::candidate_span_us, check_durations));
constexpr auto kReplicateTail = std::make_tuple(
    field("converged", &ReplicateResult::converged), field("flags", &ReplicateResult::flags),
    field("sm_clock_mhz_start", &ReplicateResult::sm_clock_mhz_start),
    field("sm_clock_mhz_end", &ReplicateResult::sm_clock_mhz_end),
    field("mem_clock_mhz_start", &ReplicateResult::mem_clock_mhz_start),
    field("mem_clock_mhz_end", &ReplicateResult::mem_clock_mhz_end),
    field("throttle_reasons", &ReplicateResult::throttle_reasons), field("seconds", &ReplicateResult::seconds));

// A shape result's fields before its trials or replicates, and its figures after.
constexpr auto kShapeHead = std::make_tuple(
    field("status", &ShapeResult::status, check_status), field("reason", &ShapeResult::reason),
    field("variant", &ShapeResult::variant), field("check", &ShapeResult::check), field("bytes", &ShapeResult::bytes),
    field("flops", &ShapeResult::flops), field("floor_us", &ShapeResult::floor_us),
    field("floor_read_us", &ShapeResult::floor_read_us), field("floor_compute_us", &ShapeResult::floor_compute_us),
    field("raw_limit_us", &ShapeResult::raw_limit_us), field("converged", &ShapeResult::converged),
    field("flags", &ShapeResult::flags));
constexpr auto kShapeFigures = std::make_tuple(
    field("baseline_median_us", &ShapeResult::baseline_median_us),
    field("candidate_median_us", &ShapeResult::candidate_median_us), field("pct_of_floor", &ShapeResult::pct_of_floor),
    field("pct_of_raw", &ShapeResult::pct_of_raw), field("speedup", &ShapeResult::speedup),
    field("ci_lo", &ShapeResult::ci_lo), field("ci_hi", &ShapeResult::ci_hi),
    field("graph_speedup", &ShapeResult::graph_speedup), field("graph_ci_lo", &ShapeResult::graph_ci_lo),
    field("graph_ci_hi", &ShapeResult::graph_ci_hi), field("recorded_us", &ShapeResult::recorded_us),
    field("recorded_speedup", &ShapeResult::recorded_speedup));

// Trials are paired: statistics are undefined when the counts differ.
void require_paired(Obj& o, const char* key, const std::vector<double>& a, const char* other,
                    const std::vector<double>& b) {
  if (a.size() != b.size())
    o.fail(key, "has " + std::to_string(a.size()) + " trials but " + other + " has " + std::to_string(b.size()));
}

void require_paired_trials(Obj& o, const ReplicateResult& p) {
  require_paired(o, "candidate_us", p.candidate_us, "baseline_us", p.baseline_us);
  require_paired(o, "graph_candidate_us", p.graph_candidate_us, "graph_baseline_us", p.graph_baseline_us);
}

// The per-candidate-trial CUPTI figures: none, or one per candidate trial.
void require_per_trial(Obj& o, const char* key, const std::vector<double>& v, size_t trials) {
  if (!v.empty() && v.size() != trials)
    o.fail(key, "has " + std::to_string(v.size()) + " values but candidate_us has " + std::to_string(trials) +
                    " trials (expected one per trial, or none)");
}

json replicate_to_json(const ReplicateResult& p) {
  return fields_to_json(p, kReplicateHead, kPairedTrials, kReplicateTrials, kReplicateTail);
}

ReplicateResult read_replicate(Obj o) {
  ReplicateResult p;
  read_fields(o, p, kReplicateHead, kPairedTrials, kReplicateTrials);
  require_paired_trials(o, p);
  require_per_trial(o, "candidate_kernel_us", p.candidate_kernel_us, p.candidate_us.size());
  require_per_trial(o, "candidate_span_us", p.candidate_span_us, p.candidate_us.size());
  read_fields(o, p, kReplicateTail);
  o.finish();
  return p;
}

// A version-1 shape's trials and per-run fields become its one replicate,
// seeded as version 1 seeded the shape.
void read_v1_trials(Obj& o, ShapeResult& r, uint64_t run_seed) {
  ReplicateResult p;
  p.index = 1;
  p.seed = shape_seed(run_seed, r.shape);
  read_fields(o, p, kPairedTrials);
  require_paired_trials(o, p);
  p.status = r.status;
  p.reason = r.reason;
  p.check = r.check;
  p.floor_us = r.floor_us, p.floor_read_us = r.floor_read_us, p.floor_compute_us = r.floor_compute_us;
  p.converged = r.converged;
  p.flags = r.flags;
  r.replicates.push_back(std::move(p));
}

}  // namespace

namespace json_in {
ShapeResult read_shape_result(const Reader& rd, Obj o, int version, uint64_t run_seed, bool whole_shape) {
  ShapeResult r;
  r.shape = read_shape(o.object("shape"));
  read_fields(o, r, kShapeHead);
  if (version == 1) {
    read_v1_trials(o, r, run_seed);
  } else {
    r.replicates = read_array<ReplicateResult>(rd, o, "replicates", read_replicate);
    for (size_t i = 0; i < r.replicates.size(); ++i)
      if (whole_shape && r.replicates[i].index != int(i) + 1)
        rd.fail(o.path("replicates") + "[" + std::to_string(i) + "].index",
                "replicate " + std::to_string(r.replicates[i].index) + " where replicate " + std::to_string(i + 1) +
                    " was expected (replicates are numbered 1, 2, ... in order)");
    r.untouched_baseline_median_us = o.num("untouched_baseline_median_us");
  }
  read_fields(o, r, kShapeFigures);
  o.finish();
  return r;
}
}  // namespace json_in

json shape_to_json(const Shape& s) {
  json dims = json::object();
  for (const OpDim& d : op_dims(s.op)) dims[d.name] = s.*d.field;
  return {{"name", s.name}, {"op", op_name(s.op)}, {"regime", s.regime}, {"line", s.line}, {"dims", dims}};
}

Shape shape_from_json(const json& j, const std::string& path) {
  const Reader rd(path, kNoText);
  return read_shape(Obj(rd, j, ""));
}

json shape_result_to_json(const ShapeResult& r) {
  json j = fields_to_json(r, kShapeHead, kShapeFigures);
  j["shape"] = shape_to_json(r.shape);
  j["replicates"] = json::array();
  for (const ReplicateResult& p : r.replicates) j["replicates"].push_back(replicate_to_json(p));
  j["untouched_baseline_median_us"] = r.untouched_baseline_median_us;
  return j;
}

ShapeResult shape_result_from_json(const json& j, const std::string& path) {
  const Reader rd(path, kNoText);
  return read_shape_result(rd, Obj(rd, j, ""), kResultsSchemaVersion, 0, false);
}

}  // namespace scorer
