// Shapes: what the scorer scores. Loaded from a TOML file of [[shape]] tables
// (shapes.toml is the public set) and validated before any GPU work.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace scorer {

enum class Op { pooler, dense, router, moe_w4a16 };
const char* op_name(Op op);          // "pooler", "dense", "router", "moe_w4a16"
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

struct ShapesFile {
  std::string path;
  std::string sha256;  // of the file's bytes
  std::vector<Shape> shapes;
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
