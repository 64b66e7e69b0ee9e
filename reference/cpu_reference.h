// fp64 CPU references of the four ops, for tests on small shapes. Inputs are
// host arrays (bf16 as raw bit patterns); outputs are double, before any
// rounding to the op's output type. Semantics: submission/submission.h.
#pragma once

#include <cstdint>
#include <vector>

namespace ref {

// out[B*H]
std::vector<double> pooler_cpu(int B, int H, const uint16_t* hidden, const int32_t* cu_seqlens, const uint16_t* W,
                               const uint16_t* bias);

// out[M*N]
std::vector<double> dense_cpu(int M, int N, int K, const uint16_t* X, const uint16_t* W);

struct RouterCpu {
  std::vector<double> logits;   // [T*E]
  std::vector<int32_t> ids;     // [T*k], descending; ties to the lower id
  std::vector<double> weights;  // [T*k]
};
RouterCpu router_cpu(int T, int H, int E, int k, const uint16_t* X, const uint16_t* Wg);

// out[M*H]. h = silu(gate)*up is rounded to bf16, as the op says.
std::vector<double> moe_cpu(int M, int H, int I, int E_global, int E_local, int k, int ep_rank, const uint16_t* X,
                            const int32_t* topk_ids, const float* topk_weights, const uint8_t* W13, const uint16_t* S13,
                            const uint8_t* W2, const uint16_t* S2);

}  // namespace ref
