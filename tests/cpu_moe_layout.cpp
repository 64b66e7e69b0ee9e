// The moe_w4a16 repacked weight layout on the CPU: the aligned routing's arrays, the
// tile-group packings, and the layout pushed through the mma.m16n8k16 fragment layouts of the
// PTX ISA (emulated here, independently of the kernels), which must compute W . x exactly.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "reference/bf16_host.h"
#include "reference/int4.h"
#include "submission/moe_plan.h"

using namespace submission::moe;

namespace {

// One register of the kernels' dequantisation (moe_ptx.cuh: biased_word): the codes in nibbles j
// and j+4 of a repacked word as the bf16 pair (128 + q_j, 128 + q_j+4).
uint32_t nibble_pair_as_bf16x2(uint32_t word, int j) { return ((word >> (4 * j)) & 0x000f000fu) | kBf16Pair128; }

}  // namespace

TEST_CASE("moe aligned routing: the five arrays tile aligned_routes_ints ints in order") {
  // A GEMM CTA reserves exactly aligned_routes_ints ints of shared memory for
  // its own alignment (cta_align) and the workspace is sized by it: the layout
  // must end there, each array where the previous one ends.
  for (const int M : {1, 4, 33})
    for (const int bt : {8, 16, 64})
      for (const int max_blocks : {1, 9, 32}) {
        std::vector<int> ints(size_t(aligned_routes_ints(M, bt, max_blocks)));
        int* const p = ints.data();
        const AlignedRoutes r = aligned_routes_at(p, bt, max_blocks);
        CHECK(r.num_blocks == p);
        CHECK(r.block_expert == r.num_blocks + 1);
        CHECK(r.block_routes == r.block_expert + max_blocks);
        CHECK(r.slot_route == r.block_routes + max_blocks);
        CHECK(r.token_routes == r.slot_route + max_blocks * bt);
        CHECK(r.token_routes + M == p + ints.size());
      }
}

TEST_CASE("moe tile layout covers each (row, column) of a tile-group once") {
  std::vector<int> seen(kTileRows * kGroup, 0), word_seen(kTileGroupWords, 0);
  for (int lane = 0; lane < 32; ++lane)
    for (int w = 0; w < 8; ++w) {
      ++word_seen[tile_word_index(lane, w)];
      for (int nib = 0; nib < 8; ++nib) {
        const TileElem el = tile_nibble_source(lane, w, nib);
        REQUIRE(el.row >= 0);
        REQUIRE(el.row < kTileRows);
        REQUIRE(el.col >= 0);
        REQUIRE(el.col < kGroup);
        ++seen[el.row * kGroup + el.col];
      }
    }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  CHECK(std::all_of(word_seen.begin(), word_seen.end(), [](int n) { return n == 1; }));
  // Activation stage: every (slot, chunk) has its own 16 bytes.
  for (int tokens : {8, 16, 32, 64}) {
    std::vector<int> used(tokens * 16, 0);
    for (int s = 0; s < tokens; ++s)
      for (int c = 0; c < 16; ++c) ++used[act_stage_uint4(c, s, tokens)];
    CHECK(std::all_of(used.begin(), used.end(), [](int n) { return n == 1; }));
  }
}

TEST_CASE("moe route token without a division: exact for every k and route") {
  for (int k = 1; k <= 2048; ++k) {
    const double inv_k = 1.0 / k;
    const int M = int((1 << 30) / k) - 1;  // routes below 2^30, as validate_moe_dims requires
    for (int m : {0, 1, 2, 3, 1000, M / 2, M - 1, M})
      for (int j : {0, 1, k / 2, k - 1}) {
        if (j >= k) continue;
        const int r = m * k + j;
        CHECK_MESSAGE(moe_route_token(r, inv_k) == m, "k=" << k << " r=" << r);
      }
  }
}

TEST_CASE("moe tile-group index is linear in a unit's tiles, as the GEMM's copies assume") {
  // issue_weights computes one index per stage and steps it per tile: by
  // `groups` with packs of 1, by 1 within a pack of the unit's tiles.
  for (int groups : {1, 6, 16, 112})
    for (int pack : {4, 8})
      for (int t0 : {0, pack, 5 * pack})
        for (int g = 0; g < groups; g += std::max(1, groups / 5))
          for (int lt = 0; lt < pack; ++lt) {
            CHECK(tile_group_index(t0 + lt, g, groups, 1) == tile_group_index(t0, g, groups, 1) + size_t(lt) * groups);
            CHECK(tile_group_index(t0 + lt, g, groups, pack) == tile_group_index(t0, g, groups, pack) + size_t(lt));
          }
}

TEST_CASE("moe tile-group packing is a bijection with contiguous unit stages") {
  // Two experts of 48 tiles, 5 groups: every tile-group gets its own index,
  // pack = 1 is the plain [tile][group] order, and with pack = P the P tiles
  // of a pack at one group are P consecutive indices (one stage of a unit),
  // the next group following directly.
  const int tiles = 2 * 48, groups = 5;
  for (int pack : {1, 4, 8}) {
    std::vector<int> seen(size_t(tiles) * groups, 0);
    for (int tile = 0; tile < tiles; ++tile)
      for (int group = 0; group < groups; ++group) {
        const size_t i = tile_group_index(tile, group, groups, pack);
        REQUIRE(i < seen.size());
        ++seen[i];
        if (pack == 1) CHECK(i == size_t(tile) * groups + group);
        const int first = tile - tile % pack;
        CHECK(i == tile_group_index(first, 0, groups, pack) + size_t(group) * pack + tile % pack);
      }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
}

TEST_CASE("moe stage-packed words: every word once, a unit's stage one run laid out as in shared memory") {
  // Stage-packed, the codes and scales of all tile-groups share one array
  // with no gap or overlap; with packs of P tiles the words of (pack, group)
  // are one run of P x 264 words: the P tiles' codes in order, then their
  // scales (a stage's layout: kWeightBytes, then kScaleBytes), and the next
  // group's run follows directly. Apart, both are tile_group_index scaled.
  const int tiles = 2 * 48, groups = 5;
  constexpr int kRun = kTileGroupWords + kTileGroupScaleWords;
  for (int pack : {1, 4, 8}) {
    std::vector<int> seen(size_t(tiles) * groups * kRun, 0);
    for (int tile = 0; tile < tiles; ++tile)
      for (int group = 0; group < groups; ++group) {
        const TileGroupWords w = tile_group_words(tile, group, groups, pack, true);
        REQUIRE(w.codes + kTileGroupWords <= seen.size());
        REQUIRE(w.scales + kTileGroupScaleWords <= seen.size());
        for (int i = 0; i < kTileGroupWords; ++i) ++seen[w.codes + i];
        for (int i = 0; i < kTileGroupScaleWords; ++i) ++seen[w.scales + i];
        const int in_pack = tile % pack;
        const size_t run = tile_group_words(tile - in_pack, 0, groups, pack, true).codes + size_t(group) * pack * kRun;
        CHECK(w.codes == run + size_t(in_pack) * kTileGroupWords);
        CHECK(w.scales == run + size_t(pack) * kTileGroupWords + size_t(in_pack) * kTileGroupScaleWords);
        const TileGroupWords apart = tile_group_words(tile, group, groups, pack, false);
        CHECK(apart.codes == tile_group_index(tile, group, groups, pack) * kTileGroupWords);
        CHECK(apart.scales == tile_group_index(tile, group, groups, pack) * kTileGroupScaleWords);
      }
    CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  }
}

TEST_CASE("moe dequant bit trick: 128 + q exactly in both halves, and -136 folds the zero point") {
  for (int q = 0; q < 16; ++q)
    for (int j = 0; j < 4; ++j) {
      const uint32_t word = (uint32_t(q) << (4 * j)) | (uint32_t(15 - q) << (4 * (j + 4)));
      const uint32_t pair = nibble_pair_as_bf16x2(word, j);
      CHECK(ref::bf16_to_float(uint16_t(pair & 0xffff)) == float(128 + q));
      CHECK(ref::bf16_to_float(uint16_t(pair >> 16)) == float(128 + 15 - q));
    }
  CHECK(ref::bf16_to_float(uint16_t(kBf16PairMinus136 & 0xffff)) == -136.0f);
  CHECK(ref::bf16_to_float(uint16_t(kBf16PairMinus136 >> 16)) == -136.0f);
}

namespace {

double lo_bf16(uint32_t pair) { return ref::bf16_to_float(uint16_t(pair & 0xffff)); }
double hi_bf16(uint32_t pair) { return ref::bf16_to_float(uint16_t(pair >> 16)); }
double half_bf16(uint32_t pair, int h) { return h ? hi_bf16(pair) : lo_bf16(pair); }

// D[16][8] += A . B for one mma.m16n8k16 from the 32 lanes' registers, each
// element placed where the PTX ISA puts it (groupID g = lane/4, t = lane%4):
//   A register j, half h: row g + 8*(j & 1), column 2t + h + 8*(j >> 1)
//   B register j, half h: row (k) 2t + h + 8j, column (n) g
void emulate_mma(const uint32_t (&a)[32][4], const uint32_t (&b)[32][2], double (&D)[16][8]) {
  double A[16][16], B[16][8];
  int seen_a[16][16] = {}, seen_b[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int j = 0; j < 4; ++j)
      for (int h = 0; h < 2; ++h) {
        const int row = g + 8 * (j & 1), col = 2 * t + h + 8 * (j >> 1);
        A[row][col] = half_bf16(a[lane][j], h);
        ++seen_a[row][col];
      }
    for (int j = 0; j < 2; ++j)
      for (int h = 0; h < 2; ++h) {
        const int k = 2 * t + h + 8 * j;
        B[k][g] = half_bf16(b[lane][j], h);
        ++seen_b[k][g];
      }
  }
  for (auto& r : seen_a)
    for (int n : r) REQUIRE(n == 1);
  for (auto& r : seen_b)
    for (int n : r) REQUIRE(n == 1);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n)
      for (int k = 0; k < 16; ++k) D[m][n] += A[m][k] * B[k][n];
}

// out[row][token] of one expert's matrix (rows x K) through the repacked
// layout: the kernel's data path (stage copies, fragment reads, MMA, group
// scale) with the MMA emulated. Rows are in tile order.
std::vector<double> emulate_repacked_gemm(const std::vector<uint8_t>& codes, const std::vector<uint16_t>& scales,
                                          int rows, int K, int I, bool w13, const std::vector<uint16_t>& X,
                                          int tokens) {
  const int tiles = rows / kTileRows, groups = K / kGroup;
  std::vector<double> out(size_t(rows) * tokens, 0.0);
  for (int tile = 0; tile < tiles; ++tile)
    for (int group = 0; group < groups; ++group) {
      // What one stage holds for this tile: its codes, scales and activations.
      std::vector<uint32_t> words(kTileGroupWords);
      for (int lane = 0; lane < 32; ++lane)
        for (int w = 0; w < 8; ++w)
          words[tile_word_index(lane, w)] = repacked_code_word(codes.data(), K, I, w13, tile, group, lane, w);
      uint32_t scale_word[kTileGroupScaleWords];
      for (int g = 0; g < kTileGroupScaleWords; ++g)
        scale_word[g] = repacked_scale_word(scales.data(), K, I, w13, tile, group, g);
      std::vector<uint32_t> stage(size_t(tokens) * 16 * 4);  // uint4s as 4 words
      for (int s = 0; s < tokens; ++s)
        for (int c = 0; c < 16; ++c)
          for (int v = 0; v < 4; ++v) {
            const size_t x = size_t(s) * K + group * kGroup + 8 * c + 2 * v;
            stage[act_stage_uint4(c, s, tokens) * 4 + v] = uint32_t(X[x]) | uint32_t(X[x + 1]) << 16;
          }
      for (int nt = 0; nt < tokens / 8; ++nt) {
        double D[16][8] = {};
        for (int p = 0; p < 4; ++p)
          for (int s = 0; s < 2; ++s) {
            // The biased codes' MMA and the kernel's MMA of -136 (compute_stage).
            uint32_t a[32][4], zero[32][4], b[32][2];
            for (int lane = 0; lane < 32; ++lane) {
              const int g = lane / 4, t = lane % 4;
              const uint32_t word = words[tile_word_index(lane, 2 * p + s)];
              for (int j = 0; j < 4; ++j) a[lane][j] = nibble_pair_as_bf16x2(word, j);
              for (int j = 0; j < 4; ++j) zero[lane][j] = kBf16PairMinus136;
              const uint32_t* v = &stage[act_fragment_uint4(p, nt * 8 + g, t, tokens) * 4];
              b[lane][0] = v[2 * s];
              b[lane][1] = v[2 * s + 1];
            }
            emulate_mma(a, b, D);
            emulate_mma(zero, b, D);
          }
        // Accumulator rows g take the low scale of word g, rows g+8 the high.
        for (int r = 0; r < 16; ++r)
          for (int n = 0; n < 8; ++n) {
            const double sc = r < 8 ? lo_bf16(scale_word[r]) : hi_bf16(scale_word[r - 8]);
            out[size_t(tile * 16 + r) * tokens + nt * 8 + n] += sc * D[r][n];
          }
      }
    }
  return out;
}

void random_weights(int rows, int K, std::mt19937_64& rng, std::vector<uint8_t>* packed,
                    std::vector<uint16_t>* scales) {
  std::uniform_int_distribution<int> code(0, 15);
  std::uniform_real_distribution<float> s(0.75f, 1.25f);
  std::vector<uint8_t> codes(size_t(rows) * K);
  for (auto& c : codes) c = uint8_t(code(rng));
  *packed = ref::pack_int4(codes, rows, K);
  scales->resize(size_t(rows) * (K / kGroup));
  for (auto& x : *scales) x = ref::float_to_bf16(s(rng) / std::sqrt(21.25f * K));
}

std::vector<uint16_t> random_x(int tokens, int K, std::mt19937_64& rng) {
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<uint16_t> x(size_t(tokens) * K);
  for (auto& v : x) v = ref::float_to_bf16(n(rng));
  return x;
}

double dot_row(const std::vector<double>& w, int row, int K, const std::vector<uint16_t>& X, int token) {
  double s = 0;
  for (int c = 0; c < K; ++c) s += w[size_t(row) * K + c] * ref::bf16_to_float(X[size_t(token) * K + c]);
  return s;
}

}  // namespace

TEST_CASE("moe repacked W13 through the MMA fragments: gate row i at accumulator row g, up at g+8") {
  std::mt19937_64 rng(7);
  const int I = 256, H = 384, rows = 2 * I, tokens = 16;
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales;
  random_weights(rows, H, rng, &codes, &scales);
  const auto X = random_x(tokens, H, rng);
  const auto w = ref::dequant_int4(codes.data(), scales.data(), rows, H);
  const auto got = emulate_repacked_gemm(codes, scales, rows, H, I, true, X, tokens);
  double worst = 0;
  for (int tile = 0; tile < rows / 16; ++tile)
    for (int g = 0; g < 8; ++g) {
      const int i = 8 * tile + g;  // the output store_h gives accumulator rows g and g+8
      for (int n = 0; n < tokens; ++n) {
        const double gate = dot_row(w, i, H, X, n), up = dot_row(w, I + i, H, X, n);
        worst = std::max(worst, std::fabs(got[size_t(tile * 16 + g) * tokens + n] - gate));
        worst = std::max(worst, std::fabs(got[size_t(tile * 16 + g + 8) * tokens + n] - up));
      }
    }
  CHECK(worst < 1e-9);
}

TEST_CASE("moe repacked W2 through the MMA fragments: tile rows in order") {
  std::mt19937_64 rng(8);
  const int H = 256, I = 384, tokens = 8;
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales;
  random_weights(H, I, rng, &codes, &scales);
  const auto X = random_x(tokens, I, rng);
  const auto w = ref::dequant_int4(codes.data(), scales.data(), H, I);
  const auto got = emulate_repacked_gemm(codes, scales, H, I, I, false, X, tokens);
  double worst = 0;
  for (int n = 0; n < H; ++n)
    for (int m = 0; m < tokens; ++m)
      worst = std::max(worst, std::fabs(got[size_t(n) * tokens + m] - dot_row(w, n, I, X, m)));
  CHECK(worst < 1e-9);
}
