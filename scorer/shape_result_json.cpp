// A shape's result in a results file or a shape process's reply: the shape,
// its status, its replicates with every trial, and the derived figures.
#include <algorithm>
#include <cmath>

#include "scorer/json_reader.h"
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

std::string read_status(Obj& o) {
  const std::string st = o.str("status");
  if (std::find(std::begin(kStatuses), std::end(kStatuses), st) == std::end(kStatuses))
    o.fail("status", "unknown status '" + st + "' (expected one of " + status_list() + ")");
  return st;
}

CheckSummary read_check(Obj c) {
  CheckSummary k;
  k.checks = c.integer("checks");
  k.rel_l2 = c.num("rel_l2");
  k.max_abs_err = c.num("max_abs_err");
  k.worst_elem = c.num("worst_elem");
  c.finish();
  return k;
}

json check_to_json(const CheckSummary& c) {
  return {{"checks", c.checks}, {"rel_l2", c.rel_l2}, {"max_abs_err", c.max_abs_err}, {"worst_elem", c.worst_elem}};
}

// Trials are paired: statistics are undefined when the counts differ.
void require_paired(Obj& o, const char* key, const std::vector<double>& a, const char* other,
                    const std::vector<double>& b) {
  if (a.size() != b.size())
    o.fail(key, "has " + std::to_string(a.size()) + " trials but " + other + " has " + std::to_string(b.size()));
}

// The per-candidate-trial CUPTI figures: none, or one per candidate trial.
void require_per_trial(Obj& o, const char* key, const std::vector<double>& v, size_t trials) {
  if (!v.empty() && v.size() != trials)
    o.fail(key, "has " + std::to_string(v.size()) + " values but candidate_us has " + std::to_string(trials) +
                    " trials (expected one per trial, or none)");
}

json replicate_to_json(const ReplicateResult& p) {
  return {
      {"index", p.index},
      {"seed", p.seed},
      {"gpu", p.gpu},
      {"status", p.status},
      {"reason", p.reason},
      {"check", check_to_json(p.check)},
      {"floor_us", p.floor_us},
      {"floor_read_us", p.floor_read_us},
      {"floor_compute_us", p.floor_compute_us},
      {"baseline_us", p.baseline_us},
      {"candidate_us", p.candidate_us},
      {"graph_baseline_us", p.graph_baseline_us},
      {"graph_candidate_us", p.graph_candidate_us},
      {"untouched_baseline_us", p.untouched_baseline_us},
      {"candidate_kernel_us", p.candidate_kernel_us},
      {"candidate_span_us", p.candidate_span_us},
      {"converged", p.converged},
      {"flags", p.flags},
      {"sm_clock_mhz_start", p.sm_clock_mhz_start},
      {"sm_clock_mhz_end", p.sm_clock_mhz_end},
      {"mem_clock_mhz_start", p.mem_clock_mhz_start},
      {"mem_clock_mhz_end", p.mem_clock_mhz_end},
      {"throttle_reasons", p.throttle_reasons},
      {"seconds", p.seconds},
  };
}

ReplicateResult read_replicate(Obj o) {
  ReplicateResult p;
  p.index = o.integer("index");
  if (p.index < 1) o.fail("index", "must be at least 1 (got " + std::to_string(p.index) + ")");
  p.seed = o.u64("seed");
  p.gpu = o.integer("gpu");
  if (p.gpu < 0) o.fail("gpu", "must be at least 0 (got " + std::to_string(p.gpu) + ")");
  p.status = read_status(o);
  p.reason = o.str("reason");
  p.check = read_check(o.object("check"));
  p.floor_us = o.num("floor_us");
  p.floor_read_us = o.num("floor_read_us");
  p.floor_compute_us = o.num("floor_compute_us");
  p.baseline_us = o.times("baseline_us");
  p.candidate_us = o.times("candidate_us");
  p.graph_baseline_us = o.times("graph_baseline_us");
  p.graph_candidate_us = o.times("graph_candidate_us");
  p.untouched_baseline_us = o.times("untouched_baseline_us");
  p.candidate_kernel_us = o.durations("candidate_kernel_us");
  p.candidate_span_us = o.durations("candidate_span_us");
  require_paired(o, "candidate_us", p.candidate_us, "baseline_us", p.baseline_us);
  require_paired(o, "graph_candidate_us", p.graph_candidate_us, "graph_baseline_us", p.graph_baseline_us);
  require_per_trial(o, "candidate_kernel_us", p.candidate_kernel_us, p.candidate_us.size());
  require_per_trial(o, "candidate_span_us", p.candidate_span_us, p.candidate_us.size());
  p.converged = o.boolean("converged");
  p.flags = o.strings("flags");
  p.sm_clock_mhz_start = o.num("sm_clock_mhz_start");
  p.sm_clock_mhz_end = o.num("sm_clock_mhz_end");
  p.mem_clock_mhz_start = o.num("mem_clock_mhz_start");
  p.mem_clock_mhz_end = o.num("mem_clock_mhz_end");
  p.throttle_reasons = o.u64("throttle_reasons");
  p.seconds = o.num("seconds");
  o.finish();
  return p;
}

// A version-1 shape's trials and per-run fields become its one replicate,
// seeded as version 1 seeded the shape.
void read_v1_trials(Obj& o, ShapeResult& r, uint64_t run_seed) {
  ReplicateResult p;
  p.index = 1;
  p.seed = shape_seed(run_seed, r.shape);
  p.baseline_us = o.times("baseline_us");
  p.candidate_us = o.times("candidate_us");
  p.graph_baseline_us = o.times("graph_baseline_us");
  p.graph_candidate_us = o.times("graph_candidate_us");
  require_paired(o, "candidate_us", p.candidate_us, "baseline_us", p.baseline_us);
  require_paired(o, "graph_candidate_us", p.graph_candidate_us, "graph_baseline_us", p.graph_baseline_us);
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
  r.status = read_status(o);
  r.reason = o.str("reason");
  r.variant = o.str("variant");
  r.check = read_check(o.object("check"));
  r.bytes = o.num("bytes");
  r.flops = o.num("flops");
  r.floor_us = o.num("floor_us");
  r.floor_read_us = o.num("floor_read_us");
  r.floor_compute_us = o.num("floor_compute_us");
  r.raw_limit_us = o.num("raw_limit_us");
  r.converged = o.boolean("converged");
  r.flags = o.strings("flags");
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
  r.baseline_median_us = o.num("baseline_median_us");
  r.candidate_median_us = o.num("candidate_median_us");
  r.pct_of_floor = o.num("pct_of_floor");
  r.pct_of_raw = o.num("pct_of_raw");
  r.speedup = o.num("speedup");
  r.ci_lo = o.num("ci_lo");
  r.ci_hi = o.num("ci_hi");
  r.graph_speedup = o.num("graph_speedup");
  r.graph_ci_lo = o.num("graph_ci_lo");
  r.graph_ci_hi = o.num("graph_ci_hi");
  r.recorded_us = o.num("recorded_us");
  r.recorded_speedup = o.num("recorded_speedup");
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
  json replicates = json::array();
  for (const ReplicateResult& p : r.replicates) replicates.push_back(replicate_to_json(p));
  return {
      {"shape", shape_to_json(r.shape)},
      {"status", r.status},
      {"reason", r.reason},
      {"variant", r.variant},
      {"check", check_to_json(r.check)},
      {"bytes", r.bytes},
      {"flops", r.flops},
      {"floor_us", r.floor_us},
      {"floor_read_us", r.floor_read_us},
      {"floor_compute_us", r.floor_compute_us},
      {"raw_limit_us", r.raw_limit_us},
      {"converged", r.converged},
      {"flags", r.flags},
      {"replicates", replicates},
      {"baseline_median_us", r.baseline_median_us},
      {"candidate_median_us", r.candidate_median_us},
      {"untouched_baseline_median_us", r.untouched_baseline_median_us},
      {"pct_of_floor", r.pct_of_floor},
      {"pct_of_raw", r.pct_of_raw},
      {"speedup", r.speedup},
      {"ci_lo", r.ci_lo},
      {"ci_hi", r.ci_hi},
      {"graph_speedup", r.graph_speedup},
      {"graph_ci_lo", r.graph_ci_lo},
      {"graph_ci_hi", r.graph_ci_hi},
      {"recorded_us", r.recorded_us},
      {"recorded_speedup", r.recorded_speedup},
  };
}

ShapeResult shape_result_from_json(const json& j, const std::string& path) {
  const Reader rd(path, kNoText);
  return read_shape_result(rd, Obj(rd, j, ""), kResultsSchemaVersion, 0, false);
}

}  // namespace scorer
