// What a shape's inputs look like, decided on the host from the seed: pooler
// sequence lengths, MoE routing, and the minimal bytes and FLOPs each shape
// must move and do (the floors' inputs).
#pragma once

#include <cstdint>
#include <vector>

#include "scorer/shapes.h"

namespace scorer {

// B+1 offsets of sequences of min_len..max_len tokens (uniform).
std::vector<int32_t> draw_cu_seqlens(const Shape& s, uint64_t seed);

// MoE routing: each token picks k distinct GLOBAL experts uniformly; weights
// are the softmax of N(0,1) logits over its k picks.
struct Routing {
  std::vector<int32_t> ids;     // [M, k]
  std::vector<float> weights;   // [M, k]
};
Routing draw_routing(const Shape& s, uint64_t seed);
// The routing a moe shape is scored with, from the shape's seed.
Routing routing_for(const Shape& s, uint64_t shape_seed);

// Local experts of this rank that some token routes to, and the number of
// local routes.
int experts_touched(const Shape& s, const Routing& r);
int local_routes(const Shape& s, const Routing& r);

// Minimal bytes: each input read once (for moe only the weights and scales of
// the local experts some token routes to) plus each output written once.
// `routing` is used for moe only.
double min_bytes(const Shape& s, const Routing* routing = nullptr);
double op_flops(const Shape& s, const Routing* routing = nullptr);

// Seed of a shape: the run's seed mixed with the shape's name, so adding or
// reordering shapes does not change the others' inputs.
uint64_t shape_seed(uint64_t run_seed, const Shape& s);

}  // namespace scorer
