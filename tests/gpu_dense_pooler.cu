// dense and pooler, every variant, against the fp64 CPU references: odd shapes
// (every tail of M, N, K; token chunks past 32; k split across warps and across
// blocks) and the public shapes. Each case poisons the output before every run,
// runs twice and requires bit-identical results (a split-K counter that failed
// to reset shows here), then captures one run() into a CUDA graph and replays it
// on new inputs.
#include <cuda_runtime.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "dev/variants.h"
#include "reference/cpu_reference.h"
#include "scorer/check.h"
#include "submission/small_m_plan.h"
#include "submission/submission.h"
#include "tests/gpu_test_util.h"

namespace {

using gpu_test::DeviceBuffer;
using gpu_test::random_bf16;
using gpu_test::sync_and_check;
using submission::bf16;

bf16* dev_bf16(DeviceBuffer<uint16_t>& b) { return reinterpret_cast<bf16*>(b.ptr); }

// The scorer never runs on the legacy default stream.
struct TestStream {
  cudaStream_t s = nullptr;
  TestStream() { GT_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~TestStream() { cudaStreamDestroy(s); }
};

// Output columns compared with the reference: all of them up to about a
// thousand; beyond, both ends (first and last tiles, where the tails live) and
// a stride prime to every tile size, which keeps the CPU reference fast.
std::vector<int> check_columns(int N) {
  std::vector<int> cols;
  for (int n = 0; n < N; ++n)
    if (N <= 1100 || n < 160 || n >= N - 160 || n % 37 == 0) cols.push_back(n);
  return cols;
}

std::vector<uint16_t> pick_columns(const std::vector<uint16_t>& out, int M, int N, const std::vector<int>& cols) {
  std::vector<uint16_t> v;
  v.reserve(size_t(M) * cols.size());
  for (int m = 0; m < M; ++m)
    for (int n : cols) v.push_back(out[size_t(m) * N + n]);
  return v;
}

size_t count_nonfinite(const std::vector<uint16_t>& out) {
  return size_t(
      std::count_if(out.begin(), out.end(), [](uint16_t b) { return !std::isfinite(ref::bf16_to_float(b)); }));
}

void expect_matches(const std::vector<uint16_t>& out, int M, int N, const std::vector<int>& cols,
                    const std::vector<double>& ref, const std::string& what) {
  CHECK_MESSAGE(count_nonfinite(out) == 0, what << ": output left unwritten or not finite");
  const std::vector<uint16_t> got = pick_columns(out, M, N, cols);
  const scorer::CheckResult r = scorer::check_bf16(got.data(), ref.data(), ref.size());
  CHECK_MESSAGE(r.ok, what << ": " << r.reason << " (rel L2 " << r.rel_l2 << ", worst element " << r.worst_elem
                           << " of allowed)");
}

// Runs `run` on the stream (eagerly twice, then once captured and replayed
// twice on the second input set) and checks every result. set_inputs(i)
// uploads input set i (0 or 1); ref[i] is its reference on `cols`.
template <class Run, class SetInputs>
void exercise(const std::string& what, int M, int N, DeviceBuffer<uint16_t>& out, Run run, SetInputs set_inputs,
              const std::vector<int>& cols, const std::vector<double> (&ref)[2]) {
  TestStream stream;
  set_inputs(0);
  out.poison();
  sync_and_check("poison");
  run(stream.s);
  sync_and_check((what + ": first run").c_str());
  const std::vector<uint16_t> first = out.download();
  expect_matches(first, M, N, cols, ref[0], what + ", first run");

  out.poison();
  sync_and_check("poison");
  run(stream.s);
  sync_and_check((what + ": second run").c_str());
  CHECK_MESSAGE(out.download() == first, what << ": second run not bit-identical to the first");

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  GT_CUDA(cudaStreamBeginCapture(stream.s, cudaStreamCaptureModeThreadLocal));
  run(stream.s);
  GT_CUDA(cudaStreamEndCapture(stream.s, &graph));
  GT_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  set_inputs(1);
  std::vector<uint16_t> replayed;
  for (int replay = 0; replay < 2; ++replay) {
    out.poison();
    sync_and_check("poison");
    GT_CUDA(cudaGraphLaunch(exec, stream.s));
    sync_and_check((what + ": graph replay").c_str());
    const std::vector<uint16_t> got = out.download();
    if (replay == 0) {
      expect_matches(got, M, N, cols, ref[1], what + ", graph replay on new inputs");
      replayed = got;
    } else {
      CHECK_MESSAGE(got == replayed, what << ": graph replays not bit-identical");
    }
  }
  GT_CUDA(cudaGraphExecDestroy(exec));
  GT_CUDA(cudaGraphDestroy(graph));
}

void dense_case(int M, int N, int K) {
  std::mt19937_64 rng(uint64_t(M) * 1000003u + uint64_t(N) * 1009u + uint64_t(K));
  const std::vector<uint16_t> W = random_bf16(size_t(N) * K, rng);
  const std::vector<uint16_t> X[2] = {random_bf16(size_t(M) * K, rng), random_bf16(size_t(M) * K, rng)};
  const std::vector<int> cols = check_columns(N);
  std::vector<uint16_t> w_cols(cols.size() * size_t(K));
  for (size_t i = 0; i < cols.size(); ++i) std::copy_n(W.begin() + size_t(cols[i]) * K, K, w_cols.begin() + i * K);
  const std::vector<double> ref[2] = {ref::dense_cpu(M, int(cols.size()), K, X[0].data(), w_cols.data()),
                                      ref::dense_cpu(M, int(cols.size()), K, X[1].data(), w_cols.data())};

  DeviceBuffer<uint16_t> dW(W), dX(X[0]), dOut(size_t(M) * N);
  for (const std::string& variant : gpu_test::variants_under_test("dense")) {
    const std::string what =
        "dense M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) + " variant " + variant;
    INFO(what);
    std::unique_ptr<submission::Dense> op = submission::dev::make_dense({M, N, K}, {dev_bf16(dW)}, variant);
    const submission::DenseIO io{dev_bf16(dX), dev_bf16(dOut)};
    exercise(
        what, M, N, dOut, [&](cudaStream_t s) { op->run(io, s); }, [&](int i) { dX.upload(X[i]); }, cols, ref);
  }
}

// The pooler's fp64 reference on columns `cols` only: tanh(x_b . W[n] + bias[n])
// with x_b the last token of sequence b, as ref::pooler_cpu computes it for all.
std::vector<double> pooler_ref_columns(int B, int H, const std::vector<uint16_t>& hidden,
                                       const std::vector<int32_t>& cu, const std::vector<uint16_t>& W,
                                       const std::vector<uint16_t>& bias, const std::vector<int>& cols) {
  std::vector<uint16_t> last(size_t(B) * H), w_cols(cols.size() * size_t(H));
  for (int b = 0; b < B; ++b) std::copy_n(hidden.begin() + size_t(cu[b + 1] - 1) * H, H, last.begin() + size_t(b) * H);
  for (size_t i = 0; i < cols.size(); ++i) std::copy_n(W.begin() + size_t(cols[i]) * H, H, w_cols.begin() + i * H);
  std::vector<double> out = ref::dense_cpu(B, int(cols.size()), H, last.data(), w_cols.data());
  for (int b = 0; b < B; ++b)
    for (size_t i = 0; i < cols.size(); ++i) {
      double& v = out[size_t(b) * cols.size() + i];
      v = std::tanh(v + ref::bf16_to_float(bias[cols[i]]));
    }
  return out;
}

// Sequence lengths uniform in [lo, hi]; the graph replay gets the same lengths
// in another order (same S_total, other last-token rows). subset_columns: check
// check_columns(H) only (both ends and a stride), for H where the full fp64
// reference (B x H x H) would be slow.
void pooler_case(int B, int H, int lo, int hi, bool subset_columns = false) {
  std::mt19937_64 rng(uint64_t(B) * 7919u + uint64_t(H) * 31u + uint64_t(hi));
  std::uniform_int_distribution<int> len(lo, hi);
  std::vector<int> lengths(B);
  for (int& l : lengths) l = len(rng);
  std::vector<int32_t> cu[2];
  for (int i = 0; i < 2; ++i) {
    if (i == 1) std::shuffle(lengths.begin(), lengths.end(), rng);
    cu[i].assign(B + 1, 0);
    for (int b = 0; b < B; ++b) cu[i][b + 1] = cu[i][b] + lengths[b];
  }
  const int S_total = cu[0][B];
  const std::vector<uint16_t> W = random_bf16(size_t(H) * H, rng, 1.0 / std::sqrt(double(H)));
  const std::vector<uint16_t> bias = random_bf16(H, rng, 0.5);
  const std::vector<uint16_t> hidden[2] = {random_bf16(size_t(S_total) * H, rng),
                                           random_bf16(size_t(S_total) * H, rng)};
  std::vector<int> cols(H);
  std::iota(cols.begin(), cols.end(), 0);
  if (subset_columns) cols = check_columns(H);
  const std::vector<double> ref[2] = {
      subset_columns ? pooler_ref_columns(B, H, hidden[0], cu[0], W, bias, cols)
                     : ref::pooler_cpu(B, H, hidden[0].data(), cu[0].data(), W.data(), bias.data()),
      subset_columns ? pooler_ref_columns(B, H, hidden[1], cu[1], W, bias, cols)
                     : ref::pooler_cpu(B, H, hidden[1].data(), cu[1].data(), W.data(), bias.data())};

  DeviceBuffer<uint16_t> dW(W), dBias(bias), dHidden(hidden[0]), dOut(size_t(B) * H);
  DeviceBuffer<int32_t> dCu(cu[0]);
  for (const std::string& variant : gpu_test::variants_under_test("pooler")) {
    const std::string what = "pooler B=" + std::to_string(B) + " H=" + std::to_string(H) + " lengths " +
                             std::to_string(lo) + ".." + std::to_string(hi) + " variant " + variant;
    INFO(what);
    std::unique_ptr<submission::Pooler> op =
        submission::dev::make_pooler({B, H}, {dev_bf16(dW), dev_bf16(dBias)}, variant);
    const submission::PoolerIO io{dev_bf16(dHidden), dCu.ptr, S_total, dev_bf16(dOut)};
    exercise(
        what, B, H, dOut, [&](cudaStream_t s) { op->run(io, s); },
        [&](int i) {
          dHidden.upload(hidden[i]);
          dCu.upload(cu[i]);
        },
        cols, ref);
  }
}

}  // namespace

TEST_CASE("dense: odd shapes, every variant") {
  // M = 1..40 (one to five token groups, two token chunks at 40); N and K off
  // every tile; K = 8; split-K with tails (17x1000x1032 and 40x300x520 under
  // splitk_mma and splitk_bulk_mma, whose bulk ring wraps its mbarrier phases
  // on the longer K); k split inside and across blocks at once (9x50x16384).
  // "cublaslt" runs every shape too. cluster_splitk_mma: warps without a tile
  // (N = 3), token rows past M in a chunk (M = 17, 40), and at K = 65536 no
  // slice of the token rows fits in shared memory, so it falls back to
  // direct_packed_mma. direct_tiles_mma with a last block of fewer tiles and
  // a row tail: two tiles per block (5x4001x1024), three (32x6001x520,
  // 20x6001x520 with three token groups).
  const int shapes[][3] = {{1, 77, 200},    {3, 77, 200},    {17, 1000, 1032}, {32, 1000, 1032}, {5, 3, 8},
                           {32, 129, 8},    {40, 300, 520},  {24, 2048, 4096}, {7, 4096, 1024},  {9, 50, 16384},
                           {32, 20, 65536}, {5, 4001, 1024}, {32, 6001, 520},  {20, 6001, 520}};
  for (const auto& s : shapes) dense_case(s[0], s[1], s[2]);
}

TEST_CASE("dense: N = 1, and every direct-kernel instantiation with K's chunks rotated in two parts") {
  // N = 1: a single weight row (one tile, 15 rows of padding; the split-K
  // kernels split its long K). Then every direct_gemm_kernel<NG, RT, kOneBatch>
  // that direct_shape can pick (NG 1..4 token groups, RT 1..3 tiles per block,
  // all chunks in one batch or the loop), of which the shapes above leave 13 of
  // 24 untested at 132 SMs: NG 2-4 with one batch at every RT, NG 1 x RT 3 both
  // ways, NG 2 x RT 3 and NG 3 x RT 2 with the loop. direct_mma and
  // direct_packed_mma run them at RT = 1. K = 512 and 1536 are whole runs of 16
  // chunks but not of 32, so direct_rotated (dense's default where one wave
  // fits, as on all of these) walks K in two orders, not four
  // (direct::tile_strides): a mask no other shape here reaches. N = 6001 leaves
  // its last block one tile of three; both N end inside a tile.
  const int shapes[][3] = {{1, 1, 8},        {3, 1, 4104},    {1, 6001, 512},  {1, 6001, 1536},
                           {9, 6001, 512},   {9, 6001, 1536}, {9, 3000, 512},  {17, 3000, 512},
                           {17, 3000, 1536}, {17, 6001, 512}, {25, 3000, 512}, {25, 6001, 512}};
  for (const auto& s : shapes) {
    CAPTURE(s[0]);
    CAPTURE(s[1]);
    CAPTURE(s[2]);
    // The default on these is the rotated direct kernel (one wave), not cuBLASLt.
    CHECK(submission::small_m::direct_tiles_one_wave(s[0], s[1], s[2], 132));
    dense_case(s[0], s[1], s[2]);
  }
}

TEST_CASE("dense and pooler: the direct kernels' block shapes") {
  using submission::small_m::direct_shape;
  using submission::small_m::direct_tiles_one_wave;
  const int sms = 132;  // an H200
  auto shape = [&](int M, int N, int K, int max_rt) {
    const submission::small_m::DirectShape s = direct_shape(M, N, K, sms, max_rt);
    return std::make_pair(s.ng, s.rt);
  };
  // Too few tiles for the SMs: the sequences split over more blocks, one tile each.
  CHECK(shape(8, 1024, 1024, 3) == std::make_pair(1, 1));
  CHECK(shape(16, 1024, 1024, 3) == std::make_pair(1, 1));
  CHECK(shape(16, 1024, 1024, 1) == std::make_pair(1, 1));
  // More tiles than SMs: two tiles share each token load, one block per SM.
  CHECK(shape(8, 4096, 4096, 3) == std::make_pair(1, 2));
  CHECK(shape(16, 4096, 4096, 3) == std::make_pair(2, 2));
  CHECK(shape(16, 4096, 4096, 1) == std::make_pair(2, 1));
  CHECK(shape(32, 4096, 14336, 3) == std::make_pair(4, 2));
  CHECK(shape(32, 6144, 4096, 3) == std::make_pair(4, 3));
  // dense's default: the tiles kernel only where its blocks fit one wave.
  CHECK(direct_tiles_one_wave(32, 4096, 4096, sms));
  CHECK(direct_tiles_one_wave(32, 4096, 14336, sms));
  CHECK(direct_tiles_one_wave(32, 6144, 4096, sms));         // three tiles per block
  CHECK_FALSE(direct_tiles_one_wave(32, 28672, 4096, sms));  // several waves
  CHECK_FALSE(direct_tiles_one_wave(0, 4096, 4096, sms));    // invalid: cuBLASLt reports it
}

TEST_CASE("dense and pooler: each direct block's slot order is a permutation of K's chunks") {
  using submission::direct::tile_strides;
  using submission::direct::TileOrder;
  for (int chunks = 1; chunks <= 200; ++chunks) {
    const auto st = tile_strides(TileOrder::chunk_major, 64, chunks * 32, 4, 2, 8);
    // Four orders where the chunks are whole runs of 32, two where of 16, else one.
    const int parts = chunks % 32 == 0 ? 4 : chunks % 16 == 0 ? 2 : 1;
    CHECK(st.rotation(1) == (parts > 1 ? 8 : 0));
    CHECK(st.rotation(parts) == 0);
    for (int block = 0; block < 6; ++block) {
      std::vector<int> seen(chunks, 0);
      for (int slot = 0; slot < chunks; ++slot) {
        const int chunk = slot ^ st.rotation(block);
        REQUIRE(chunk >= 0);
        REQUIRE(chunk < chunks);
        ++seen[chunk];
      }
      CHECK(std::count(seen.begin(), seen.end(), 1) == chunks);
    }
  }
  CHECK_THROWS_AS(tile_strides(TileOrder::chunk_major, 64, 1024, 3, 1, 8), std::invalid_argument);
}

TEST_CASE("dense: public shapes, every variant") {
  const int shapes[][3] = {{32, 6144, 4096}, {32, 4096, 4096}, {32, 28672, 4096}, {32, 4096, 14336}};
  for (const auto& s : shapes) dense_case(s[0], s[1], s[2]);
}

TEST_CASE("pooler: odd shapes, every variant") {
  pooler_case(1, 8, 1, 3);
  pooler_case(5, 24, 1, 40);
  pooler_case(20, 1032, 1, 512);
  pooler_case(33, 1000, 1, 9);
  pooler_case(3, 4096, 1, 1);
}

TEST_CASE("pooler: every direct-kernel instantiation, B outside {8, 16}, K rotated in two parts") {
  // The pooler's kernels are instantiations of their own (its row lookup and
  // bias-tanh epilogue), and the shapes above reach 6 of the 14 that
  // direct_shape picks for N = K = H at 132 SMs: here RT = 3 tiles per block
  // (H = 6144, 6008: 384 and 376 tiles, the last block of 6008 short) with 1,
  // 2, 3 and 4 token groups, RT = 2 (H = 3072) with 3 and 4, NG = 4 at RT = 1
  // (H = 1536, whose 48 chunks take two rotation orders, as H = 512's 16), NG
  // = 2 with one batch (B = 17, H = 1024), and B = 32, four token groups in
  // one chunk. Columns checked as dense's above where H > 1100.
  pooler_case(1, 6144, 1, 7, true);
  pooler_case(9, 6008, 1, 64, true);
  pooler_case(17, 6144, 1, 3, true);
  pooler_case(25, 6008, 1, 40, true);
  pooler_case(17, 3072, 1, 100, true);
  pooler_case(25, 3072, 1, 2, true);
  pooler_case(25, 1536, 1, 64, true);
  pooler_case(17, 1024, 1, 33);
  pooler_case(32, 512, 1, 5);
}

TEST_CASE("pooler: public shapes, every variant") {
  for (int B : {8, 16})
    for (int H : {1024, 4096}) pooler_case(B, H, 1, 512);
}

// make sanitize: one public shape per op under compute-sanitizer.
TEST_CASE("sanitize: dense, one public shape" * doctest::test_suite("sanitize")) { dense_case(32, 4096, 4096); }
TEST_CASE("sanitize: pooler, one public shape" * doctest::test_suite("sanitize")) { pooler_case(8, 4096, 1, 512); }

TEST_CASE("dense and pooler: variant lists and rejected arguments") {
  for (const auto& names : {submission::dev::variants("dense"), submission::dev::variants("pooler")}) {
    REQUIRE_FALSE(names.empty());
    CHECK(names.front() == "default");
    CHECK(std::find(names.begin(), names.end(), "simt") != names.end());
  }
  DeviceBuffer<uint16_t> w(size_t(64) * 64);
  const bf16* W = dev_bf16(w);
  CHECK_THROWS_AS(submission::make_dense({4, 64, 64}, {W}, "no_such_kernel"), std::invalid_argument);
  CHECK_THROWS_AS(submission::make_dense({4, 64, 12}, {W}, "default"), std::invalid_argument);
  CHECK_THROWS_AS(submission::make_dense({0, 64, 64}, {W}, "default"), std::invalid_argument);
  CHECK_THROWS_AS(submission::make_dense({4, 0, 64}, {W}, "simt"), std::invalid_argument);
  CHECK_THROWS_AS(submission::make_pooler({4, 64}, {W, W}, "no_such_kernel"), std::invalid_argument);
  CHECK_THROWS_AS(submission::make_pooler({4, 12}, {W, W}, "default"), std::invalid_argument);
  CHECK_THROWS_AS(submission::make_pooler({0, 64}, {W, W}, "default"), std::invalid_argument);
}
