#include "scorer/recorded.h"
#include "scorer/file_io.h"
#include "scorer/toml_types.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace scorer {
namespace {

[[noreturn]] void fail(const std::string& path, int line, const std::string& field, const std::string& what) {
  throw InputError(path + ":" + std::to_string(line) + ": field '" + field + "': " + what);
}

int line_of(const toml::node& n) { return static_cast<int>(n.source().begin.line); }

std::string required_string(const toml::table& t, const std::string& key, const std::string& path) {
  const toml::node* n = t.get(key);
  if (!n) fail(path, 1, key, "missing");
  if (!n->is_string())
    fail(path, line_of(*n), key, std::string("expected a string, got ") + toml_type_phrase(n->type()));
  std::string s = **n->as_string();
  if (s.empty() || s.find('\n') != std::string::npos) fail(path, line_of(*n), key, "must be one non-empty line");
  return s;
}

std::map<std::string, double> times(const toml::table& t, const std::string& key, const std::string& path,
                                    std::map<std::string, int>& lines) {
  std::map<std::string, double> out;
  const toml::table* tt = t.get_as<toml::table>(key);
  for (const auto& [name, v] : *tt) {
    const std::string field = key + "." + std::string(name.str());
    if (!v.is_number())
      fail(path, line_of(v), field, std::string("expected a number of µs, got ") + toml_type_phrase(v.type()));
    double us = v.value<double>().value();
    if (!std::isfinite(us) || us <= 0) fail(path, line_of(v), field, "must be > 0 (got " + std::to_string(us) + ")");
    out[std::string(name.str())] = us;
    lines[field] = line_of(v);
  }
  return out;
}

}  // namespace

Recorded parse_recorded(const std::string& text, const std::string& path) {
  toml::table t;
  try {
    t = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    throw InputError(path + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  for (const auto& [key, v] : t) {
    const std::string k(key.str());
    if (k != "source" && k != "gpu" && k != "us" && k != "graph_us")
      fail(path, line_of(v), k, "unknown field (expected source, gpu, us, graph_us)");
    if ((k == "us" || k == "graph_us") && !v.is_table())
      fail(path, line_of(v), k, std::string("expected a table of shape times, got ") + toml_type_phrase(v.type()));
  }
  Recorded r;
  r.path = path;
  r.source = required_string(t, "source", path);
  r.gpu = required_string(t, "gpu", path);
  r.gpu_line = line_of(*t.get("gpu"));
  if (!t.contains("us")) fail(path, 1, "us", "missing");
  r.us = times(t, "us", path, r.lines);
  if (t.contains("graph_us")) r.graph_us = times(t, "graph_us", path, r.lines);
  return r;
}

Recorded load_recorded(const std::string& path) {
  return parse_recorded(read_input_file(path, kMaxShapesFileBytes, "a recorded baselines file"), path);
}

void apply_recorded(RunResult& run, const Recorded& rec) {
  const auto& table = run.meta.mode == "graph" ? rec.graph_us : rec.us;
  for (ShapeResult& s : run.shapes) {
    auto it = table.find(s.shape.name);
    s.recorded_us = it == table.end() ? 0 : it->second;
  }
  run.recorded_source = rec.source;
}

std::vector<std::string> recorded_unknown_names(const Recorded& rec, const ShapesFile& shapes) {
  std::vector<std::string> out;
  for (const auto& [field, line] : rec.lines) {
    const std::string name = field.substr(field.find('.') + 1);
    bool known = false;
    for (const Shape& s : shapes.shapes) known |= s.name == name;
    if (!known)
      out.push_back(rec.path + ":" + std::to_string(line) + ": field '" + field + "': no shape of " + shapes.path +
                    " has this name; its time is not used");
  }
  return out;
}

void check_recorded_gpu(const Recorded& rec, const std::string& gpu_name) {
  if (rec.gpu != gpu_name)
    fail(rec.path, rec.gpu_line, "gpu",
         "the times were recorded on " + rec.gpu + ", this run is on " + gpu_name + ": they do not apply here");
}

}  // namespace scorer
