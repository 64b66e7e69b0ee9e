// What a shape's inputs look like, decided on the host from the seed: pooler
// sequence lengths, MoE routings, and the one byte model: the minimal bytes
// and FLOPs each shape must move and do (the floors' inputs) and, from the
// same counts, the device memory the scorer holds for it.
//
// Every draw here is portable: the same on every standard library (whose
// distributions are not specified bit for bit). Integers come from `draw`
// (scorer/stats.h); reals from the generator's top 53 bits.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "scorer/shapes.h"

namespace scorer {

// Uniform in (0, 1), and N(0, 1) by Box-Muller. The normal goes through
// std::log, std::sqrt and std::cos: a math library's last-ulp differences can
// move a value by an ulp, never an integer draw.
double draw_unit(std::mt19937_64& rng);
double draw_normal(std::mt19937_64& rng);
// A uniform permutation of v (Fisher-Yates), portable where std::shuffle is not.
void shuffle(std::vector<int32_t>& v, std::mt19937_64& rng);

// B+1 offsets of sequences of min_len..max_len tokens (uniform).
std::vector<int32_t> draw_cu_seqlens(const Shape& s, uint64_t seed);

// One call's MoE routing: k distinct GLOBAL experts per token and their
// weights. Drawn routings (uniform, zipf) weight a token's picks by the
// softmax of N(0, 1) logits; a trace's windows keep its recorded weights.
struct Routing {
  std::vector<int32_t> ids;    // [M, k]
  std::vector<float> weights;  // [M, k]
  bool operator==(const Routing& o) const { return ids == o.ids && weights == o.weights; }
};

// Routings per shape: every check, graph probe and trial of a moe shape takes
// one of these, drawn afresh (pick_routing), so that a kernel that keeps an
// earlier call's routing fails.
constexpr int kRoutingPool = 16;

// The pool of a moe shape, from its seed and its declared distribution
// (Shape::routing): kRoutingPool independent draws (uniform, zipf: one seeded
// permutation of the ids for the whole pool, so the same experts stay hot), or
// kRoutingPool consecutive windows of M tokens of the trace from a seeded
// start, wrapping around its end (file).
std::vector<Routing> routing_pool(const Shape& s, uint64_t shape_seed);

// One draw of each kind (routing_pool's parts, for tests).
Routing draw_uniform_routing(const Shape& s, std::mt19937_64& rng);
Routing draw_zipf_routing(const Shape& s, const std::vector<int32_t>& hottest_first, std::mt19937_64& rng);
Routing trace_window(const Shape& s, const RoutingTrace& t, int first_token);
// Zipf popularity of the r-th hottest of n experts (r from 0): (r+1)^-skew,
// normalised to sum 1.
std::vector<double> zipf_popularity(int n, double skew);

// The pool entry a call takes: drawn from the call's input seed, and never a
// routing equal to the one the previous call took (`previous`, an index into
// the pool, or -1 for none) unless the whole pool is one routing.
int pick_routing(const std::vector<Routing>& pool, uint64_t input_seed, int previous);

// Local experts of this rank that some token routes to, and the number of
// local routes.
int experts_touched(const Shape& s, const Routing& r);
int local_routes(const Shape& s, const Routing& r);

// ---------------------------------------------------------------- bytes and FLOPs
// The one byte model. An op's minimal bytes: each input read once (the
// pooler's B gathered rows; for moe only the weights and scales of the local
// experts some token routes to, every local expert without a routing) plus
// each output written once.
struct OpBytes {
  double weights = 0;      // weights, scales, bias
  double activations = 0;  // activation inputs and the routing or sequence offsets
  double outputs = 0;
  double total() const { return weights + activations + outputs; }
};
OpBytes op_bytes(const Shape& s, const Routing* routing = nullptr);
double min_bytes(const Shape& s, const Routing* routing = nullptr);  // op_bytes(...).total()
double op_flops(const Shape& s, const Routing* routing = nullptr);

// A moe shape's floor inputs are the medians over its routing pool, since
// each call takes another routing (the read floor is monotone in bytes, so
// the floor measured once at the median bytes is the median of the floors).
// Other ops have no routing: their min_bytes and op_flops.
double pool_min_bytes(const Shape& s, const std::vector<Routing>& pool);
double pool_flops(const Shape& s, const std::vector<Routing>& pool);

// Device memory the scorer holds per weight set of a shape: the op's bytes
// with every local expert counted, plus what the scorer itself holds beside
// them (scorer_held_bytes): the pooler's hidden states for its longest
// possible draw (B*max_len tokens, of which the op reads B), the reference's
// fp32 output, and for moe the baseline's bf16 and the reference's fp32
// copies of the weights. --sets N holds N such sets.
double scorer_held_bytes(const Shape& s);
double device_bytes(const Shape& s);  // op_bytes(s).total() + scorer_held_bytes(s)

// Host memory the scorer holds for a shape at once: a moe shape's routing
// pool (kRoutingPool routings of M*k ids and weights) and one call's host
// copy of a routing; the other ops' host buffers are small beside their
// device bytes.
double host_bytes(const Shape& s);

// Seed of a shape: the run's seed mixed with the shape's name, so adding or
// reordering shapes does not change the others' inputs.
uint64_t shape_seed(uint64_t run_seed, const Shape& s);

}  // namespace scorer
