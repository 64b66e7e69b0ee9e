// The submission's contract with the scorer. This header and the .cu files
// beside it are all that is uploaded.
//
// Every op has two halves:
//   prepare (make_<op>): untimed, called once per weight set. It may repack the
//     weights into any layout, allocate workspace and choose a kernel for the
//     shape. The weight buffers it is given stay valid and unchanged for the
//     lifetime of the returned object, which the scorer destroys before freeing
//     them.
//   run (<Op>::run): timed. It takes device pointers and the scorer's stream and
//     must do all of its device work on that stream. It must not allocate or
//     free memory, synchronise the device or the stream, create streams or
//     events, or keep any result between calls: every call computes from the
//     inputs it is given. The scorer captures run() into a CUDA graph to check
//     this, so run() must also be capturable.
//
// All tensors are row-major and densely packed; bf16 unless said; fp32
// accumulation. Pointers to bf16 data are 16-byte aligned.
//
// Variants: each op has named kernel variants. "default" is the per-shape
// dispatch (the kernel and configuration judged best for that shape's regime);
// any other name forces that kernel on every shape it supports. make_<op>
// throws std::invalid_argument for an unknown variant or a shape the variant
// cannot run.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace submission {

using bf16 = __nv_bfloat16;

// ---------------------------------------------------------------- pooler
// pooled[b] = hidden[cu_seqlens[b+1] - 1]          (last token of sequence b)
// out[B, H] = tanh(pooled . W^T + bias)
// Valid: B >= 1, H >= 8, H % 8 == 0, 1 <= each sequence length.
struct PoolerDims {
  int B;
  int H;
};
struct PoolerWeights {
  const bf16* W;     // [H, H]
  const bf16* bias;  // [H]
};
struct PoolerIO {
  const bf16* hidden;         // [S_total, H]
  const int32_t* cu_seqlens;  // [B + 1], cu_seqlens[0] == 0, increasing
  int S_total;
  bf16* out;  // [B, H]
};
class Pooler {
 public:
  virtual ~Pooler() = default;
  virtual void run(const PoolerIO& io, cudaStream_t stream) = 0;
};
std::unique_ptr<Pooler> make_pooler(const PoolerDims& dims, const PoolerWeights& w,
                                    const std::string& variant = "default");

// ---------------------------------------------------------------- dense
// out[M, N] = X[M, K] . W[N, K]^T
// Valid: M >= 1, N >= 1, K >= 8, K % 8 == 0.
struct DenseDims {
  int M;
  int N;
  int K;
};
struct DenseWeights {
  const bf16* W;  // [N, K]
};
struct DenseIO {
  const bf16* X;  // [M, K]
  bf16* out;      // [M, N]
};
class Dense {
 public:
  virtual ~Dense() = default;
  virtual void run(const DenseIO& io, cudaStream_t stream) = 0;
};
std::unique_ptr<Dense> make_dense(const DenseDims& dims, const DenseWeights& w, const std::string& variant = "default");

// ---------------------------------------------------------------- router
// logits[T, E] (fp32) = X[T, H] . Wg[E, H]^T
// probs = softmax(logits) per token
// topk_ids[T, k]     = the k largest, descending; ties go to the lower expert id
// topk_weights[T, k] = probs[topk_ids] / sum(probs[topk_ids])
// Valid: T >= 1, H >= 8, H % 8 == 0, 1 <= k <= E.
struct RouterDims {
  int T;
  int H;
  int E;
  int k;
};
struct RouterWeights {
  const bf16* Wg;  // [E, H]
};
struct RouterIO {
  const bf16* X;        // [T, H]
  float* logits;        // [T, E]
  int32_t* topk_ids;    // [T, k]
  float* topk_weights;  // [T, k]
};
class Router {
 public:
  virtual ~Router() = default;
  virtual void run(const RouterIO& io, cudaStream_t stream) = 0;
};
std::unique_ptr<Router> make_router(const RouterDims& dims, const RouterWeights& w,
                                    const std::string& variant = "default");

// ---------------------------------------------------------------- moe_w4a16
// E_global experts; this rank (ep_rank) holds E_local of them: global ids
// [ep_rank*E_local, (ep_rank+1)*E_local); local id = global - ep_rank*E_local.
// int4 weights, symmetric, group size 128 along the reduction dim, one bf16
// scale per (row, group): w = (q - 8) * s. Two codes per byte along the
// reduction dim, low nibble first.
//   (gate, up) = W13_e . X[m]            (rows 0..I-1 gate, I..2I-1 up)
//   h          = bf16(silu(gate) * up)
//   out[m]     = sum over j with topk_ids[m,j] local of topk_weights[m,j] * W2_e . h
// Routes to other ranks' experts contribute nothing; a token with no local
// route gets zeros. Block sizes follow the routing density M*k/E_global (the
// GLOBAL count); alignment and indexing use local ids.
// Valid: M >= 1, H % 128 == 0, I % 128 == 0, 1 <= k <= E_global,
//        E_global % E_local == 0, 0 <= ep_rank < E_global / E_local.
constexpr int kMoeGroupSize = 128;
struct MoeDims {
  int M;
  int H;
  int I;
  int E_global;
  int E_local;
  int k;
  int ep_rank;
};
struct MoeWeights {
  const uint8_t* W13;  // [E_local, 2I, H/2]    packed int4 codes
  const bf16* S13;     // [E_local, 2I, H/128]  scales
  const uint8_t* W2;   // [E_local, H, I/2]     packed int4 codes
  const bf16* S2;      // [E_local, H, I/128]   scales
};
struct MoeIO {
  const bf16* X;              // [M, H]
  const int32_t* topk_ids;    // [M, k] global expert ids, distinct per token
  const float* topk_weights;  // [M, k]
  bf16* out;                  // [M, H]
};
class Moe {
 public:
  virtual ~Moe() = default;
  virtual void run(const MoeIO& io, cudaStream_t stream) = 0;
};
std::unique_ptr<Moe> make_moe(const MoeDims& dims, const MoeWeights& w, const std::string& variant = "default");

// ---------------------------------------------------------------- validity
// The "Valid:" rules above as code: the first rule the dims break, as the field that breaks it
// and why ("must be a multiple of 8 for op dense (got 100)"), or an empty field where they all
// hold. make_<op> throws std::invalid_argument("<op>: field F: why") for such dims, and for dims
// past the limits of this implementation (sizes its indices and grids can address).
struct DimsError {
  std::string field, why;
};
DimsError dims_error(const PoolerDims&);
DimsError dims_error(const DenseDims&);
DimsError dims_error(const RouterDims&);
DimsError dims_error(const MoeDims&);

// ---------------------------------------------------------------- variants
// Names accepted by make_<op>, "default" first. op is one of
// "pooler", "dense", "router", "moe_w4a16".
std::vector<std::string> variants(const std::string& op);

}  // namespace submission
