// The scorer's side of every op, built on cuBLAS/cuBLASLt:
//   references: high-precision results the submission is checked against
//     (fp32 outputs, never rounded to bf16 except where the op itself rounds);
//   baselines: the op as a serving engine runs it today, with the submission's
//     own interface, so that the scorer times both the same way.
// Neither is uploaded. Semantics of each op: submission/submission.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "submission/submission.h"

namespace reference {

using submission::bf16;

// ---------------------------------------------------------------- references
// Each is prepared once per weight set (untimed; it may allocate, repack or
// dequantize) and may synchronise its stream in run(): it is never timed.

class PoolerReference {
 public:
  virtual ~PoolerReference() = default;
  // out[B, H] fp32 = tanh(pooled . W^T + bias), GEMM in fp32 accumulation
  virtual void run(const bf16* hidden, const int32_t* cu_seqlens, float* out, cudaStream_t stream) = 0;
};
std::unique_ptr<PoolerReference> make_pooler_reference(const submission::PoolerDims&, const submission::PoolerWeights&);

class DenseReference {
 public:
  virtual ~DenseReference() = default;
  virtual void run(const bf16* X, float* out, cudaStream_t stream) = 0;  // out[M, N] fp32
};
std::unique_ptr<DenseReference> make_dense_reference(const submission::DenseDims&, const submission::DenseWeights&);

class RouterReference {
 public:
  virtual ~RouterReference() = default;
  // logits[T, E] fp32; the scorer derives the reference top-k and weights from
  // these on the host in double precision.
  virtual void run(const bf16* X, float* logits, cudaStream_t stream) = 0;
};
std::unique_ptr<RouterReference> make_router_reference(const submission::RouterDims&, const submission::RouterWeights&);

class MoeReference {
 public:
  virtual ~MoeReference() = default;
  // out[M, H] fp32; weights dequantized to fp32 in prepare; h rounded to bf16
  // as the op says.
  virtual void run(const bf16* X, const int32_t* topk_ids, const float* topk_weights, float* out,
                   cudaStream_t stream) = 0;
};
std::unique_ptr<MoeReference> make_moe_reference(const submission::MoeDims&, const submission::MoeWeights&);

// ---------------------------------------------------------------- baselines
// What the speedups are measured against. Their run() follows the
// submission's contract (no allocation, no sync, scorer's stream only),
// except the MoE's named alternative cublas_grouped_sync. Each op's baselines
// by name, and which one `--baseline OP=NAME` selects: reference/baselines.h.
//   pooler: gather kernel + cuBLAS GEMM + bias/tanh kernel
//   dense:  cuBLASLt GEMM, default heuristic
//   router: cuBLAS GEMM with fp32 output + softmax/top-k kernel
//   moe:    bf16 weights dequantized once in prepare; per call an alignment
//           kernel, a gather, one batched cuBLAS GEMM per stage over blocks of
//           routes (cublasGemmBatchedEx, device-built pointer arrays),
//           SiLU-and-mul and weighted-combine kernels (moe_batched.cu)
std::unique_ptr<submission::Pooler> make_pooler_baseline(const submission::PoolerDims&,
                                                         const submission::PoolerWeights&);
std::unique_ptr<submission::Dense> make_dense_baseline(const submission::DenseDims&, const submission::DenseWeights&);
std::unique_ptr<submission::Router> make_router_baseline(const submission::RouterDims&,
                                                         const submission::RouterWeights&);
// `name` as reference/baselines.h lists them ("default": the first).
std::unique_ptr<submission::Moe> make_moe_baseline(const submission::MoeDims&, const submission::MoeWeights&,
                                                   const std::string& name = "default");
std::unique_ptr<submission::Moe> make_moe_batched_baseline(const submission::MoeDims&, const submission::MoeWeights&);
// The former default: the per-expert counts read back to the host inside
// run() (one stream sync: cuBLAS's grouped GEMM takes group sizes from host
// memory), as an eager serving stack does; so the scorer times it without the
// held stream and never captures it.
std::unique_ptr<submission::Moe> make_moe_grouped_sync_baseline(const submission::MoeDims&,
                                                                const submission::MoeWeights&);

// The batched MoE baseline's blocks: B rows each, the smallest power of two
// holding M (all of an expert's routes in one block) up to 64, beyond which a
// block's GEMM work grows faster than the count of blocks falls.
constexpr int moe_batched_block_rows(int M) {
  int b = 1;
  while (b < M && b < 64) b *= 2;
  return b;
}
// The most blocks a routing can take, known on the host: with t experts
// touched by R = M*k routes, the sum over experts of ceil(n_e/B) is at most
// t + floor((R - t)/B), which grows with t <= min(E_local, R); and no expert
// takes more than ceil(M/B) blocks (a token routes to an expert once).
constexpr int moe_batched_max_blocks(const submission::MoeDims& d) {
  const long R = long(d.M) * d.k, B = moe_batched_block_rows(d.M);
  const long t = R < d.E_local ? R : d.E_local;
  const long by_routes = t + (R - t) / B, by_experts = long(d.E_local) * ((d.M + B - 1) / B);
  return int(by_routes < by_experts ? by_routes : by_experts);
}

// Beyond each op's "Valid:" rules, the baselines keep a row of experts in one
// block's shared memory, within the 48 KiB every launch gets: the router's
// top-k a logit and a taken flag per expert and a logit per pick, the MoE
// alignment two counters per local expert. The scorer rejects larger shapes
// as bad input (scorer/shapes.cpp) rather than failing them as incorrect.
constexpr size_t kBaselineSmemBytes = 48 * 1024;
constexpr size_t router_topk_smem_bytes(int E, int k) {
  return size_t(E) * (sizeof(float) + 1) + size_t(k) * sizeof(float);
}
constexpr size_t moe_align_smem_bytes(int E_local) { return 2 * size_t(E_local) * sizeof(int32_t); }

}  // namespace reference
