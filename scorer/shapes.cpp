// Compiled by g++ only: toml++ does not compile under nvcc.
#include "shapes.h"

#include <fnmatch.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <string_view>

#include "reference/reference.h"
#include "scorer/file_io.h"
#include "scorer/routing_trace.h"
#include "scorer/toml_types.h"
#include "scorer/workload.h"
#include "sha256.h"
#include "submission/submission.h"

namespace scorer {
namespace {

constexpr int64_t kMaxDim = 1000000;
constexpr double kMaxBytes = 32.0 * (1ull << 30);
constexpr double kMaxHostBytes = 8.0 * (1ull << 30);  // host_bytes(): routings held on the host

}  // namespace

const std::vector<OpDim>& op_dims(Op op) {
  static const std::vector<OpDim> pooler = {{"B", &Shape::B, true, 1},
                                            {"H", &Shape::H, true, 1},
                                            {"min_len", &Shape::min_len, false, 1},
                                            {"max_len", &Shape::max_len, false, 1}};
  static const std::vector<OpDim> dense = {
      {"M", &Shape::M, true, 1}, {"N", &Shape::N, true, 1}, {"K", &Shape::K, true, 1}};
  static const std::vector<OpDim> router = {
      {"T", &Shape::T, true, 1}, {"H", &Shape::H, true, 1}, {"E", &Shape::E, true, 1}, {"k", &Shape::k, true, 1}};
  static const std::vector<OpDim> moe = {{"M", &Shape::M, true, 1},
                                         {"H", &Shape::H, true, 1},
                                         {"I", &Shape::I, true, 1},
                                         {"E_global", &Shape::E_global, true, 1},
                                         {"E_local", &Shape::E_local, true, 1},
                                         {"k", &Shape::k, true, 1},
                                         {"ep_rank", &Shape::ep_rank, true, 0}};
  switch (op) {
    case Op::pooler:
      return pooler;
    case Op::dense:
      return dense;
    case Op::router:
      return router;
    case Op::moe_w4a16:
      return moe;
  }
  return dense;
}

namespace {

constexpr Op kOps[] = {Op::pooler, Op::dense, Op::router, Op::moe_w4a16};

bool is_dim_of_any_op(const std::string& key) {
  for (Op op : kOps)
    for (const OpDim& d : op_dims(op))
      if (key == d.name) return true;
  return false;
}

// A moe_w4a16 shape's routing fields (RoutingSpec).
bool is_routing_key(const std::string& key) { return key == "routing" || key == "skew" || key == "trace"; }
constexpr double kMaxSkew = 8;

std::string dim_list(Op op) {
  std::string s;
  for (const OpDim& d : op_dims(op)) s += (s.empty() ? "" : ", ") + std::string(d.name);
  return s;
}

bool valid_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  return true;
}

}  // namespace

std::string printable(const std::string& v) {
  std::string out;
  for (unsigned char c : v) {
    if (c == '\n')
      out += "\\n";
    else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof b, "\\x%02x", c);
      out += b;
    } else
      out += char(c);
  }
  return out;
}

const char* routing_kind_name(RoutingKind kind) {
  switch (kind) {
    case RoutingKind::uniform:
      return "uniform";
    case RoutingKind::zipf:
      return "zipf";
    case RoutingKind::file:
      return "file";
  }
  return "?";
}

const char* aggregate_name(ScoringRule::Aggregate a) {
  return a == ScoringRule::Aggregate::regimes ? "regimes" : "shapes";
}

const char* op_name(Op op) {
  switch (op) {
    case Op::pooler:
      return "pooler";
    case Op::dense:
      return "dense";
    case Op::router:
      return "router";
    case Op::moe_w4a16:
      return "moe_w4a16";
  }
  return "?";
}

bool parse_op(const std::string& s, Op* op) {
  for (Op o : kOps)
    if (s == op_name(o)) {
      *op = o;
      return true;
    }
  return false;
}

std::string Shape::dims_string() const {
  std::string s;
  for (const OpDim& d : op_dims(op))
    s += (s.empty() ? "" : " ") + std::string(d.name) + "=" + std::to_string(this->*d.field);
  return s;
}

namespace {

class Parser {
 public:
  explicit Parser(const std::string& path) : path_(path) {}

  [[noreturn]] void fail(int line, const std::string& field, const std::string& msg) const {
    throw InputError(path_ + ":" + std::to_string(line) + ": field '" + printable(field) + "': " + msg);
  }

  std::vector<Shape> shapes(const toml::table& root) {
    for (auto&& [key, node] : root)
      if (key.str() != "shape" && key.str() != "scoring")
        fail(key.source().begin.line, std::string(key.str()),
             "not allowed outside a [[shape]] table (the file holds [[shape]] tables and an optional [scoring] "
             "table)");
    const toml::node* list = root.get("shape");
    if (!list) fail(1, "shape", "no [[shape]] tables in the file");
    const toml::array* arr = list->as_array();
    if (!arr || !arr->is_array_of_tables())
      fail(list->source().begin.line, "shape", "must be an array of tables, written [[shape]]");
    std::vector<Shape> out;
    for (const toml::node& n : *arr) out.push_back(shape(*n.as_table()));
    if (out.empty()) fail(list->source().begin.line, "shape", "no [[shape]] tables in the file");
    return out;
  }

  // The optional [scoring] table (ScoringRule); its fields' messages name them
  // scoring.FIELD.
  ScoringRule scoring(const toml::table& root, const std::vector<Shape>& shapes) const {
    ScoringRule rule;
    const toml::node* node = root.get("scoring");
    if (!node) return rule;
    const toml::table* t = node->as_table();
    if (!t) fail(node->source().begin.line, "scoring", "must be a table, written [scoring]");
    for (auto&& [key, n] : *t)
      if (key.str() != "aggregate" && key.str() != "weights" && key.str() != "failed")
        fail(key.source().begin.line, "scoring." + std::string(key.str()),
             "unknown field (a [scoring] table has aggregate, weights and failed)");
    if (const toml::node* n = t->get("aggregate")) {
      const std::string v = n->is_string() ? n->as_string()->get() : "";
      if (v == "regimes")
        rule.aggregate = ScoringRule::Aggregate::regimes;
      else if (v != "shapes")
        fail(n->source().begin.line, "scoring.aggregate",
             "expected \"shapes\" or \"regimes\", got " +
                 (n->is_string() ? "'" + printable(v) + "'" : std::string(toml_type_phrase(n->type()))));
    }
    if (const toml::node* n = t->get("weights")) {
      const int line = n->source().begin.line;
      if (rule.aggregate != ScoringRule::Aggregate::regimes)
        fail(line, "scoring.weights", "weights apply to aggregate = \"regimes\" only");
      const toml::table* w = n->as_table();
      if (!w) fail(line, "scoring.weights", std::string("expected a table, got ") + toml_type_phrase(n->type()));
      std::vector<std::string> regimes;  // of the file, in order of first appearance
      for (const Shape& s : shapes)
        if (std::find(regimes.begin(), regimes.end(), s.regime) == regimes.end()) regimes.push_back(s.regime);
      for (auto&& [key, v] : *w) {
        const std::string field = "scoring.weights." + printable(std::string(key.str()));
        if (std::find(regimes.begin(), regimes.end(), std::string(key.str())) == regimes.end())
          fail(key.source().begin.line, field, "no shape of the file has this regime");
        const double x = v.is_integer()          ? double(v.as_integer()->get())
                         : v.is_floating_point() ? v.as_floating_point()->get()
                                                 : NAN;
        if (!(x > 0 && x <= 1e6)) fail(v.source().begin.line, field, "expected a number above 0 and at most 1e6");
        rule.regime_weights[std::string(key.str())] = x;
      }
      for (const std::string& r : regimes)
        if (!rule.regime_weights.count(r))
          fail(line, "scoring.weights", "no weight for regime '" + r + "' (give every regime one, or none)");
    }
    if (const toml::node* n = t->get("failed")) {
      const bool none = n->is_string() && n->as_string()->get() == "none";
      const double x = n->is_integer()          ? double(n->as_integer()->get())
                       : n->is_floating_point() ? n->as_floating_point()->get()
                                                : NAN;
      if (!none && !(x > 0 && x <= 1))
        fail(n->source().begin.line, "scoring.failed",
             "expected \"none\" (a failed shape voids the aggregate) or a speedup above 0 and at most 1 that a "
             "failed shape counts as");
      rule.failed_speedup = none ? 0 : x;
    }
    return rule;
  }

 private:
  std::string path_;
  std::map<std::string, int> name_lines_;  // for duplicate names

  Shape shape(const toml::table& t) {
    Shape s;
    s.line = t.source().begin.line;
    for (auto&& [key, node] : t) {
      const std::string k(key.str());
      if (k != "name" && k != "op" && k != "regime" && !is_dim_of_any_op(k) && !is_routing_key(k))
        fail(key.source().begin.line, k,
             "unknown field (a shape has name, op, regime, its op's dims and, for moe_w4a16, routing, skew, "
             "trace)");
    }
    s.name = string_field(t, "name", s.line);
    const std::string op = string_field(t, "op", s.line);
    if (!parse_op(op, &s.op))
      fail(line_of(t, "op"), "op", "unknown op '" + printable(op) + "' (expected pooler, dense, router or moe_w4a16)");
    s.regime = string_field(t, "regime", s.line);

    if (!valid_name(s.name))
      fail(line_of(t, "name"), "name", "must match [A-Za-z0-9_.-]+ (got \"" + printable(s.name) + "\")");
    const auto [it, fresh] = name_lines_.emplace(s.name, line_of(t, "name"));
    if (!fresh)
      fail(line_of(t, "name"), "name",
           "duplicate name '" + s.name + "' (first used at line " + std::to_string(it->second) + ")");
    // A regime is printed in tables and the package's MANIFEST like a name.
    if (!valid_name(s.regime))
      fail(line_of(t, "regime"), "regime", "must match [A-Za-z0-9_.-]+ (got \"" + printable(s.regime) + "\")");

    for (auto&& [key, node] : t) {
      const std::string k(key.str());
      if (k == "name" || k == "op" || k == "regime") continue;
      if (is_routing_key(k)) {
        if (s.op != Op::moe_w4a16)
          fail(key.source().begin.line, k, std::string("only op moe_w4a16 has a routing (op ") + op_name(s.op) + ")");
        continue;
      }
      bool ours = false;
      for (const OpDim& d : op_dims(s.op)) ours |= k == d.name;
      if (!ours)
        fail(key.source().begin.line, k,
             std::string("not a dim of op ") + op_name(s.op) + " (its dims: " + dim_list(s.op) + ")");
    }
    for (const OpDim& d : op_dims(s.op)) {
      const toml::node* n = t.get(d.name);
      if (!n) {
        if (d.required)
          fail(s.line, d.name, std::string("missing (op ") + op_name(s.op) + " needs " + dim_list(s.op) + ")");
        continue;
      }
      if (!n->is_integer())
        fail(n->source().begin.line, d.name, std::string("expected an integer, got ") + toml_type_phrase(n->type()));
      const int64_t v = n->as_integer()->get();
      if (v < d.min || v > kMaxDim)
        fail(n->source().begin.line, d.name,
             "must be between " + std::to_string(d.min) + " and " + std::to_string(kMaxDim) + " (got " +
                 std::to_string(v) + ")");
      s.*d.field = int(v);
    }
    check_op_rules(s, t);
    const double bytes = device_bytes(s);
    if (bytes > kMaxBytes) {
      std::ostringstream m;
      m << std::fixed << std::setprecision(1) << "shape '" << s.name << "' takes " << bytes / (1ull << 30)
        << " GiB of device memory per weight set, more than the limit of " << kMaxBytes / (1ull << 30) << " GiB ("
        << s.dims_string() << ")";
      throw InputError(path_ + ":" + std::to_string(s.line) + ": fields " + dim_list(s.op) + ": " + m.str());
    }
    // Host memory too: a shape within the device's limit can still need more
    // host memory for its routings than any host has (M = 10^6, k = 4000).
    if (host_bytes(s) > kMaxHostBytes) {
      std::ostringstream m;
      m << std::fixed << std::setprecision(1) << "shape '" << s.name << "' takes " << host_bytes(s) / (1ull << 30)
        << " GiB of host memory for its routings, more than the limit of " << kMaxHostBytes / (1ull << 30) << " GiB ("
        << s.dims_string() << ")";
      throw InputError(path_ + ":" + std::to_string(s.line) + ": fields M, k: " + m.str());
    }
    if (s.op == Op::moe_w4a16) s.routing = routing(s, t);
    return s;
  }

  // routing = "uniform" (the default) | "zipf" with skew | "file" with trace.
  RoutingSpec routing(const Shape& s, const toml::table& t) const {
    RoutingSpec r;
    if (const toml::node* n = t.get("routing")) {
      if (!n->is_string())
        fail(n->source().begin.line, "routing", std::string("expected a string, got ") + toml_type_phrase(n->type()));
      const std::string v = n->as_string()->get();
      if (v == "zipf")
        r.kind = RoutingKind::zipf;
      else if (v == "file")
        r.kind = RoutingKind::file;
      else if (v != "uniform")
        fail(n->source().begin.line, "routing",
             "unknown routing '" + printable(v) + "' (expected uniform, zipf or file)");
    }
    const std::string kind = std::string("routing \"") + routing_kind_name(r.kind) + "\"";
    auto only_with = [&](const char* field, RoutingKind needs, const char* needs_name) {
      const toml::node* n = t.get(field);
      if (n && r.kind != needs)
        fail(n->source().begin.line, field,
             std::string("only routing \"") + needs_name + "\" has a " + field + " (this shape's is " + kind + ")");
      if (!n && r.kind == needs) fail(line_of(t, "routing"), field, "missing (" + kind + " needs a " + field + ")");
      return n;
    };
    if (const toml::node* n = only_with("skew", RoutingKind::zipf, "zipf")) {
      if (!n->is_number())
        fail(n->source().begin.line, "skew", std::string("expected a number, got ") + toml_type_phrase(n->type()));
      r.skew = n->is_integer() ? double(n->as_integer()->get()) : n->as_floating_point()->get();
      if (!(r.skew > 0 && r.skew <= kMaxSkew)) {
        std::ostringstream m;
        m << "must be above 0 and at most " << kMaxSkew << " (got " << r.skew << ")";
        fail(n->source().begin.line, "skew", m.str());
      }
    }
    if (const toml::node* n = only_with("trace", RoutingKind::file, "file")) {
      if (!n->is_string())
        fail(n->source().begin.line, "trace", std::string("expected a string, got ") + toml_type_phrase(n->type()));
      r.trace = load_routing_trace(path_, n->source().begin.line, n->as_string()->get(), s);
    }
    return r;
  }

  static int line_of(const toml::table& t, const char* key) {
    const toml::node* n = t.get(key);
    return n ? int(n->source().begin.line) : int(t.source().begin.line);
  }

  std::string string_field(const toml::table& t, const char* key, int header_line) {
    const toml::node* n = t.get(key);
    if (!n) fail(header_line, key, "missing");
    if (!n->is_string())
      fail(n->source().begin.line, key, std::string("expected a string, got ") + toml_type_phrase(n->type()));
    return n->as_string()->get();
  }

  // The submission's own rules (submission.h: dims_error, its "Valid:" lines as code), then the
  // baselines' limits and the workload's (min_len <= max_len).
  void check_op_rules(const Shape& s, const toml::table& t) const {
    auto submission_rules = [&](const submission::DimsError& e) {
      if (!e.field.empty()) fail(line_of(t, e.field.c_str()), e.field, e.why);
    };
    switch (s.op) {
      case Op::pooler:
        submission_rules(submission::dims_error(submission::PoolerDims{s.B, s.H}));
        if (s.min_len > s.max_len)
          fail(line_of(t, "min_len"), "min_len",
               "must be at most max_len (got min_len=" + std::to_string(s.min_len) +
                   ", max_len=" + std::to_string(s.max_len) + ")");
        break;
      case Op::dense:
        submission_rules(submission::dims_error(submission::DenseDims{s.M, s.N, s.K}));
        break;
      case Op::router:
        submission_rules(submission::dims_error(submission::RouterDims{s.T, s.H, s.E, s.k}));
        if (reference::router_topk_smem_bytes(s.E, s.k) > reference::kBaselineSmemBytes) {
          const long most = (long(reference::kBaselineSmemBytes) - long(s.k * sizeof(float))) / long(sizeof(float) + 1);
          fail(line_of(t, "E"), "E",
               "too many experts for the baseline's top-k, which keeps a token's logits in one block (at most " +
                   std::to_string(std::max(most, 0L)) + " with k=" + std::to_string(s.k) +
                   ", got E=" + std::to_string(s.E) + ")");
        }
        break;
      case Op::moe_w4a16:
        submission_rules(
            submission::dims_error(submission::MoeDims{s.M, s.H, s.I, s.E_global, s.E_local, s.k, s.ep_rank}));
        if (reference::moe_align_smem_bytes(s.E_local) > reference::kBaselineSmemBytes)
          fail(line_of(t, "E_local"), "E_local",
               "too many local experts for the baseline's alignment, which counts them in one block (at most " +
                   std::to_string(reference::kBaselineSmemBytes / reference::moe_align_smem_bytes(1)) +
                   ", got E_local=" + std::to_string(s.E_local) + ")");
        break;
    }
  }
};

}  // namespace

ShapesFile parse_shapes(const std::string& text, const std::string& path) {
  toml::table root;
  try {
    root = toml::parse(std::string_view(text), std::string_view(path));
  } catch (const toml::parse_error& e) {
    throw InputError(path + ":" + std::to_string(e.source().begin.line) + ": syntax error at column " +
                     std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
  ShapesFile f;
  f.path = path;
  Parser parser(path);
  f.shapes = parser.shapes(root);
  f.scoring = parser.scoring(root, f.shapes);
  std::string identity = text;
  for (const Shape& s : f.shapes)
    if (s.routing.trace) identity += "\n" + s.routing.trace->sha256;
  f.sha256 = sha256_string(identity);
  return f;
}

ShapesFile load_shapes(const std::string& path) {
  return parse_shapes(read_input_file(path, kMaxShapesFileBytes, "a shapes file"), path);
}

std::vector<Shape> select_shapes(const ShapesFile& file, const std::vector<std::string>& globs,
                                 const std::vector<std::string>& regimes) {
  // One pass: which globs and regimes matched some shape, and the shapes both select.
  std::vector<bool> glob_used(globs.size()), regime_used(regimes.size());
  std::vector<Shape> out;
  for (const auto& s : file.shapes) {
    bool by_name = globs.empty(), by_regime = regimes.empty();
    for (size_t i = 0; i < globs.size(); ++i)
      if (fnmatch(globs[i].c_str(), s.name.c_str(), 0) == 0) by_name = glob_used[i] = true;
    for (size_t i = 0; i < regimes.size(); ++i)
      if (s.regime == regimes[i]) by_regime = regime_used[i] = true;
    if (by_name && by_regime) out.push_back(s);
  }
  for (size_t i = 0; i < globs.size(); ++i)
    if (!glob_used[i])
      throw InputError("command line: --filter '" + printable(globs[i]) + "' matches no shape of " + file.path +
                       " (a glob matches whole names: try '" + printable(globs[i]) + "*')");
  for (size_t i = 0; i < regimes.size(); ++i)
    if (!regime_used[i])
      throw InputError("command line: --regime '" + printable(regimes[i]) + "' is no regime of " + file.path);
  if (out.empty()) throw InputError("command line: no shape of " + file.path + " matches both --filter and --regime");
  return out;
}

}  // namespace scorer
