// Shapes: what the scorer scores. Loaded from a TOML file of [[shape]] tables
// (shapes.toml is the public set) and validated before any GPU work.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace scorer {

enum class Op { pooler, dense, router, moe_w4a16 };
const char* op_name(Op op);  // "pooler", "dense", "router", "moe_w4a16"
bool parse_op(const std::string& s, Op* op);

// Bad input (shapes file, results file, command line): the message is one line
// naming the file, the line and the field, e.g.
//   "shapes.toml:12: field 'H': must be a multiple of 128 for op moe_w4a16 (got 1000)"
// The CLI prints it and exits with code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A value from a file or the command line as an error message shows it:
// newlines and other control characters escaped, so that the message stays
// one line.
std::string printable(const std::string& v);

// A recorded routing (shapes.toml: routing = "file", trace = "PATH"): per
// token k global expert ids and their weights, in the trace's order. Read and
// validated with the shapes file (scorer/routing_trace.h).
struct RoutingTrace {
  std::string path;    // as the messages show it: the shapes file's directory joined with `trace`
  std::string sha256;  // of its bytes, part of the shapes file's identity
  int k = 0;
  std::vector<int32_t> ids;    // [tokens, k]
  std::vector<float> weights;  // [tokens, k]
  int tokens() const { return k ? int(ids.size() / size_t(k)) : 0; }
};

// How a moe_w4a16 shape's routing is drawn for each call (scorer/workload.h):
//   uniform: each token picks k distinct global experts uniformly;
//   zipf:    expert popularity falls as rank^-skew (the hottest first), over a
//            seeded permutation of the ids, k distinct picks per token;
//   file:    windows of M consecutive tokens of a recorded trace.
enum class RoutingKind { uniform, zipf, file };
const char* routing_kind_name(RoutingKind kind);  // "uniform", "zipf", "file"
struct RoutingSpec {
  RoutingKind kind = RoutingKind::uniform;
  double skew = 0;                            // zipf only
  std::shared_ptr<const RoutingTrace> trace;  // file only
};

// One shape. Only the dims of its op are meaningful; the rest stay 0.
struct Shape {
  std::string name;
  Op op = Op::dense;
  std::string regime;
  int line = 0;  // line of its [[shape]] header in the file
  // pooler: B, H, min_len, max_len (sequence lengths drawn from the seed)
  int B = 0, min_len = 1, max_len = 512;
  // dense: M, N, K
  int M = 0, N = 0, K = 0;
  // router: T, H, E, k
  int T = 0, E = 0, k = 0;
  // moe_w4a16: M, H, I, E_global, E_local, k, ep_rank
  int H = 0, I = 0, E_global = 0, E_local = 0, ep_rank = 0;
  RoutingSpec routing;  // moe_w4a16 only

  std::string dims_string() const;  // "M=32 N=6144 K=4096": the op's dims in order
};

// Each op's dims, in the order of the shapes file and dims_string(): the one
// table the shapes file, the results files and the CLI all read.
using ShapeDim = int Shape::*;
struct OpDim {
  const char* name;
  ShapeDim field;
  bool required;  // an optional dim keeps Shape's default
  int min;        // smallest valid value
};
const std::vector<OpDim>& op_dims(Op op);

// How per-shape speedups make one number (shapes.toml's optional [scoring]
// table; computed by scorer/stats.h):
//   aggregate = "shapes":  the geometric mean over shapes (the default);
//               "regimes": the geometric mean over regimes of each regime's
//               geometric mean over its shapes, weighted by [scoring.weights]
//               (one positive weight per regime of the file) or equally;
//   failed = "none": a failed shape leaves the run with no aggregate (the
//               default); a number in (0, 1]: a failed shape counts as that
//               speedup (e.g. 0.5).
struct ScoringRule {
  enum class Aggregate { shapes, regimes };
  Aggregate aggregate = Aggregate::shapes;       // geomean over shapes, or over regime geomeans
  std::map<std::string, double> regime_weights;  // empty: equal weights
  double failed_speedup = 0;                     // 0: a failed shape leaves the run with no aggregate;
                                                 // > 0: a failed shape counts as this speedup (e.g. 0.5)
};
const char* aggregate_name(ScoringRule::Aggregate a);  // "shapes", "regimes"

struct ShapesFile {
  std::string path;
  // Of the file's bytes; where shapes replay traces, of the file's bytes
  // followed by each trace's sha256 in file order, so that a changed trace
  // is another shapes file to diff.
  std::string sha256;
  std::vector<Shape> shapes;
  ScoringRule scoring;
};

// Parses and validates; throws InputError on the first problem.
ShapesFile load_shapes(const std::string& path);
// The same on a string, for tests; `path` is only used in messages.
ShapesFile parse_shapes(const std::string& text, const std::string& path);

// The shapes that `--filter GLOB[,GLOB]` and `--regime R` select, in file
// order. A glob matches a whole name (fnmatch): "moe_qwen3_m1" is that shape
// alone, "moe_qwen3*" all four of qwen3. A shape is selected when some glob
// matches it (or none is given) and its regime is one of those given (or
// none is). A glob or a regime that matches no shape of the file is a typo
// rather than a wish for nothing, and so is a selection left empty: each
// throws an InputError that names it.
std::vector<Shape> select_shapes(const ShapesFile& file, const std::vector<std::string>& globs,
                                 const std::vector<std::string>& regimes);

}  // namespace scorer
