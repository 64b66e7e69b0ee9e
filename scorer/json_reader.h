// Reading a JSON document strictly (results files and the scorer's child
// processes' replies): every field is fetched by name and type, unknown
// fields are refused, and every error is one InputError naming the file, the
// line and the field's path, e.g.
//   "results/latest.json:12: field 'shapes[0].status': unknown status 'fine'".
// The line is found by replaying the text (nlohmann keeps no positions) in
// time and memory linear in the text, however deeply it nests.
#pragma once

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "scorer/results.h"

namespace scorer {
namespace json_in {

using json = nlohmann::json;

std::string member_path(const std::string& at, const std::string& key);

// Limits on what a results file may hold, so that a forged one cannot make
// the statistics overflow or exhaust memory: trial times in µs within
// [kMinTimeUs, kMaxTimeUs], at most kMaxTrials per array.
constexpr double kMinTimeUs = 1e-3;
constexpr double kMaxTimeUs = 1e11;
constexpr size_t kMaxTrials = 1000000;

// Reads the typed fields of one JSON document strictly; every error names the
// file, the line (when the text is known) and the field's path.
class Reader {
 public:
  // `text` (may be empty) must outlive the reader.
  Reader(const std::string& path, const std::string& text) : path_(path), text_(text) {}

  // Throws InputError "PATH:LINE: field 'FIELD': MSG" (no line without the text).
  [[noreturn]] void fail(const std::string& field, const std::string& msg) const;

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
  [[noreturn]] void fail(const char* key, const std::string& msg) const { rd_.fail(path(key), msg); }

  const json& get(const char* key) {
    const auto it = j_.find(key);
    if (it == j_.end()) fail(key, "missing");
    used_.insert(key);
    return *it;
  }
  Obj object(const char* key) { return Obj(rd_, get_typed(key, &json::is_object, "an object"), path(key)); }
  // Strings come back printable (control characters escaped, shapes.h):
  // whatever a file holds, a message that shows it stays one line.
  std::string str(const char* key) {
    return printable(get_typed(key, &json::is_string, "a string").get<std::string>());
  }
  bool has(const char* key) const { return j_.contains(key); }
  bool boolean(const char* key) { return get_typed(key, &json::is_boolean, "a boolean").get<bool>(); }
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
    const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(std::numeric_limits<int>::max())
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
  std::vector<double> numbers(const char* key) {
    const json& v = get_typed(key, &json::is_array, "an array of numbers");
    if (v.size() > kMaxTrials)
      fail(key, "holds " + std::to_string(v.size()) + " values, more than the " + std::to_string(kMaxTrials) +
                    " a results file may hold");
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
      out.push_back(printable(x.get<std::string>()));
    }
    return out;
  }
  std::map<std::string, std::string> string_map(const char* key) {
    const json& v = get_typed(key, &json::is_object, "an object of strings");
    std::map<std::string, std::string> out;
    for (const auto& [k, x] : v.items()) {
      if (!x.is_string()) rd_.fail(path(key) + "." + k, "expected a string");
      out[printable(k)] = printable(x.get<std::string>());
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

// Trial times: each a finite number of µs above 0 (a time of 0, or NaN,
// would pass through the statistics as an undefined ratio).
void check_times(Obj& o, const char* key, const std::vector<double>& v);
// CUPTI's durations: finite and at least 0 (a call of copies alone has no
// kernel time).
void check_durations(Obj& o, const char* key, const std::vector<double>& v);

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

// The InputError for text nlohmann could not parse (`what` its message):
// "PATH:LINE: field 'F': syntax error: ...".
[[noreturn]] void fail_syntax(const std::string& text, const std::string& path, const std::string& what);

// A shape's result (shape_result_json.cpp). `version` is the file's schema
// version; `run_seed` seeds a version-1 shape's one replicate. A results file
// numbers a shape's replicates 1, 2, ...; a shape's process reports the one
// replicate it scored, whatever its index (`whole_shape` false).
ShapeResult read_shape_result(const Reader& rd, Obj o, int version, uint64_t run_seed, bool whole_shape);

}  // namespace json_in
}  // namespace scorer
