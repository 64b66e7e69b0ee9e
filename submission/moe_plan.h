// The plan of the moe_w4a16 op: how local routes are grouped into blocks, the
// layout the int4 weights are repacked into for the tensor-core kernels, and
// the model that picks a configuration per shape.
//
// Everything here is a pure function. The index math is shared by the host
// (prepare, the CPU tests) and the device (repack and GEMM kernels), so a CPU
// test that emulates the MMA fragments from this math checks the same code the
// kernels run.
//
// Two quantities must not be confused:
//   density  M*k/E_global: routes per expert, the same on every rank. Block
//            sizes follow it (moe_block_tokens).
//   local id global_id - ep_rank*E_local: which of this rank's experts a route
//            goes to, or none (moe_local_expert). Alignment and indexing use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "submission/submission.h"

#if defined(__CUDACC__)
#define MOE_HD __host__ __device__ __forceinline__
#else
#define MOE_HD inline
#endif

namespace submission::moe {

// ------------------------------------------------------------ routing
// Expected routes per expert, M*k/E_global, and the block size that holds
// nearly all of one expert's routes (mean + 3 standard deviations of a Poisson
// count) so that each touched expert's weights are read once. One of 8, 16, 32,
// 64: multiples of the MMA's 8-wide token tile; 64 bounds the registers.
double moe_route_density(int M, int k, int E_global);
int moe_block_tokens(int M, int k, int E_global);

// Local id of a global expert id on this rank, or -1 when another rank holds it.
MOE_HD int moe_local_expert(int global_id, int ep_rank, int E_local) {
  const int e = global_id - ep_rank * E_local;
  return (e >= 0 && e < E_local) ? e : -1;
}

// The token of route r = m*k + j, without an integer division (~20
// instructions on the GPU, once per activation copy of GEMM 1): with
// inv_k = 1.0/k in double, (r + 0.5) * inv_k lies within 0.5/k of no integer,
// and its rounding error is below 2^-22 for r < 2^30, so truncation is exact
// for every k <= 2^20 (validate_moe_dims bounds M*k below 2^30).
MOE_HD int moe_route_token(int r, double inv_k) { return int((double(r) + 0.5) * inv_k); }

// Most blocks any routing can need: each touched expert rounds up once.
// sum_e ceil(n_e/B) <= touched + floor(routes/B), touched <= min(routes, E_local).
int moe_max_blocks(int M, int k, int E_local, int block_tokens);

// ------------------------------------------------------------ repacked layout
// The tensor-core kernels read weights in units of one 16-row tile by one
// group of 128 along the reduction dim: 1 KB of codes, laid out so that each
// lane of a warp finds its mma.m16n8k16 A fragments for all 8 k16 steps of the
// group in 32 bytes, split in two 16-byte halves at byte offsets
// lane*16 and 512 + lane*16, so that both warp-wide LDS.128 are contiguous.
// Word w = 0..7 of a lane (w = 2p + s) feeds k16 step s of k32 piece p.
//
// Within a group the reduction dim is permuted: lane (g = L/4, t = L%4) holds
// the logical MMA columns {2t, 2t+1, 2t+8, 2t+9} of step s of piece p as the
// physical columns 32p + 8t + 4s + {0, 1, 2, 3}. A and B use the same
// permutation, so the dot products are unchanged, and a lane's B fragments of
// a piece are 8 contiguous bf16 of the activation row (one LDS.128).
//
// Nibble j (bits 4j..4j+3) of word w is A element
//   row g + 8*(j & 1), physical column 32p + 8t + 4s + 2*((j >> 1) & 1) + (j >> 2),
// so ((word >> 4j) & 0x000f000f) is the pair (j, j+4) = A register j:
// a0..a3 = (row g, cols 2t..2t+1), (row g+8, ..), (row g, cols 2t+8..), (row
// g+8, ..), the lower column in the low half, as mma.m16n8k16 expects.
constexpr int kGroup = kMoeGroupSize;  // 128
constexpr int kTileRows = 16;          // MMA M
constexpr int kTileGroupBytes = 1024;  // 16 rows x 128 codes / 2
constexpr int kTileGroupWords = kTileGroupBytes / 4;
constexpr int kTileGroupScaleWords = 8;  // word g = (s[row g], s[row g+8])

// 32-bit word index of word w of lane L within a tile-group.
MOE_HD int tile_word_index(int lane, int w) { return (w >> 2) * 128 + lane * 4 + (w & 3); }

struct TileElem {
  int row;  // 0..15 within the tile
  int col;  // 0..127 within the group
};
MOE_HD TileElem tile_nibble_source(int lane, int w, int nib) {
  const int g = lane >> 2, t = lane & 3, p = w >> 1, s = w & 1;
  return {g + 8 * (nib & 1), 32 * p + 8 * t + 4 * s + 2 * ((nib >> 1) & 1) + (nib >> 2)};
}

// Rows of W13 in tile `tile`: gate rows 8*tile..8*tile+7 then the matching up
// rows, so one MMA tile holds both halves of SiLU(gate)*up for 8 outputs and
// the thread that holds gate (accumulator rows g) also holds up (rows g+8).
MOE_HD int w13_source_row(int tile, int row_in_tile, int I) {
  return row_in_tile < 8 ? 8 * tile + row_in_tile : I + 8 * tile + (row_in_tile - 8);
}
MOE_HD int w2_source_row(int tile, int row_in_tile) { return kTileRows * tile + row_in_tile; }
MOE_HD int tile_source_row(bool w13, int tile, int row_in_tile, int I) {
  return w13 ? w13_source_row(tile, row_in_tile, I) : w2_source_row(tile, row_in_tile);
}

// Where tile-group (tile, group) sits among an array's tile-groups, `tile`
// counted over all experts (e * tiles + tile within the expert), for packs of
// `pack` tiles (a divisor of the tiles per expert, so no pack straddles two
// experts). pack = 1: each tile's groups are consecutive ([tile][group]), so a
// stage of a work unit reads one 1 KB piece per tile, `groups` KB apart.
// pack = the unit's tiles: a pack's tiles are consecutive within each group
// ([pack][group][tile in pack]), so a stage is one contiguous run of
// pack x 1 KB and a whole unit one contiguous stream, which DRAM serves with
// fewer row activations than many 1 KB pieces.
MOE_HD size_t tile_group_index(size_t tile, int group, int groups, int pack) {
  const size_t in_pack = tile % pack;
  return (tile - in_pack) * groups + size_t(group) * pack + in_pack;
}

// The 32-bit word offsets of tile-group (tile, group)'s codes and scales, in
// one of two layouts, both in tile_group_index's order. Apart: codes
// [tile-group][256 words] and scales [tile-group][8 words], two arrays.
// Stage-packed (the warp-specialised kernels): one array in which each
// (pack, group) holds its tiles' codes, then their scales, the order of a
// stage in shared memory, so that with packs of a unit's tiles a stage is
// one contiguous run and the producer warp fetches it with one bulk copy,
// not two (a stage's issue is on the producer's path: 0.3-1.8% per shape).
struct TileGroupWords {
  size_t codes, scales;
};
MOE_HD TileGroupWords tile_group_words(size_t tile, int group, int groups, int pack, bool stage_packed) {
  const size_t i = tile_group_index(tile, group, groups, pack);
  if (!stage_packed) return {i * kTileGroupWords, i * kTileGroupScaleWords};
  const size_t in_pack = tile % pack, run = (i - in_pack) * (kTileGroupWords + kTileGroupScaleWords);
  return {run + in_pack * kTileGroupWords, run + size_t(pack) * kTileGroupWords + in_pack * kTileGroupScaleWords};
}

// Word w of lane L of (tile, group) of one expert, from its codes [rows][K/2]
// (two per byte along K, low nibble first).
MOE_HD uint32_t repacked_code_word(const uint8_t* codes, int K, int I, bool w13, int tile, int group, int lane, int w) {
  uint32_t v = 0;
  for (int nib = 0; nib < 8; ++nib) {
    const TileElem el = tile_nibble_source(lane, w, nib);
    const int row = tile_source_row(w13, tile, el.row, I), col = group * kGroup + el.col;
    const uint8_t byte = codes[size_t(row) * (K / 2) + col / 2];
    v |= uint32_t((col & 1) ? byte >> 4 : byte & 15) << (4 * nib);
  }
  return v;
}

// Scale word g of (tile, group) of one expert, from its scales [rows][K/128]
// (bf16 bits): the scales of rows g and g+8, the rows of a lane's accumulators.
MOE_HD uint32_t repacked_scale_word(const uint16_t* scales, int K, int I, bool w13, int tile, int group, int g) {
  const int groups = K / kGroup;
  const int lo = tile_source_row(w13, tile, g, I), hi = tile_source_row(w13, tile, g + 8, I);
  return uint32_t(scales[size_t(lo) * groups + group]) | uint32_t(scales[size_t(hi) * groups + group]) << 16;
}

// bf16 bit patterns of 128 + q for the codes q in nibbles j and j+4 of a word:
// exponent 2^7 with q in the low mantissa bits is exact. The MMA of these
// biased values plus one MMA of -136 (0xC308) in every A element gives
// (q - 8) . x, the kernels' zero point folded into the sum; or subtracting
// 136 (0x4308) from each gives q - 8, also exact.
constexpr uint32_t kBf16Pair128 = 0x43004300u;
constexpr uint32_t kBf16Pair136 = 0x43084308u;
constexpr uint32_t kBf16PairMinus136 = 0xC308C308u;
MOE_HD uint32_t nibble_pair_as_bf16x2(uint32_t word, int j) { return ((word >> (4 * j)) & 0x000f000fu) | kBf16Pair128; }

// Activation stage in shared memory: for each k32 piece p, `tokens` rows of
// 64 bytes (32 bf16). 16-byte chunk c of a group (elements 8c..8c+7) of slot s
// goes to uint4 index (p*tokens + s)*4 + c%4 with p = c/4. Lane (g, t) reads the
// B fragments of piece p, token tile nt from uint4 (p*tokens + nt*8 + g)*4 + t:
// elements 32p + 8t + 0..7, which is what the permutation above assigns it.
// Eight lanes of a quarter-warp read 128 contiguous bytes: no bank conflicts.
MOE_HD int act_stage_uint4(int chunk, int slot, int tokens) { return ((chunk >> 2) * tokens + slot) * 4 + (chunk & 3); }
MOE_HD int act_fragment_uint4(int piece, int token, int t, int tokens) { return (piece * tokens + token) * 4 + t; }

// ------------------------------------------------------------ GEMM geometry
// The tensor-core GEMMs (dev/moe_mma_cta_copies.cuh, and moe_mma_ws.cuh with a fifth,
// producer warp): persistent CTAs of 4 MMA warps, 3 (4 or 6 in variants) per
// SM, each streaming its work units through a pipeline of stages of one
// scale group: the unit's weights and scales, the block's activations and
// the stage's metadata. Shared here so that the plan's model sees what the
// kernels do.
//
// CTAs per SM: 3 by default. The kernels are latency-bound (ncu: DRAM 14-38%
// of peak, half the issue slots empty), so the mma_occ variants trade
// pipeline depth for warps where the registers and shared memory allow it: 6
// CTAs cap a thread at 85 registers, which the kernels of blocks of 8 and 16
// routes fit, and need 3 stages in a sixth of the SM's shared memory. On the
// H200 that won where it fit a GEMM into one wave of CTAs and lost elsewhere
// (docs/perf-log.md, round 3), so it is not the default.
constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = 32 * kMmaWarps;
// Shared memory of an SM for the kernels' CTAs: 227 KB less a 1 KB per-CTA
// reserve for up to 6 CTAs, rounded down to a multiple of 6 KB.
constexpr int kMmaSmemPerSm = 216 * 1024;
constexpr int kMmaMaxStages = 12;
constexpr int mma_smem_budget(int ctas_per_sm) { return kMmaSmemPerSm / ctas_per_sm; }

// block, row group, valid routes, split, then the route of each of `tokens` slots
constexpr int mma_meta_ints(int tokens) { return (4 + tokens + 3) / 4 * 4; }
constexpr int mma_stage_bytes(int tokens, int tiles) {
  return tiles * (kTileGroupBytes + kTileGroupScaleWords * 4) + tokens * kGroup * 2 + mma_meta_ints(tokens) * 4;
}
// Shared memory past the stages: the combine list (tokens ints) and the
// zero-point MMA's constant A fragment (16 bytes, see compute_stage).
constexpr int mma_tail_bytes(int tokens) { return tokens * 4 + 16; }
// The warp-specialised kernel's tail adds a full and an empty mbarrier per stage.
constexpr int ws_tail_bytes(int tokens) { return mma_tail_bytes(tokens) + 2 * 8 * kMmaMaxStages; }
// As many stages as the budget holds next to a tail of `tail` bytes.
constexpr int mma_stages(int tokens, int tiles, int ctas_per_sm, int tail) {
  return (mma_smem_budget(ctas_per_sm) - tail) / mma_stage_bytes(tokens, tiles) < kMmaMaxStages
             ? (mma_smem_budget(ctas_per_sm) - tail) / mma_stage_bytes(tokens, tiles)
             : kMmaMaxStages;
}
constexpr int mma_stages(int tokens, int tiles, int ctas_per_sm) {
  return mma_stages(tokens, tiles, ctas_per_sm, mma_tail_bytes(tokens));
}
// The most CTAs per SM a kernel of blocks of `tokens` routes and units of
// `tiles` 16-row tiles may use (see above).
constexpr int mma_max_ctas_per_sm(int tokens, int tiles) {
  return tokens <= 16 && mma_stages(tokens, tiles, 6) >= 3 ? 6 : 3;
}

// The warp-specialised kernels (moe_mma_ws.cuh) run 4 CTAs per SM only with
// blocks of 8 routes, whose MMA warps fit the 96 registers a thread gets
// there; 3 otherwise.
constexpr int ws_max_ctas_per_sm(int tokens) { return tokens == 8 ? 4 : 3; }

// ------------------------------------------------------------ plan
enum class MoeKernel {
  mma,   // tensor cores: repacked weights, swap-AB mma.sync, cp.async pipeline
  gemv,  // CUDA cores on the weights as given: the simple reference variant
};

struct MoePlan {
  MoeKernel kernel = MoeKernel::mma;
  bool pdl = false;               // GEMM launches chained by programmatic dependent launch
  int block_tokens = 8;           // route slots per block (a multiple of 8)
  int max_blocks = 0;             // workspace bound over every routing
  int tile_rows_up = 0;           // mma: weight rows per CTA work unit, GEMM 1 (64 or 128)
  int tile_rows_down = 0;         // mma: the same for GEMM 2
  int ctas_up = 3;                // mma: resident CTAs per SM, GEMM 1 (3; mma_occ*: 6, mma_ws4: 4 where they fit)
  int ctas_down = 3;              // mma: the same for GEMM 2
  int splits_down = 1;            // mma: GEMM 2's reduction (I) split into this many parts, a divisor of I/128
  bool stream_k_up = false;       // mma: GEMM 1 deals equal ranges of stages to its CTAs (CtaStages)
  bool unit_contiguous = false;   // mma: weights packed per work unit (tile_group_index)
  bool warp_specialized = false;  // mma: moe_ws_kernel (a producer warp's copies; needs unit_contiguous)
  bool deferred_combine = false;  // mma: GEMM 2 combines after all its units (combine_all_tokens), not per unit
  bool cta_align = false;         // warp-specialised: each GEMM CTA aligns the routes itself, no alignment launch
  int queue_chunk_stages = 0;     // warp-specialised: > 0 runs GEMM 1 on the work queue, chunks of this many stages
  bool queue_down = false;        // warp-specialised: GEMM 2 on the work queue (whole units)
  bool h_flags = false;    // warp-specialised: GEMM 2 waits for the GEMM 1 units its units read, not GEMM 1's grid
  bool rotate_up = false;  // warp-specialised: each GEMM 1 unit's stages start at a group of its own
};

// Routes the one-warp alignment takes: M*k <= 32, decode batches of one or
// a few tokens (qwen3 and mixtral at M = 1).
constexpr int kAlignWarpRoutes = 32;
// The aligned routing (moe_align.cuh). Only the first num_blocks blocks are
// meaningful.
struct AlignedRoutes {
  int* num_blocks;    // [1]
  int* block_expert;  // [max_blocks] local expert of each block, ascending
  int* block_routes;  // [max_blocks] valid slots of each block, 1..block_tokens, valid first
  int* slot_route;    // [max_blocks * block_tokens] route m*k+j of each slot, -1 for padding
  int* token_routes;  // [M] local routes of each token (0: its output row is zeros)
};
// Its ints: the block count, each block's expert and routes, each slot's
// route, each token's route count.
constexpr int aligned_routes_ints(int M, int block_tokens, int max_blocks) {
  return 1 + 2 * max_blocks + max_blocks * block_tokens + M;
}
// The layout over aligned_routes_ints(M, block_tokens, max_blocks) ints from
// p, in that order: in device workspace for the alignment launches, or in a
// GEMM CTA's shared memory (cta_align).
__host__ __device__ inline AlignedRoutes aligned_routes_at(int* p, int block_tokens, int max_blocks) {
  return {p, p + 1, p + 1 + max_blocks, p + 1 + 2 * max_blocks, p + 1 + 2 * max_blocks + max_blocks * block_tokens};
}
// The most a GEMM CTA holds in shared memory to align its own routes (2 KB):
// within every kernel's slack below its CTAs' share of the SM (kMmaSmemPerSm).
constexpr int kCtaRoutingMaxInts = 512;

// GEMM 2 takes its units from the work queue (moe_mma_ws.cuh) where the
// expected units (uniform routing, splits included) make at least this many
// waves of resident CTAs. With fewer, few CTAs get a second unit to take
// from a slower one, and the takes only cost: on the H200 qwen3 M=1 (0.65
// waves) and dsv3 M=8 (1.02) ran 1% slower on the queue, every public shape
// from 2.6 waves 0-5% faster (docs/perf-log.md, round 48).
constexpr double kQueueDownMinWaves = 2.0;

// Chunks of chunk_stages stages that a unit of `groups` stages makes on
// GEMM 1's work queue (the last may be shorter).
MOE_HD int queue_chunks_per_unit(int groups, int chunk_stages) { return (groups + chunk_stages - 1) / chunk_stages; }

// Stages per chunk of GEMM 1 on the work queue (mma_queue).
// At 8 every shape ran slower than at 16, most by 6-8% (docs/perf-log.md,
// round 48): each chunk's end stops its MMA warps for the post and count.
constexpr int kQueueChunkStages = 16;

// GEMM 1 runs on the stream-K schedule only for H / 128 at least this.
constexpr int kStreamKMinGroups = 32;

// Throws std::invalid_argument for invalid dims (see submission.h).
void validate_moe_dims(const MoeDims& d);

// The plan for a variant; throws std::invalid_argument for an unknown variant
// or one that cannot run the shape (mma_rows128 with blocks of 64). sm_count
// feeds the model.
//   default       tensor cores, 128-row units where the schedule fills the
//                 CTAs anyway (GEMM 1 on stream-K, GEMM 2 split or with
//                 units enough), elsewhere the model's, GEMM 1 on a
//                 stream-K schedule, GEMM 2's reduction split where its units
//                 leave CTAs idle (moe_down_splits) and its combine after all
//                 its units (combine_all_tokens) where they take more than
//                 one wave of CTAs, its CTAs taking the units from the work
//                 queue where they make kQueueDownMinWaves waves, GEMMs
//                 PDL-chained, on the warp-specialised kernels
//                 (moe_mma_ws.cuh: a producer warp copies, weights packed
//                 per unit)
//   mma_cta_copies  the default on moe_mma_kernel (every thread copies by
//                 cp.async, a CTA barrier per stage): the default before
//                 the producer warp
//   mma           whole units round-robin in GEMM 1, no split in GEMM 2, on
//                 moe_mma_kernel (the default before either)
//   mma_rows64    the default with 64-row units in both GEMMs
//   mma_rows128   the default with 128-row units
//   mma_nopdl     the default with plain launches
//   mma_ws4       the default with 4 CTAs per SM where ws_max_ctas_per_sm
//                 allows it
//   mma_unit_combine  the default with GEMM 2's combine always per unit
//                 (count_and_combine)
//   mma_grid_combine  the default with GEMM 2's combine always after all
//                 units (combine_all_tokens)
//   mma_align_launch  the default with the alignment always its own launch
//                 (no cta_align)
//   mma_queue_down  the default with GEMM 2 always on the work queue
//                 (moe_mma_ws.cuh): CTAs take whole units as they free up
//   mma_queue     mma_queue_down with GEMM 1 on the work queue too, in
//                 chunks of kQueueChunkStages stages, 128-row units where
//                 they fit
//   mma_no_queue  the default with GEMM 2 never on the work queue (the
//                 default before round 48)
//   mma_h_flags   the default with GEMM 2 always reading h unit by unit as
//                 GEMM 1 publishes it (h_ready), not after GEMM 1's grid
//   mma_h_grid    the default with GEMM 2 always waiting for GEMM 1's
//                 whole grid (the default before round 61)
//   mma_rotate    the default with each GEMM 1 unit's stages always
//                 starting at a group of its own (stage_group), on
//                 stream-K too
//   mma_no_rotate  the default with every unit starting at its first group
//                 (the default before round 64)
//   mma_contig    mma with each work unit's weights and scales packed into
//                 one contiguous stream (no split: a pack spans the unit)
//   mma_occ       mma with 6 CTAs per SM and shallower pipelines where the
//                 kernel allows it (mma_max_ctas_per_sm)
//   mma_occ_splitk  mma_occ with the split
//   gemv          CUDA cores on the weights as given (moe_gemv.cuh)
MoePlan plan_moe(const MoeDims& d, const std::string& variant, int sm_count);
// The variant names plan_moe takes, "default" first (the list above).
const std::vector<std::string>& moe_variant_names();

// The model behind the default tile rows where the schedule alone would
// leave CTAs idle (see plan_moe): estimated µs of one GEMM (weight
// rows per expert `rows`, reduction `K`) with CTA units of `tile_rows` rows.
// Expected units (uniform routing) are dealt round-robin to the persistent
// CTAs, so the GEMM runs in phases: all CTAs with a k-th unit stream it
// together, sharing HBM bandwidth, each limited by the bytes its pipeline keeps
// in flight. Plus the activation bytes each unit re-reads from L2.
double moe_gemm_cost_us(const MoeDims& d, int block_tokens, int rows, int K, int tile_rows, int sm_count,
                        int ctas_per_sm);

// GEMM 2 splits its reduction (I) into parts, each a work unit of its own
// whose fp32 rows the combine sums in a fixed order, when the expected units
// (blocks x H/tile_rows, uniform routing) leave resident CTAs idle: mixtral at
// M=1 has 2 blocks x 64 row groups = 128 units for 396 CTAs, at M=64 8 x 32 =
// 256. Not when they fill the grid: then a split only moves the edge of the
// last wave, which the expected units cannot place (dsv3 M=8, ~800 units of
// 16 stages, split in 2: 69.8 -> 71.1 us). Each part has at least
// kMinGroupsPerSplit groups and the split s divides I/128. Which s depends on
// what a unit's end costs:
//  - with the combine per unit (deferred = false), the largest s whose units
//    still run in one wave: each unit's end stops the MMA warps for the
//    election's round trips, so a second, partial wave of split units cost as
//    long as the first (measured: mixtral M=64 split in 2 for 512 units on 396
//    CTAs, GEMM 2 196 -> 246 us);
//  - with the combine after all units (deferred = true), a unit's end is only
//    its stores, and the CTAs stream their units back to back: s minimises
//    the stages on the busiest CTA, waves x (I/128/s + kUnitEndStages); any
//    s within kSplitTolerance of that minimum counts as a tie, which goes to
//    the smaller s (fewer partial rows for the combine to read).
constexpr int kMinGroupsPerSplit = 4;
constexpr int kUnitEndStages = 1;
constexpr double kSplitTolerance = 0.05;
int moe_down_splits(const MoeDims& d, int block_tokens, int tile_rows, int resident_ctas, bool deferred);

// Whether GEMM 2 combines after all its units (combine_all_tokens) rather than
// per unit, for `units` work units (splits included) on `resident_ctas`: where
// a CTA would otherwise stop between units (more than one wave), or would
// combine more than one token at its unit's end (more (token, row group)
// pairs than units), each token one L2 round trip with the MMA warps stopped.
// Not where each CTA has one unit and combines at most one token at its end
// (qwen3 M=1: 128 units, 32 pairs): there the grid barrier only adds its
// wait (measured 24.2 -> 24.7 us).
bool moe_defer_combine(const MoeDims& d, double units, int row_groups, int resident_ctas);

}  // namespace submission::moe
