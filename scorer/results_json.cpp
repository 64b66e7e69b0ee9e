#include "results_json.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "file_io.h"
#include "workload.h"

namespace scorer {
namespace {

using json = nlohmann::json;


const std::string kNoText;  // for readers of a JSON value with no source text

const char* const kStatuses[] = {"ok",           "incorrect",    "crash",
                                 "timeout",      "impossible",   "error",
                                 "escaped work", "foreign work", "changed device state",
                                 "baseline disturbed"};

std::string status_list() {
  std::string list;
  for (const char* st : kStatuses) list += (list.empty() ? "" : ", ") + std::string(st);
  return list;
}

std::string member_path(const std::string& at, const std::string& key) {
  return at.empty() ? key : at + "." + key;
}

// True when `p` names `target` or an object or array that contains it.
bool is_prefix(const std::string& p, const std::string& target) {
  if (p.empty()) return true;
  if (target.compare(0, p.size(), p) != 0) return false;
  return target.size() == p.size() || target[p.size()] == '.' || target[p.size()] == '[';
}

int line_at(const std::string& text, size_t offset) {
  offset = std::min(offset, text.size());
  return 1 + int(std::count(text.begin(), text.begin() + long(offset), '\n'));
}

// nlohmann-json 3.11 keeps no source positions, so an error finds its line by
// replaying the text through nlohmann's SAX parser from a string stream: the
// stream's read position at each event is where the lexer stands, which is
// just past a key's closing quote or an object's or array's opening bracket
// (scalars are not used: the lexer reads one character past a number).
class Locator : public nlohmann::json_sax<json> {
 public:
  Locator(const std::string& text, const std::string& target)
      : text_(text), in_(text), target_(target) {}

  // Replays the text. Afterwards `line` is the line of `target` or, if it is
  // absent, of the deepest object or array that would hold it (1 for none);
  // `field` is the field being read when a syntax error stopped the replay.
  void run() { json::sax_parse(in_, this); }
  int line = 1;
  std::string field;

  bool null() override { return scalar(); }
  bool boolean(bool) override { return scalar(); }
  bool number_integer(number_integer_t) override { return scalar(); }
  bool number_unsigned(number_unsigned_t) override { return scalar(); }
  bool number_float(number_float_t, const string_t&) override { return scalar(); }
  bool string(string_t&) override { return scalar(); }
  bool binary(binary_t&) override { return scalar(); }
  bool start_object(std::size_t) override { return open(false); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    key_ = member_path(stack_.back().path, k);
    field = key_;
    return visit(key_);
  }
  // position counts the offending character itself; a number beyond a
  // double (out_of_range 406) stops the replay here too.
  bool parse_error(std::size_t position, const std::string&, const json::exception&) override {
    error_at = position;
    return false;
  }
  size_t error_at = 0;

 private:
  struct Frame {
    std::string path;
    bool array;
    size_t next = 0;  // index of an array's next element
  };
  const std::string& text_;
  std::istringstream in_;
  std::string target_, key_;
  std::vector<Frame> stack_;

  std::string value_path() {
    if (stack_.empty()) return "";
    Frame& f = stack_.back();
    return f.array ? f.path + "[" + std::to_string(f.next++) + "]" : key_;
  }
  // `field` follows the last key, or the array being read: an element's
  // index would say little.
  bool scalar() {
    if (!stack_.empty() && stack_.back().array) {
      field = stack_.back().path;
      ++stack_.back().next;
    }
    return true;
  }
  bool open(bool array) {
    stack_.push_back({value_path(), array});
    field = stack_.back().path;
    return visit(field);
  }
  bool close() {
    field = stack_.back().path;
    stack_.pop_back();
    return true;
  }
  // Records the line of a prefix of the target; stops the replay at the target.
  // With no target the replay only follows `field`.
  bool visit(const std::string& p) {
    if (target_.empty() || !is_prefix(p, target_)) return true;
    line =
        line_at(text_, size_t(in_.rdbuf()->pubseekoff(0, std::ios_base::cur, std::ios_base::in)));
    return p != target_;
  }
};

// Reads the typed fields of one JSON document strictly; every error names the
// file, the line (when the text is known) and the field's path.
class Reader {
 public:
  // `text` (may be empty) must outlive the reader.
  Reader(const std::string& path, const std::string& text) : path_(path), text_(text) {}

  [[noreturn]] void fail(const std::string& field, const std::string& msg) const {
    std::string where = path_;
    if (!text_.empty()) {
      Locator loc(text_, field);
      loc.run();
      where += ":" + std::to_string(loc.line);
    }
    throw InputError(where + ": field '" + field + "': " + msg);
  }

 private:
  std::string path_;
  const std::string& text_;
};

// One JSON object being read: every field is fetched by name, and finish()
// rejects the fields that nothing asked for.
class Obj {
 public:
  Obj(const Reader& rd, const json& j, std::string at) : rd_(rd), j_(j), at_(std::move(at)) {
    if (!j.is_object()) rd_.fail(at_.empty() ? "(top level)" : at_, "expected an object");
  }

  std::string path(const char* key) const { return member_path(at_, key); }
  [[noreturn]] void fail(const char* key, const std::string& msg) const {
    rd_.fail(path(key), msg);
  }

  const json& get(const char* key) {
    const auto it = j_.find(key);
    if (it == j_.end()) fail(key, "missing");
    used_.insert(key);
    return *it;
  }
  Obj object(const char* key) {
    return Obj(rd_, get_typed(key, &json::is_object, "an object"), path(key));
  }
  std::string str(const char* key) {
    return get_typed(key, &json::is_string, "a string").get<std::string>();
  }
  bool has(const char* key) const { return j_.contains(key); }
  bool boolean(const char* key) {
    return get_typed(key, &json::is_boolean, "a boolean").get<bool>();
  }
  // A field added after the schema's version 1: absent in older files.
  bool boolean_or(const char* key, bool absent) { return j_.contains(key) ? boolean(key) : absent; }
  // null stands for NaN: nlohmann-json writes a non-finite number as null.
  double num(const char* key) {
    const json& v = get(key);
    if (v.is_null()) return NAN;
    if (!v.is_number()) fail(key, "expected a number");
    return v.get<double>();
  }
  int integer(const char* key) {
    const json& v = get_typed(key, &json::is_number_integer, "an integer");
    const bool fits = v.is_number_unsigned()
                          ? v.get<uint64_t>() <= uint64_t(std::numeric_limits<int>::max())
                          : v.get<int64_t>() >= std::numeric_limits<int>::min() &&
                                v.get<int64_t>() <= std::numeric_limits<int>::max();
    if (!fits) fail(key, "integer out of range (got " + v.dump() + ")");
    return v.get<int>();
  }
  uint64_t u64(const char* key) {
    const json& v = get_typed(key, &json::is_number_integer, "an unsigned integer");
    if (!v.is_number_unsigned() && v.get<int64_t>() < 0) fail(key, "expected an unsigned integer");
    return v.get<uint64_t>();
  }
  // Trial times: each a finite number of µs above 0 (a time of 0, or NaN,
  // would pass through the statistics as an undefined ratio).
  std::vector<double> times(const char* key) {
    std::vector<double> out = numbers(key);
    for (size_t i = 0; i < out.size(); ++i)
      if (!(std::isfinite(out[i]) && out[i] > 0))
        fail(key, "trial " + std::to_string(i + 1) + " is " + json(out[i]).dump() +
                      ": a time is a number of µs above 0");
    return out;
  }
  // CUPTI's durations: finite and at least 0 (a call of copies alone has no
  // kernel time).
  std::vector<double> durations(const char* key) {
    std::vector<double> out = numbers(key);
    for (size_t i = 0; i < out.size(); ++i)
      if (!(std::isfinite(out[i]) && out[i] >= 0))
        fail(key, "value " + std::to_string(i + 1) + " is " + json(out[i]).dump() +
                      ": a duration is a number of µs, at least 0");
    return out;
  }
  std::vector<double> numbers(const char* key) {
    const json& v = get_typed(key, &json::is_array, "an array of numbers");
    std::vector<double> out;
    for (const json& x : v) {
      if (!x.is_number() && !x.is_null()) fail(key, "expected an array of numbers");
      out.push_back(x.is_null() ? NAN : x.get<double>());
    }
    return out;
  }
  std::vector<std::string> strings(const char* key) {
    const json& v = get_typed(key, &json::is_array, "an array of strings");
    std::vector<std::string> out;
    for (const json& x : v) {
      if (!x.is_string()) fail(key, "expected an array of strings");
      out.push_back(x.get<std::string>());
    }
    return out;
  }
  std::map<std::string, std::string> string_map(const char* key) {
    const json& v = get_typed(key, &json::is_object, "an object of strings");
    std::map<std::string, std::string> out;
    for (const auto& [k, x] : v.items()) {
      if (!x.is_string()) rd_.fail(path(key) + "." + k, "expected a string");
      out[k] = x.get<std::string>();
    }
    return out;
  }
  Interval interval(const char* key) {
    Obj o = object(key);
    Interval i;
    i.point = o.num("point");
    i.lo = o.num("lo");
    i.hi = o.num("hi");
    o.finish();
    return i;
  }
  void finish() const {
    for (const auto& [k, v] : j_.items())
      if (!used_.count(k)) rd_.fail(member_path(at_, k), "unknown field");
  }

 private:
  const Reader& rd_;
  const json& j_;
  std::string at_;
  std::set<std::string> used_;

  const json& get_typed(const char* key, bool (json::*is)() const noexcept, const char* what) {
    const json& v = get(key);
    if (!(v.*is)()) fail(key, std::string("expected ") + what);
    return v;
  }
};

json interval_to_json(const Interval& i) {
  return {{"point", i.point}, {"lo", i.lo}, {"hi", i.hi}};
}

Shape read_shape(Obj o) {
  Shape s;
  const std::string op = o.str("op");
  if (!parse_op(op, &s.op))
    o.fail("op", "unknown op '" + op + "' (expected pooler, dense, router or moe_w4a16)");
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

// Reads each element of an array field as an object.
template <class T, class F>
std::vector<T> read_array(const Reader& rd, Obj& o, const char* key, F read) {
  const json& arr = o.get(key);
  if (!arr.is_array()) o.fail(key, "expected an array of objects");
  std::vector<T> out;
  for (size_t i = 0; i < arr.size(); ++i)
    out.push_back(read(Obj(rd, arr[i], o.path(key) + "[" + std::to_string(i) + "]")));
  return out;
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

// `version` is the file's schema version; `run_seed` seeds a version-1
// shape's one replicate. A results file numbers a shape's replicates 1, 2, ...;
// a shape's process reports the one replicate it scored, whatever its index
// (`whole_shape` false).
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

ScoringRule read_scoring(Obj o) {
  ScoringRule r;
  const std::string a = o.str("aggregate");
  if (a == aggregate_name(ScoringRule::Aggregate::regimes)) r.aggregate = ScoringRule::Aggregate::regimes;
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
    o.fail("index", "shard " + std::to_string(sh.index) + " of " + std::to_string(sh.count) +
                        " (expected 1 <= index <= count)");
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
                                 " (this scorer reads versions 1 to " +
                                 std::to_string(kResultsSchemaVersion) + ")");
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

// nlohmann's message without its own position, which counts lines its way:
// "[json.exception.parse_error.101] parse error at line 3, column 3: <reason>".
// A number beyond a double: "[json.exception.out_of_range.406] number
// overflow parsing '1e999'".
std::string syntax_reason(const std::string& what) {
  const size_t col = what.find(", column ");
  const size_t colon = col == std::string::npos ? col : what.find(": ", col);
  const size_t bracket = what.rfind("] ", what.find(' '));
  const std::string reason = colon != std::string::npos ? what.substr(colon + 2)
                             : bracket != std::string::npos ? what.substr(bracket + 2)
                                                            : what;
  return reason.rfind("syntax error", 0) == 0 ? reason : "syntax error: " + reason;
}

}  // namespace

json shape_to_json(const Shape& s) {
  json dims = json::object();
  for (const OpDim& d : op_dims(s.op)) dims[d.name] = s.*d.field;
  return {{"name", s.name},
          {"op", op_name(s.op)},
          {"regime", s.regime},
          {"line", s.line},
          {"dims", dims}};
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
      {"scoring", {{"aggregate", aggregate_name(m.scoring.aggregate)},
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
    meta["gpus"].push_back({{"uuid", g.uuid}, {"name", g.name}, {"host", g.host}, {"device", g.device},
                            {"sm_clock_mhz", g.sm_clock_mhz}, {"mem_clock_mhz", g.mem_clock_mhz},
                            {"copy_gbps", g.copy_gbps}, {"empty_launch_us", g.empty_launch_us},
                            {"matrix_tflops", g.matrix_tflops}});
  if (m.shard.index > 0) {  // a whole run has no shard field
    json units = json::array();
    for (const ShardUnit& u : m.shard.units)
      units.push_back({{"shape", u.shape}, {"replicate", u.replicate}, {"scored", u.scored}, {"bytes", u.bytes},
                       {"flops", u.flops}, {"raw_limit_us", u.raw_limit_us}});
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
    if (r.status == "ok" && r.replicates.empty())
      rd.fail(at + ".replicates", "no replicates, though the status is ok");
    for (size_t k = 0; r.status == "ok" && k < r.replicates.size(); ++k) {
      const ReplicateResult& p = r.replicates[k];
      const std::string rat = version == 1 ? at : at + ".replicates[" + std::to_string(k) + "]";
      if (p.status != "ok")
        rd.fail(rat + ".status", "replicate " + std::to_string(p.index) + " is '" + p.status +
                                     "', though the shape's status is ok");
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
  const long failed = std::count_if(run.shapes.begin(), run.shapes.end(),
                                    [](const ShapeResult& r) { return r.status != "ok"; });
  if (run.shapes_failed != failed)
    o.fail("shapes_failed", std::to_string(run.shapes_failed) + ", but " + std::to_string(failed) +
                                " of the shapes have a status other than ok");
  run.flags = o.integer("flags");
  run.correctness_passed = o.boolean("correctness_passed");
  o.finish();
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
    Locator loc(text, "");
    loc.run();
    const int line = line_at(text, loc.error_at ? loc.error_at - 1 : 0);
    throw InputError(path + ":" + std::to_string(line) + ": " +
                     (loc.field.empty() ? "" : "field '" + loc.field + "': ") +
                     syntax_reason(e.what()));
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
