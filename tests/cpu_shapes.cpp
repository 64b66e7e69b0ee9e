// The shapes file: the public set, and one error message per kind of bad input
// (each must name the file, the line and the field). Run from the repository
// root, where shapes.toml is.
#include <doctest/doctest.h>
#include <unistd.h>

#include <sys/stat.h>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "scorer/routing_trace.h"
#include "scorer/sha256.h"
#include "scorer/shapes.h"
#include "tests/temp_dir.h"

using scorer::InputError;
using scorer::Op;
using scorer::parse_shapes;

namespace {

// The message of the InputError that parsing `text` throws.
std::string error_of(const std::string& text) {
  try {
    parse_shapes(text, "t.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "(no error)";
}

// A dense shape whose header is on line 1 and whose fields are on lines 2..7
// (name, op, regime, M, N, K), with `extra` appended from line 8.
std::string dense(const std::string& name = "d", const std::string& M = "32", const std::string& N = "64",
                  const std::string& K = "128", const std::string& extra = "") {
  return "[[shape]]\nname = \"" + name + "\"\nop = \"dense\"\nregime = \"r\"\nM = " + M + "\nN = " + N + "\nK = " + K +
         "\n" + extra;
}

// A moe_w4a16 shape, header on line 1, then name, op, regime (2..4) and
// M, H, I, E_global, E_local, k, ep_rank on lines 5..11.
std::string moe(int M, int H, int I, int E_global, int E_local, int k, int ep_rank) {
  return "[[shape]]\nname = \"m\"\nop = \"moe_w4a16\"\nregime = \"moe\"\nM = " + std::to_string(M) +
         "\nH = " + std::to_string(H) + "\nI = " + std::to_string(I) + "\nE_global = " + std::to_string(E_global) +
         "\nE_local = " + std::to_string(E_local) + "\nk = " + std::to_string(k) +
         "\nep_rank = " + std::to_string(ep_rank) + "\n";
}

std::string file_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("the public shapes.toml parses into its 27 shapes") {
  const scorer::ShapesFile f = scorer::load_shapes("shapes.toml");
  REQUIRE(f.shapes.size() == 27);
  CHECK(f.path == "shapes.toml");

  std::set<std::string> names;
  int per_op[4] = {};
  for (const scorer::Shape& s : f.shapes) {
    names.insert(s.name);
    ++per_op[int(s.op)];
    CHECK(s.line > 0);
    CHECK(!s.regime.empty());
  }
  CHECK(names.size() == 27);
  CHECK(per_op[int(Op::pooler)] == 4);
  CHECK(per_op[int(Op::dense)] == 4);
  CHECK(per_op[int(Op::router)] == 5);
  CHECK(per_op[int(Op::moe_w4a16)] == 14);

  const scorer::Shape& p = f.shapes[0];
  CHECK(p.name == "pooler_b8_h1024");
  CHECK(p.line == 28);
  CHECK(p.op == Op::pooler);
  CHECK(p.regime == "pooler-8");
  CHECK(p.B == 8);
  CHECK(p.H == 1024);
  CHECK(p.min_len == 1);
  CHECK(p.max_len == 512);
  CHECK(p.dims_string() == "B=8 H=1024 min_len=1 max_len=512");

  const scorer::Shape& d = f.shapes[4];
  CHECK(d.name == "dense_m32_qkv");
  CHECK(d.dims_string() == "M=32 N=6144 K=4096");
  CHECK(f.shapes[8].dims_string() == "T=1 H=7168 E=256 k=8");

  const scorer::Shape& m = f.shapes[20];
  CHECK(m.name == "moe_dsv3ep8r5_m32");
  CHECK(m.dims_string() == "M=32 H=7168 I=2048 E_global=256 E_local=32 k=8 ep_rank=5");
  CHECK(m.E_global == 256);
  CHECK(m.E_local == 32);
  CHECK(m.ep_rank == 5);
  CHECK(m.N == 0);  // dims of other ops stay 0
  CHECK(m.routing.kind == scorer::RoutingKind::uniform);

  // The routings beyond uniform, the trace part of the file's identity, and
  // the declared scoring rule.
  CHECK(f.shapes[24].name == "moe_dsv3ep8_zipf_m32");
  CHECK(f.shapes[24].routing.kind == scorer::RoutingKind::zipf);
  CHECK(f.shapes[24].routing.skew == 1.2);
  CHECK(f.shapes[25].name == "moe_mixtral_hot_m64");
  CHECK(f.shapes[25].routing.skew == 2.0);
  const scorer::Shape& t = f.shapes[26];
  CHECK(t.name == "moe_dsv3ep8_trace_m32");
  REQUIRE(t.routing.trace);
  CHECK(t.routing.trace->path == "shapes/dsv3_decode_trace.txt");
  CHECK(t.routing.trace->tokens() == 1024);
  CHECK(f.sha256 ==
        scorer::sha256_string(file_text("shapes.toml") + "\n" + scorer::sha256_file("shapes/dsv3_decode_trace.txt")));
  CHECK(f.scoring.aggregate == scorer::ScoringRule::Aggregate::shapes);
  CHECK(f.scoring.failed_speedup == 0);
}

TEST_CASE("op names round-trip") {
  for (Op op : {Op::pooler, Op::dense, Op::router, Op::moe_w4a16}) {
    Op back = Op::pooler;
    CHECK(scorer::parse_op(scorer::op_name(op), &back));
    CHECK(back == op);
  }
  Op unchanged = Op::router;
  CHECK(!scorer::parse_op("moe", &unchanged));
  CHECK(!scorer::parse_op("Dense", &unchanged));
  CHECK(unchanged == Op::router);
}

TEST_CASE("a valid file fills every field, optional pooler lengths included") {
  const std::string text = "# two shapes\n\n" + dense("d.1-x") +
                           "\n[[shape]]\nname = \"p\"\nop = \"pooler\"\nregime = \"pool\"\n"
                           "B = 3\nH = 24\nmin_len = 5\nmax_len = 9\n";
  const scorer::ShapesFile f = parse_shapes(text, "t.toml");
  REQUIRE(f.shapes.size() == 2);
  CHECK(f.shapes[0].line == 3);
  CHECK(f.shapes[0].name == "d.1-x");
  CHECK(f.shapes[0].M == 32);
  CHECK(f.shapes[0].N == 64);
  CHECK(f.shapes[0].K == 128);
  CHECK(f.shapes[1].line == 11);
  CHECK(f.shapes[1].min_len == 5);
  CHECK(f.shapes[1].max_len == 9);
  CHECK(f.sha256 == scorer::sha256_string(text));
}

TEST_CASE("syntax errors give the parser's line") {
  const std::string msg = error_of("[[shape]]\nname = \"d\"\nop = = \"dense\"\n");
  CHECK(msg.rfind("t.toml:3: syntax error at column ", 0) == 0);
  CHECK(error_of("[[shape]]\nname = \"unterminated\n").rfind("t.toml:2: syntax error", 0) == 0);
  // A key given twice is a TOML error, found by the parser.
  CHECK(error_of(dense("d", "1", "2", "8", "K = 16\n")).rfind("t.toml:8: syntax error", 0) == 0);
}

TEST_CASE("missing, mistyped and unknown fields") {
  CHECK(error_of("# c\n\n[[shape]]\nname = \"d\"\nop = \"dense\"\nregime = \"r\"\nM = 1\nN = 2\n") ==
        "t.toml:3: field 'K': missing (op dense needs M, N, K)");
  CHECK(error_of("[[shape]]\nop = \"dense\"\nregime = \"r\"\nM = 1\nN = 2\nK = 8\n") ==
        "t.toml:1: field 'name': missing");
  CHECK(error_of("[[shape]]\nname = \"d\"\nregime = \"r\"\nM = 1\nN = 2\nK = 8\n") == "t.toml:1: field 'op': missing");
  CHECK(error_of(dense("d", "32", "\"64\"")) == "t.toml:6: field 'N': expected an integer, got a string");
  CHECK(error_of(dense("d", "32", "64", "128.0")) ==
        "t.toml:7: field 'K': expected an integer, got a floating-point number");
  CHECK(error_of("[[shape]]\nname = 7\nop = \"dense\"\nregime = \"r\"\nM = 1\nN = 2\nK = 8\n") ==
        "t.toml:2: field 'name': expected a string, got an integer");
  CHECK(error_of(dense("d", "32", "64", "128", "Kk = 1\n")) ==
        "t.toml:8: field 'Kk': unknown field (a shape has name, op, regime, its op's dims and, for moe_w4a16, "
        "routing, skew, trace)");
  CHECK(error_of(dense("d", "32", "64", "128", "E = 8\n")) ==
        "t.toml:8: field 'E': not a dim of op dense (its dims: M, N, K)");
  CHECK(error_of("[[shape]]\nname = \"c\"\nop = \"conv\"\nregime = \"r\"\n") ==
        "t.toml:3: field 'op': unknown op 'conv' (expected pooler, dense, router or moe_w4a16)");
}

TEST_CASE("names and regimes: pattern and uniqueness, shown on one line") {
  CHECK(error_of(dense("a b")) == "t.toml:2: field 'name': must match [A-Za-z0-9_.-]+ (got \"a b\")");
  CHECK(error_of(dense("")) == "t.toml:2: field 'name': must match [A-Za-z0-9_.-]+ (got \"\")");
  // The second table starts on line 9: its name is on line 10.
  CHECK(error_of(dense("twice") + "\n" + dense("twice")) ==
        "t.toml:10: field 'name': duplicate name 'twice' (first used at line 2)");
  CHECK(error_of("[[shape]]\nname = \"d\"\nop = \"dense\"\nregime = \"\"\nM = 1\nN = 2\nK = 8\n") ==
        "t.toml:4: field 'regime': must match [A-Za-z0-9_.-]+ (got \"\")");
  // A regime is printed in tables and the package's MANIFEST; the message
  // about a bad value stays on one line.
  CHECK(error_of("[[shape]]\nname = \"d\"\nop = \"dense\"\nregime = \"a b\\nc\"\nM = 1\nN = 2\nK = 8\n") ==
        "t.toml:4: field 'regime': must match [A-Za-z0-9_.-]+ (got \"a b\\nc\")");
  CHECK(error_of(dense("a\\tb")) == "t.toml:2: field 'name': must match [A-Za-z0-9_.-]+ (got \"a\\x09b\")");
}

TEST_CASE("the file holds [[shape]] tables and a [scoring] table, nothing else") {
  CHECK(error_of("") == "t.toml:1: field 'shape': no [[shape]] tables in the file");
  CHECK(error_of("# only a comment\n\n") == "t.toml:1: field 'shape': no [[shape]] tables in the file");
  CHECK(error_of("seed = 1\n" + dense()) ==
        "t.toml:1: field 'seed': not allowed outside a [[shape]] table (the file holds [[shape]] tables and "
        "an optional [scoring] table)");
  CHECK(error_of(dense() + "\n[defaults]\nM = 4\n") ==
        "t.toml:9: field 'defaults': not allowed outside a [[shape]] table (the file holds [[shape]] tables and "
        "an optional [scoring] table)");
  CHECK(error_of("[shape]\nname = \"d\"\n") ==
        "t.toml:1: field 'shape': must be an array of tables, written [[shape]]");
}

TEST_CASE("impossible shapes: the Valid: lines of submission.h") {
  CHECK(error_of(moe(1, 1000, 768, 128, 128, 8, 0)) ==
        "t.toml:6: field 'H': must be a multiple of 128 for op moe_w4a16 (got 1000)");
  CHECK(error_of(moe(1, 2048, 700, 128, 128, 8, 0)) ==
        "t.toml:7: field 'I': must be a multiple of 128 for op moe_w4a16 (got 700)");
  CHECK(error_of(moe(1, 2048, 768, 8, 8, 9, 0)) ==
        "t.toml:10: field 'k': must be at most E_global (got k=9, E_global=8)");
  CHECK(error_of(moe(1, 2048, 768, 256, 48, 8, 0)) ==
        "t.toml:9: field 'E_local': must divide E_global (got E_local=48, E_global=256)");
  CHECK(error_of(moe(1, 2048, 768, 256, 32, 8, 8)) ==
        "t.toml:11: field 'ep_rank': must be below E_global/E_local = 8 (got 8)");
  CHECK(error_of(moe(1, 2048, 768, 256, 32, 8, -1)) ==
        "t.toml:11: field 'ep_rank': must be between 0 and 1000000 (got -1)");
  CHECK(error_of(moe(1, 2048, 768, 256, 32, 0, 7)) == "t.toml:10: field 'k': must be between 1 and 1000000 (got 0)");
  CHECK(parse_shapes(moe(3, 256, 128, 256, 32, 8, 7), "t.toml").shapes[0].ep_rank == 7);

  CHECK(error_of(dense("d", "32", "64", "100")) ==
        "t.toml:7: field 'K': must be a multiple of 8 for op dense (got 100)");
  CHECK(error_of(dense("d", "0")) == "t.toml:5: field 'M': must be between 1 and 1000000 (got 0)");
  CHECK(error_of(dense("d", "1000001")) == "t.toml:5: field 'M': must be between 1 and 1000000 (got 1000001)");
  CHECK(error_of(dense("d", "32", "-64")) == "t.toml:6: field 'N': must be between 1 and 1000000 (got -64)");

  const std::string router = "[[shape]]\nname = \"r\"\nop = \"router\"\nregime = \"r\"\nT = 4\n";
  CHECK(error_of(router + "H = 100\nE = 8\nk = 2\n") ==
        "t.toml:6: field 'H': must be a multiple of 8 for op router (got 100)");
  CHECK(error_of(router + "H = 128\nE = 8\nk = 9\n") == "t.toml:8: field 'k': must be at most E (got k=9, E=8)");
  CHECK(parse_shapes(router + "H = 128\nE = 8\nk = 8\n", "t.toml").shapes[0].k == 8);

  const std::string pooler = "[[shape]]\nname = \"p\"\nop = \"pooler\"\nregime = \"p\"\nB = 2\n";
  CHECK(error_of(pooler + "H = 12\n") == "t.toml:6: field 'H': must be a multiple of 8 for op pooler (got 12)");
  CHECK(error_of(pooler + "H = 16\nmin_len = 10\nmax_len = 9\n") ==
        "t.toml:7: field 'min_len': must be at most max_len (got min_len=10, max_len=9)");
  CHECK(error_of(pooler + "H = 16\nmin_len = 0\n") ==
        "t.toml:7: field 'min_len': must be between 1 and 1000000 (got 0)");
}

TEST_CASE("impossible shapes: beyond what the baselines run") {
  // The router baseline's top-k holds 5 bytes per expert and 4 per pick in 48 KiB.
  const std::string router = "[[shape]]\nname = \"r\"\nop = \"router\"\nregime = \"r\"\nT = 1\nH = 64\n";
  CHECK(parse_shapes(router + "E = 9829\nk = 1\n", "t.toml").shapes[0].E == 9829);
  CHECK(error_of(router + "E = 9830\nk = 1\n") ==
        "t.toml:7: field 'E': too many experts for the baseline's top-k, which keeps a token's logits in one "
        "block (at most 9829 with k=1, got E=9830)");
  CHECK(error_of(router + "E = 9829\nk = 2\n") ==
        "t.toml:7: field 'E': too many experts for the baseline's top-k, which keeps a token's logits in one "
        "block (at most 9828 with k=2, got E=9829)");
  CHECK(error_of(router + "E = 20000\nk = 20000\n") ==
        "t.toml:7: field 'E': too many experts for the baseline's top-k, which keeps a token's logits in one "
        "block (at most 0 with k=20000, got E=20000)");
  // The MoE baseline's alignment holds two int32 counters per local expert in 48 KiB.
  CHECK(parse_shapes(moe(1, 128, 128, 6144, 6144, 1, 0), "t.toml").shapes[0].E_local == 6144);
  CHECK(error_of(moe(1, 128, 128, 12288, 12288, 1, 0)) ==
        "t.toml:9: field 'E_local': too many local experts for the baseline's alignment, which counts them in "
        "one block (at most 6144, got E_local=12288)");
}

TEST_CASE("shapes too large for device memory are refused") {
  // 3 matrices of 200000 x 200000 bf16 (about 224 GiB) and the reference's
  // fp32 output (149 GiB).
  const std::string big = error_of(dense("big", "200000", "200000", "200000"));
  CHECK(big.rfind("t.toml:1: fields M, N, K: shape 'big' takes 372.5 GiB of device memory per weight set, "
                  "more than the limit of 32.0 GiB",
                  0) == 0);
  // A pooler's hidden states are sized by its longest possible draw, B*max_len
  // tokens: 4000 * 1000000 * 4096 * 2 bytes.
  const std::string pool = error_of(
      "[[shape]]\nname = \"p\"\nop = \"pooler\"\nregime = \"p\"\nB = 4000\nH = 4096\n"
      "max_len = 1000000\n");
  CHECK(pool.rfind("t.toml:1: fields B, H, min_len, max_len: shape 'p' takes", 0) == 0);
  // An expert of 3 x 4096 x 14336 weights is 90 MB in int4, and the scorer
  // also holds it in bf16 for the baseline and in fp32 for the reference:
  // 8 experts take about 8.6 GiB a weight set, 32 of them about 34.2 GiB.
  CHECK(parse_shapes(moe(8, 4096, 14336, 8, 8, 2, 0), "t.toml").shapes.size() == 1);
  CHECK(error_of(moe(8, 4096, 14336, 32, 32, 2, 0)) ==
        "t.toml:1: fields M, H, I, E_global, E_local, k, ep_rank: shape 'm' takes 34.2 GiB of device memory per "
        "weight set, more than the limit of 32.0 GiB (M=8 H=4096 I=14336 E_global=32 E_local=32 k=2 ep_rank=0)");
}

TEST_CASE("--filter globs match whole names; a glob or regime that selects nothing is an error") {
  const scorer::ShapesFile f = scorer::load_shapes("shapes.toml");
  auto names = [&](const std::vector<std::string>& globs, const std::vector<std::string>& regimes) {
    std::vector<std::string> out;
    for (const scorer::Shape& s : scorer::select_shapes(f, globs, regimes)) out.push_back(s.name);
    return out;
  };
  CHECK(names({}, {}).size() == f.shapes.size());
  // A name is that shape alone, not every name it begins (moe_qwen3_m16 ...).
  CHECK(names({"moe_qwen3_m1"}, {}) == std::vector<std::string>{"moe_qwen3_m1"});
  CHECK(names({"moe_qwen3*"}, {}) ==
        std::vector<std::string>{"moe_qwen3_m1", "moe_qwen3_m16", "moe_qwen3_m64", "moe_qwen3_m256"});
  // File order, whatever the globs' order; a shape two globs match once.
  CHECK(names({"dense_m32_o", "dense_m32_[qo]*"}, {}) == std::vector<std::string>{"dense_m32_qkv", "dense_m32_o"});
  CHECK(names({"pooler*"}, {"pooler-16"}) == std::vector<std::string>{"pooler_b16_h1024", "pooler_b16_h4096"});
  CHECK(names({}, {"dense-32"}).size() == 4);
  CHECK_THROWS_WITH_AS(names({"moe*", "moe_qwen3_m2"}, {}),
                       "command line: --filter 'moe_qwen3_m2' matches no shape of shapes.toml (a glob "
                       "matches whole names: try 'moe_qwen3_m2*')",
                       InputError);
  CHECK_THROWS_WITH_AS(names({}, {"dense"}), "command line: --regime 'dense' is no regime of shapes.toml", InputError);
  CHECK_THROWS_WITH_AS(names({"dense*"}, {"moe"}),
                       "command line: no shape of shapes.toml matches both --filter and --regime", InputError);
}

TEST_CASE("a missing shapes file names the file and the reason") {
  CHECK_THROWS_WITH_AS(scorer::load_shapes("no-such-dir/shapes.toml"),
                       "no-such-dir/shapes.toml: cannot read: No such file or directory", InputError);
  CHECK_THROWS_WITH_AS(scorer::load_shapes("tests"), "tests: cannot read: Is a directory", InputError);
}

TEST_CASE("sha256 of strings and files") {
  CHECK(scorer::sha256_string("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(scorer::sha256_string("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string bytes(3 << 20, '\0');  // larger than a pipe's buffer, with NUL bytes
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 2654435761u >> 13);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("cpu_shapes_sha256." + std::to_string(getpid()))).string();
  {
    std::ofstream out(path, std::ios::binary);
    out << bytes;
  }
  const std::string of_file = scorer::sha256_file(path);
  std::remove(path.c_str());
  CHECK(of_file == scorer::sha256_string(bytes));
  CHECK(of_file.size() == 64);
  CHECK(of_file != scorer::sha256_string(bytes.substr(1)));
  CHECK_THROWS_AS(scorer::sha256_file("no-such-file"), std::runtime_error);
}

// ---------------------------------------------------------------- routing

namespace {

// A small moe shape (k = 2 of 8 experts, M = 2) with routing fields from line 12.
std::string small_moe(const std::string& routing_lines) { return moe(2, 128, 128, 8, 8, 2, 0) + routing_lines; }

// Four tokens, two windows of the shape above.
const char* kTrace = "# ids | weights\n0 1 | 0.75 0.25\n\n2 7 | 0.5 0.5\n3 4 | 1 0\n5 6 | 0.6 0.4\n";

}  // namespace

TEST_CASE("moe routing fields: uniform by default, zipf with a skew, file with a trace") {
  CHECK(parse_shapes(small_moe(""), "t.toml").shapes[0].routing.kind == scorer::RoutingKind::uniform);
  CHECK(parse_shapes(small_moe("routing = \"uniform\"\n"), "t.toml").shapes[0].routing.kind ==
        scorer::RoutingKind::uniform);
  const scorer::Shape z = parse_shapes(small_moe("routing = \"zipf\"\nskew = 1.2\n"), "t.toml").shapes[0];
  CHECK(z.routing.kind == scorer::RoutingKind::zipf);
  CHECK(z.routing.skew == 1.2);
  CHECK(parse_shapes(small_moe("routing = \"zipf\"\nskew = 2\n"), "t.toml").shapes[0].routing.skew == 2.0);

  test_util::TempDir dir("cpu_shapes");
  dir.write("traces/t.txt", kTrace);
  const std::string text = small_moe("routing = \"file\"\ntrace = \"traces/t.txt\"\n");
  const std::string path = dir.write("shapes.toml", text);
  const scorer::ShapesFile f = scorer::load_shapes(path);
  const scorer::Shape& s = f.shapes[0];
  REQUIRE(s.routing.kind == scorer::RoutingKind::file);
  REQUIRE(s.routing.trace);
  CHECK(s.routing.trace->path == (dir.path / "traces/t.txt").string());
  CHECK(s.routing.trace->tokens() == 4);
  CHECK(s.routing.trace->ids == std::vector<int32_t>{0, 1, 2, 7, 3, 4, 5, 6});
  CHECK(s.routing.trace->weights == std::vector<float>{0.75f, 0.25f, 0.5f, 0.5f, 1, 0, 0.6f, 0.4f});
  // The trace is part of the shapes file's identity.
  CHECK(f.sha256 == scorer::sha256_string(text + "\n" + scorer::sha256_string(kTrace)));
  dir.write("traces/t.txt", std::string(kTrace) + "1 2 | 0.5 0.5\n");
  CHECK(scorer::load_shapes(path).sha256 != f.sha256);
}

TEST_CASE("moe routing fields: each mistake named by line and field") {
  CHECK(error_of(dense("d", "32", "64", "128", "routing = \"zipf\"\n")) ==
        "t.toml:8: field 'routing': only op moe_w4a16 has a routing (op dense)");
  CHECK(error_of(small_moe("routing = \"poisson\"\n")) ==
        "t.toml:12: field 'routing': unknown routing 'poisson' (expected uniform, zipf or file)");
  CHECK(error_of(small_moe("routing = 3\n")) == "t.toml:12: field 'routing': expected a string, got an integer");
  CHECK(error_of(small_moe("routing = \"zipf\"\n")) ==
        "t.toml:12: field 'skew': missing (routing \"zipf\" needs a skew)");
  CHECK(error_of(small_moe("skew = 1.0\n")) ==
        "t.toml:12: field 'skew': only routing \"zipf\" has a skew (this shape's is routing \"uniform\")");
  CHECK(error_of(small_moe("routing = \"zipf\"\nskew = 0\n")) ==
        "t.toml:13: field 'skew': must be above 0 and at most 8 (got 0)");
  CHECK(error_of(small_moe("routing = \"zipf\"\nskew = 8.5\n")) ==
        "t.toml:13: field 'skew': must be above 0 and at most 8 (got 8.5)");
  CHECK(error_of(small_moe("routing = \"zipf\"\nskew = \"1\"\n")) ==
        "t.toml:13: field 'skew': expected a number, got a string");
  CHECK(error_of(small_moe("routing = \"file\"\n")) ==
        "t.toml:12: field 'trace': missing (routing \"file\" needs a trace)");
  CHECK(error_of(small_moe("routing = \"zipf\"\nskew = 1\ntrace = \"t.txt\"\n")) ==
        "t.toml:14: field 'trace': only routing \"file\" has a trace (this shape's is routing \"zipf\")");
  CHECK(error_of(small_moe("routing = \"file\"\ntrace = 5\n")) ==
        "t.toml:13: field 'trace': expected a string, got an integer");
}

TEST_CASE("trace paths: inside the shapes file's directory, a regular file, two windows long") {
  test_util::TempDir dir("cpu_shapes");
  dir.write("t.txt", kTrace);
  auto error_with = [&](const std::string& trace) {
    const std::string path = dir.write("sub/shapes.toml", small_moe("routing = \"file\"\ntrace = \"" + trace + "\"\n"));
    try {
      scorer::load_shapes(path);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string at = (dir.path / "sub/shapes.toml").string() + ":13: field 'trace': ";
  const std::string sub = (dir.path / "sub").string();
  CHECK(error_with("/etc/passwd") ==
        at + "must be a path relative to the shapes file's directory (got \"/etc/passwd\")");
  CHECK(error_with("") == at + "must be a path relative to the shapes file's directory (got \"\")");
  CHECK(error_with("../t.txt") == at + "\"../t.txt\" leaves the shapes file's directory (" + sub + ")");
  CHECK(error_with("a/../../t.txt") == at + "\"a/../../t.txt\" leaves the shapes file's directory (" + sub + ")");
  // A link inside that points outside leaves too.
  std::filesystem::create_symlink(dir.path / "t.txt", dir.path / "sub/link.txt");
  CHECK(error_with("link.txt") == at + "\"link.txt\" leaves the shapes file's directory (" + sub + ")");
  CHECK(error_with("missing.txt") == at + sub + "/missing.txt: cannot read: No such file or directory");
  std::filesystem::create_directories(dir.path / "sub/d");
  CHECK(error_with("d") == at + sub + "/d: not a regular file");
  REQUIRE(mkfifo((dir.path / "sub/fifo").c_str(), 0600) == 0);
  CHECK(error_with("fifo") == at + sub + "/fifo: not a regular file");
  dir.write("sub/short.txt", "0 1 | 1 0\n2 3 | 1 0\n3 4 | 1 0\n");
  CHECK(error_with("short.txt") == at + sub +
                                       "/short.txt holds 3 tokens, fewer than two windows of M = 2 (consecutive "
                                       "calls must replay different windows)");
  dir.write("sub/ok.txt", kTrace);
  CHECK(error_with("ok.txt") == "(no error)");
  CHECK(error_with("./d/../ok.txt") == "(no error)");
  // The content's errors name the trace file, its line and field.
  dir.write("sub/bad.txt", "0 1 | 1 0\n0 9 | 1 0\n");
  CHECK(error_with("bad.txt") == sub + "/bad.txt:2: field 'ids': expert 9 out of range (0 to E_global-1 = 7)");
}

TEST_CASE("trace content: one token per line, k distinct ids, k finite weights") {
  const scorer::Shape s = parse_shapes(small_moe(""), "t.toml").shapes[0];
  auto error_in = [&](const std::string& text) {
    try {
      scorer::parse_routing_trace(text, "tr.txt", s);
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(error_in("0 1 | 0.5 0.5\r\n# comment\n   \n\t2 3|1 0\n") == "(no error)");
  CHECK(error_in("") == "tr.txt:1: field 'ids': no tokens in the trace");
  CHECK(error_in("# only\n\n") == "tr.txt:2: field 'ids': no tokens in the trace");
  CHECK(error_in("0 1 0.5 0.5\n") ==
        "tr.txt:1: field 'ids': expected 'ID ... ID | WEIGHT ... WEIGHT' (k ids, one '|', k weights)");
  CHECK(error_in("0 1 | 0.5 | 0.5\n") ==
        "tr.txt:1: field 'ids': expected 'ID ... ID | WEIGHT ... WEIGHT' (k ids, one '|', k weights)");
  CHECK(error_in("0 1 | 1 0\n0 1 2 | 1 0 0\n") == "tr.txt:2: field 'ids': expected k = 2 expert ids, got 3");
  CHECK(error_in("0 x | 1 0\n") == "tr.txt:1: field 'ids': expected an integer, got 'x'");
  CHECK(error_in("0 1.0 | 1 0\n") == "tr.txt:1: field 'ids': expected an integer, got '1.0'");
  CHECK(error_in("-1 1 | 1 0\n") == "tr.txt:1: field 'ids': expert -1 out of range (0 to E_global-1 = 7)");
  CHECK(error_in("8 1 | 1 0\n") == "tr.txt:1: field 'ids': expert 8 out of range (0 to E_global-1 = 7)");
  CHECK(error_in("3 3 | 1 0\n") == "tr.txt:1: field 'ids': expert 3 given twice in one token");
  CHECK(error_in("0 1 | 1\n") == "tr.txt:1: field 'weights': expected k = 2 weights, got 1");
  CHECK(error_in("0 1 | 1 w\n") == "tr.txt:1: field 'weights': expected a number, got 'w'");
  CHECK(error_in("0 1 | 1 nan\n") == "tr.txt:1: field 'weights': must be finite and at least 0 (got nan)");
  CHECK(error_in("0 1 | 1 1e39\n") == "tr.txt:1: field 'weights': must be finite and at least 0 (got 1e39)");
  CHECK(error_in("0 1 | 1 -0.5\n") == "tr.txt:1: field 'weights': must be finite and at least 0 (got -0.5)");
  CHECK(error_in("0 1 | 1 0\x01\n") == "tr.txt:1: field 'weights': expected a number, got '0\\x01'");
}

// ---------------------------------------------------------------- [scoring]

TEST_CASE("[scoring]: the default rule, and each field") {
  const scorer::ScoringRule d = parse_shapes(dense(), "t.toml").scoring;
  CHECK(d.aggregate == scorer::ScoringRule::Aggregate::shapes);
  CHECK(d.regime_weights.empty());
  CHECK(d.failed_speedup == 0);

  const std::string two = dense("a") + "\n" + small_moe("");  // regimes r and moe
  const scorer::ScoringRule r = parse_shapes(two +
                                                 "\n[scoring]\naggregate = \"regimes\"\nfailed = 0.5\n"
                                                 "weights = { r = 1, moe = 0.25 }\n",
                                             "t.toml")
                                    .scoring;
  CHECK(r.aggregate == scorer::ScoringRule::Aggregate::regimes);
  CHECK(r.regime_weights == std::map<std::string, double>{{"r", 1.0}, {"moe", 0.25}});
  CHECK(r.failed_speedup == 0.5);
  // [scoring] may come first, and its weights be a table of their own.
  const scorer::ShapesFile f = parse_shapes("[scoring]\naggregate = \"shapes\"\nfailed = \"none\"\n\n" + two, "t.toml");
  CHECK(f.shapes.size() == 2);
  CHECK(f.scoring.aggregate == scorer::ScoringRule::Aggregate::shapes);
  CHECK(f.scoring.failed_speedup == 0);
  CHECK(parse_shapes(two + "[scoring]\naggregate = \"regimes\"\n[scoring.weights]\nr = 2\nmoe = 1\n", "t.toml")
            .scoring.regime_weights.at("r") == 2.0);
  CHECK(std::string(scorer::aggregate_name(scorer::ScoringRule::Aggregate::regimes)) == "regimes");
}

TEST_CASE("[scoring]: each mistake named by line and field") {
  const std::string two = dense("a") + "\n" + small_moe("") + "\n";  // 20 lines; [scoring] on line 21
  CHECK(error_of(two + "[scoring]\nmean = \"x\"\n") ==
        "t.toml:22: field 'scoring.mean': unknown field (a [scoring] table has aggregate, weights and failed)");
  CHECK(error_of(two + "[scoring]\naggregate = \"mean\"\n") ==
        "t.toml:22: field 'scoring.aggregate': expected \"shapes\" or \"regimes\", got 'mean'");
  CHECK(error_of(two + "[scoring]\naggregate = 1\n") ==
        "t.toml:22: field 'scoring.aggregate': expected \"shapes\" or \"regimes\", got an integer");
  CHECK(error_of(two + "[scoring]\nweights = { r = 1, moe = 1 }\n") ==
        "t.toml:22: field 'scoring.weights': weights apply to aggregate = \"regimes\" only");
  const std::string reg = two + "[scoring]\naggregate = \"regimes\"\n";
  CHECK(error_of(reg + "weights = 2\n") == "t.toml:23: field 'scoring.weights': expected a table, got an integer");
  CHECK(error_of(reg + "weights = { r = 1, moe = 1, dense = 1 }\n") ==
        "t.toml:23: field 'scoring.weights.dense': no shape of the file has this regime");
  CHECK(error_of(reg + "weights = { r = 1 }\n") ==
        "t.toml:23: field 'scoring.weights': no weight for regime 'moe' (give every regime one, or none)");
  CHECK(error_of(reg + "weights = { r = 1, moe = 0 }\n") ==
        "t.toml:23: field 'scoring.weights.moe': expected a number above 0 and at most 1e6");
  CHECK(error_of(reg + "weights = { r = 1, moe = \"2\" }\n") ==
        "t.toml:23: field 'scoring.weights.moe': expected a number above 0 and at most 1e6");
  const std::string failed_msg =
      "field 'scoring.failed': expected \"none\" (a failed shape voids the aggregate) or a speedup above 0 and "
      "at most 1 that a failed shape counts as";
  CHECK(error_of(two + "[scoring]\nfailed = 2\n") == "t.toml:22: " + failed_msg);
  CHECK(error_of(two + "[scoring]\nfailed = 0\n") == "t.toml:22: " + failed_msg);
  CHECK(error_of(two + "[scoring]\nfailed = \"zero\"\n") == "t.toml:22: " + failed_msg);
  CHECK(error_of(two + "[[scoring]]\nfailed = 0.5\n") ==
        "t.toml:21: field 'scoring': must be a table, written [scoring]");
  CHECK(error_of("scoring = 1\n" + two) == "t.toml:1: field 'scoring': must be a table, written [scoring]");
}
