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
// one of two layouts, both in tile_group_index's order. Apart (dev/'s
// CTA-copies kernel): codes [tile-group][256 words] and scales
// [tile-group][8 words], two arrays.
// Stage-packed (the warp-specialised kernels): one array in which each
// (pack, group) holds its tiles' codes, then their scales, the order of a
// stage in shared memory, so that with packs of a unit's tiles a stage is
// one contiguous run and the producer warp fetches it with one bulk copy,
// not two (a stage's issue is on the producer's path: docs/perf-log.md, round 63).
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

// Activation stage in shared memory: for each k32 piece p, `tokens` rows of
// 64 bytes (32 bf16). 16-byte chunk c of a group (elements 8c..8c+7) of slot s
// goes to uint4 index (p*tokens + s)*4 + c%4 with p = c/4. Lane (g, t) reads the
// B fragments of piece p, token tile nt from uint4 (p*tokens + nt*8 + g)*4 + t:
// elements 32p + 8t + 0..7, which is what the permutation above assigns it.
// Eight lanes of a quarter-warp read 128 contiguous bytes: no bank conflicts.
MOE_HD int act_stage_uint4(int chunk, int slot, int tokens) { return ((chunk >> 2) * tokens + slot) * 4 + (chunk & 3); }
MOE_HD int act_fragment_uint4(int piece, int token, int t, int tokens) { return (piece * tokens + token) * 4 + t; }

// ------------------------------------------------------------ GEMM geometry
// The tensor-core GEMMs (moe_mma_ws.cuh: 4 MMA warps and a producer warp; dev/ adds others):
// persistent CTAs, 3 per SM in the upload, each streaming its work units through a pipeline of
// stages of one scale group: the unit's weights and scales, the block's activations and the
// stage's metadata. Shared here so that the plan's model sees what the kernels do.
constexpr int kMmaWarps = 4;
constexpr int kMmaThreads = 32 * kMmaWarps;
// Shared memory of an SM for the kernels' CTAs: 227 KB less a 1 KB per-CTA
// reserve for up to 6 CTAs (dev/'s kernels), rounded down to a multiple of 6 KB.
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

// ------------------------------------------------------------ plan
enum class MoeKernel {
  mma,   // tensor cores: repacked weights, swap-AB mma.sync, pipelined copies
  gemv,  // CUDA cores on the weights as given: the simple reference variant
};

// A plan: what the op's host code (moe_w4a16.cu) allocates and launches, and which GEMM kernels
// it picks (moe_op.h). GEMM 1 on the chunk queue (queue_chunk_stages), CTAs per SM other than 3
// and the kernels without a producer warp are only dev/'s variants' (dev/moe_plans.h).
struct MoePlan {
  MoeKernel kernel = MoeKernel::mma;
  bool pdl = false;               // GEMM launches chained by programmatic dependent launch
  int block_tokens = 8;           // route slots per block (a multiple of 8)
  int max_blocks = 0;             // workspace bound over every routing
  int tile_rows_up = 0;           // mma: weight rows per CTA work unit, GEMM 1 (64 or 128)
  int tile_rows_down = 0;         // mma: the same for GEMM 2
  int ctas_up = 3;                // mma: resident CTAs per SM, GEMM 1
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
// from a slower one, and the takes only cost (docs/perf-log.md, round 48).
constexpr double kQueueDownMinWaves = 2.0;

// Chunks of chunk_stages stages that a unit of `groups` stages makes on
// GEMM 1's work queue (the last may be shorter).
MOE_HD int queue_chunks_per_unit(int groups, int chunk_stages) { return (groups + chunk_stages - 1) / chunk_stages; }

// GEMM 1 runs on the stream-K schedule only for H / 128 at least this: a cut
// unit's fix-up is paid per unit, and with 16 stages (H = 2048) it cost more
// than stream-K gained (docs/perf-log.md, rounds 8 and 27).
constexpr int kStreamKMinGroups = 32;

// Throws std::invalid_argument for invalid dims (see submission.h).
void validate_moe_dims(const MoeDims& d);

// The plan for "default" or "gemv"; throws std::invalid_argument for any other name or invalid
// dims. sm_count feeds the model.
//   default  tensor cores on the warp-specialised kernels (moe_mma_ws.cuh: a producer warp
//            copies, weights packed per unit), GEMMs PDL-chained. Its steps, in order:
//            GEMM 1 on stream-K where H/128 >= kStreamKMinGroups; unit rows
//            (plan_moe_tile_rows); GEMM 2's split and combine (plan_moe_down_split); how the
//            units reach the CTAs (plan_moe_schedule).
//   gemv     CUDA cores on the weights as given (moe_gemv.cuh)
// dev/moe_plans.h plans the other variants, from these steps.
MoePlan plan_moe(const MoeDims& d, const std::string& variant, int sm_count);

// Unit rows of both GEMMs for the plan's CTAs per SM (ctas_up, ctas_down) and GEMM 1's
// schedule (stream_k_up): 128 where the schedule fills the CTAs whatever the unit count (GEMM 1
// on stream-K; GEMM 2 where its 128-row units fill the grid or split to fill it, combining
// after all units), elsewhere the model's (moe_model_tile_rows), which takes 64 rows to fill
// CTAs that too few units leave idle. There 128 rows halve the activation reads and the unit
// ends (docs/perf-log.md, round 26).
void plan_moe_tile_rows(const MoeDims& d, int sm_count, MoePlan& p);
// GEMM 2's split (moe_down_splits, the combine after all units priced in) and whether it
// combines after all its units (moe_defer_combine), for the plan's GEMM 2 units and CTAs.
void plan_moe_down_split(const MoeDims& d, int sm_count, MoePlan& p);
// How the plan's units reach the CTAs, on the warp-specialised kernels:
//  - GEMM 2 on the work queue where its expected units make kQueueDownMinWaves waves;
//  - GEMM 2 reads h unit by unit as GEMM 1 publishes it (h_flags) where GEMM 1's expected units
//    make a wave of resident CTAs or more: its CTAs then end apart. With fewer, each CTA holds
//    one unit and they end together; the flags only add a fence and a poll (round 61);
//  - GEMM 1's whole units start at groups of their own (rotate_up), so that the CTAs reading a
//    token's row do not read the same bytes at once; stream-K's ranges are spread already
//    (round 64);
//  - at most kAlignWarpRoutes routes, each GEMM CTA aligns them itself into shared memory
//    (cta_align): the alignment launch leaves every call's critical path.
void plan_moe_schedule(const MoeDims& d, int sm_count, MoePlan& p);

// 128-row units hold twice the accumulators; with blocks of 64 routes that
// exceeds the register budget of three CTAs per SM.
constexpr bool moe_rows128_fit(int block_tokens) { return block_tokens <= 32; }
// Of two estimates (moe_gemm_cost_us) of one GEMM, the unit rows to take: ties (within 2%) go to
// 128 rows, half the activation reads and shared-memory traffic.
inline int moe_cheaper_tile_rows(double us64, double us128) { return us128 <= 1.02 * us64 ? 128 : 64; }
// The model's unit rows of one GEMM (weight rows per expert `rows`, reduction K) at
// `ctas_per_sm`: 64 where 128 rows do not fit, else the cheaper estimate.
int moe_model_tile_rows(const MoeDims& d, int block_tokens, int rows, int K, int sm_count, int ctas_per_sm);

// The model behind the default tile rows where the schedule alone would
// leave CTAs idle (plan_moe_tile_rows): estimated µs of one GEMM (weight
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
// kMinGroupsPerSplit groups and the split s divides I/128. With the combine
// after all units (deferred_combine) a unit's end is only its stores, and the
// CTAs stream their units back to back: s minimises the stages on the busiest
// CTA, waves x (I/128/s + kUnitEndStages); any s within kSplitTolerance of
// that minimum counts as a tie, which goes to the smaller s (fewer partial
// rows for the combine to read). (With the combine per unit a second wave
// costs as long as the first: dev/moe_plans.cpp, one_wave_down_splits.)
constexpr int kMinGroupsPerSplit = 4;
constexpr int kUnitEndStages = 1;
constexpr double kSplitTolerance = 0.05;
int moe_down_splits(const MoeDims& d, int block_tokens, int tile_rows, int resident_ctas);

// The expected blocks of a routing drawn uniformly (the model's units are these x row groups).
double moe_expected_blocks(const MoeDims& d, int block_tokens);

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
