// A record's JSON fields listed once, for its writer and its reader alike: a
// field cannot be written under one name and read under another, nor written
// and never read. A list is a tuple of field(name, member[, check]); a record
// whose reading is interleaved with other checks has several lists, read in
// turn with the checks between them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "scorer/json_reader.h"

namespace scorer {

// Intervals are written as {"point", "lo", "hi"} wherever they stand (nlohmann
// finds this by argument-dependent lookup); Obj::interval reads them.
inline void to_json(nlohmann::json& j, const Interval& i) { j = {{"point", i.point}, {"lo", i.lo}, {"hi", i.hi}}; }

namespace json_in {

// What a value read must be besides its type; it fails the field through `o`.
template <class M>
using FieldCheck = void (*)(Obj& o, const char* key, const M& value);

template <class T, class M>
struct Field {
  const char* name;
  M T::*member;
  FieldCheck<M> check;  // nullptr: any value of the type
};

template <class T, class M>
constexpr Field<T, M> field(const char* name, M T::*member, FieldCheck<M> check = nullptr) {
  return {name, member, check};
}

// An integer field's lower bound: "must be at least 1 (got 0)".
template <int kMin>
void at_least(Obj& o, const char* key, const int& v) {
  if (v < kMin) o.fail(key, "must be at least " + std::to_string(kMin) + " (got " + std::to_string(v) + ")");
}

// One value read by its member's type; records nested in a list add their own
// overload where they are defined.
inline void read_value(Obj& o, const char* key, std::string& v) { v = o.str(key); }
inline void read_value(Obj& o, const char* key, int& v) { v = o.integer(key); }
inline void read_value(Obj& o, const char* key, uint64_t& v) { v = o.u64(key); }
inline void read_value(Obj& o, const char* key, double& v) { v = o.num(key); }
inline void read_value(Obj& o, const char* key, bool& v) { v = o.boolean(key); }
inline void read_value(Obj& o, const char* key, Interval& v) { v = o.interval(key); }
inline void read_value(Obj& o, const char* key, std::vector<double>& v) { v = o.numbers(key); }
inline void read_value(Obj& o, const char* key, std::vector<std::string>& v) { v = o.strings(key); }
inline void read_value(Obj& o, const char* key, std::map<std::string, std::string>& v) { v = o.string_map(key); }

// Reads every field of the lists into `x`, in their order, each checked as it
// is read. Obj::finish is the caller's, after its last list.
template <class T, class... Lists>
void read_fields(Obj& o, T& x, const Lists&... lists) {
  const auto read_one = [&](const auto& f) {
    read_value(o, f.name, x.*f.member);
    if (f.check) f.check(o, f.name, x.*f.member);
  };
  (std::apply([&](const auto&... f) { (read_one(f), ...); }, lists), ...);
}

// A record that is an object of its own (nested, or an array's element).
template <class T, class... Lists>
T read_record(Obj o, const Lists&... lists) {
  T x;
  read_fields(o, x, lists...);
  o.finish();
  return x;
}

// The fields of the lists, written into `j` (an object).
template <class T, class... Lists>
void write_fields(json& j, const T& x, const Lists&... lists) {
  (std::apply([&](const auto&... f) { ((j[f.name] = x.*f.member), ...); }, lists), ...);
}

template <class T, class... Lists>
json fields_to_json(const T& x, const Lists&... lists) {
  json j = json::object();
  write_fields(j, x, lists...);
  return j;
}

}  // namespace json_in
}  // namespace scorer
