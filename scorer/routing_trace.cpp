#include "scorer/routing_trace.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "scorer/sha256.h"

namespace scorer {
namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& file, int line, const std::string& field, const std::string& msg) {
  throw InputError(file + ":" + std::to_string(line) + ": field '" + field + "': " + msg);
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// One line's ids: k decimal integers, distinct, each a global expert.
void parse_ids(const std::string& part, const Shape& s, const std::string& file, int line, RoutingTrace& t) {
  const std::vector<std::string> w = words(part);
  if (int(w.size()) != s.k)
    fail(file, line, "ids", "expected k = " + std::to_string(s.k) + " expert ids, got " + std::to_string(w.size()));
  const size_t first = t.ids.size();
  for (const std::string& x : w) {
    char* end = nullptr;
    errno = 0;
    const long v = std::strtol(x.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE || x.empty())
      fail(file, line, "ids", "expected an integer, got '" + printable(x) + "'");
    if (v < 0 || v >= s.E_global)
      fail(file, line, "ids",
           "expert " + std::to_string(v) + " out of range (0 to E_global-1 = " + std::to_string(s.E_global - 1) + ")");
    for (size_t i = first; i < t.ids.size(); ++i)
      if (t.ids[i] == v) fail(file, line, "ids", "expert " + std::to_string(v) + " given twice in one token");
    t.ids.push_back(int32_t(v));
  }
}

void parse_weights(const std::string& part, const Shape& s, const std::string& file, int line, RoutingTrace& t) {
  const std::vector<std::string> w = words(part);
  if (int(w.size()) != s.k)
    fail(file, line, "weights", "expected k = " + std::to_string(s.k) + " weights, got " + std::to_string(w.size()));
  for (const std::string& x : w) {
    char* end = nullptr;
    const double v = std::strtod(x.c_str(), &end);
    if (*end != '\0' || x.empty()) fail(file, line, "weights", "expected a number, got '" + printable(x) + "'");
    if (!std::isfinite(float(v)) || v < 0)
      fail(file, line, "weights", "must be finite and at least 0 (got " + printable(x) + ")");
    t.weights.push_back(float(v));
  }
}

std::shared_ptr<RoutingTrace> parse(const std::string& text, const std::string& shown_path, const Shape& s) {
  auto t = std::make_shared<RoutingTrace>();
  t->path = shown_path;
  t->k = s.k;
  std::istringstream in(text);
  int line = 0;
  for (std::string l; std::getline(in, l);) {
    ++line;
    if (!l.empty() && l.back() == '\r') l.pop_back();
    const std::vector<std::string> w = words(l);
    if (w.empty() || w[0][0] == '#') continue;
    const size_t bar = l.find('|');
    if (bar == std::string::npos || l.find('|', bar + 1) != std::string::npos)
      fail(shown_path, line, "ids", "expected 'ID ... ID | WEIGHT ... WEIGHT' (k ids, one '|', k weights)");
    parse_ids(l.substr(0, bar), s, shown_path, line, *t);
    parse_weights(l.substr(bar + 1), s, shown_path, line, *t);
  }
  if (t->ids.empty()) fail(shown_path, std::max(line, 1), "ids", "no tokens in the trace");
  return t;
}

}  // namespace

std::shared_ptr<const RoutingTrace> parse_routing_trace(const std::string& text, const std::string& shown_path,
                                                        const Shape& s) {
  return parse(text, shown_path, s);
}

std::shared_ptr<const RoutingTrace> load_routing_trace(const std::string& shapes_path, int line,
                                                       const std::string& trace, const Shape& s) {
  auto bad_path = [&](const std::string& msg) { fail(shapes_path, line, "trace", msg); };
  const fs::path rel(trace);
  if (trace.empty() || rel.is_absolute())
    bad_path("must be a path relative to the shapes file's directory (got \"" + printable(trace) + "\")");
  const fs::path dir = fs::path(shapes_path).parent_path();
  const std::string shown = (dir / rel).lexically_normal().string();
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(fs::absolute(dir.empty() ? fs::path(".") : dir, ec), ec);
  const fs::path target = fs::weakly_canonical(fs::absolute(dir / rel, ec), ec);
  if (ec) bad_path(shown + ": cannot resolve: " + ec.message());
  // Inside: the directory's components are a prefix of the target's.
  auto b = base.begin(), x = target.begin();
  while (b != base.end() && x != target.end() && *b == *x) ++b, ++x;
  if (b != base.end())
    bad_path("\"" + printable(trace) + "\" leaves the shapes file's directory (" + base.string() + ")");
  const fs::file_status st = fs::status(target, ec);
  if (!fs::exists(st)) bad_path(shown + ": cannot read: " + std::strerror(ENOENT));
  if (!fs::is_regular_file(st)) bad_path(shown + ": not a regular file");
  std::ifstream in(target, std::ios::binary);
  if (!in) bad_path(shown + ": cannot read: " + std::strerror(errno));
  std::string text(kMaxTraceBytes + 1, '\0');
  in.read(text.data(), std::streamsize(text.size()));
  if (in.bad()) bad_path(shown + ": cannot read: " + std::strerror(errno));
  text.resize(size_t(in.gcount()));
  if (text.size() > kMaxTraceBytes)
    bad_path(shown + ": larger than " + std::to_string(kMaxTraceBytes >> 20) + " MiB, the most a trace may hold");

  std::shared_ptr<RoutingTrace> t = parse(text, shown, s);
  if (t->tokens() < 2 * s.M)
    bad_path(shown + " holds " + std::to_string(t->tokens()) + " tokens, fewer than two windows of M = " +
             std::to_string(s.M) + " (consecutive calls must replay different windows)");
  t->sha256 = sha256_string(text);
  return t;
}

}  // namespace scorer
