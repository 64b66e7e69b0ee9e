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
  virtual void run(const bf16* hidden, const int32_t* cu_seqlens, float* out,
                   cudaStream_t stream) = 0;
};
std::unique_ptr<PoolerReference> make_pooler_reference(const submission::PoolerDims&,
                                                       const submission::PoolerWeights&);

class DenseReference {
 public:
  virtual ~DenseReference() = default;
  virtual void run(const bf16* X, float* out, cudaStream_t stream) = 0;  // out[M, N] fp32
};
std::unique_ptr<DenseReference> make_dense_reference(const submission::DenseDims&,
                                                     const submission::DenseWeights&);

class RouterReference {
 public:
  virtual ~RouterReference() = default;
  // logits[T, E] fp32; the scorer derives the reference top-k and weights from
  // these on the host in double precision.
  virtual void run(const bf16* X, float* logits, cudaStream_t stream) = 0;
};
std::unique_ptr<RouterReference> make_router_reference(const submission::RouterDims&,
                                                       const submission::RouterWeights&);

class MoeReference {
 public:
  virtual ~MoeReference() = default;
  // out[M, H] fp32; weights dequantized to fp32 in prepare; h rounded to bf16
  // as the op says.
  virtual void run(const bf16* X, const int32_t* topk_ids, const float* topk_weights, float* out,
                   cudaStream_t stream) = 0;
};
std::unique_ptr<MoeReference> make_moe_reference(const submission::MoeDims&,
                                                 const submission::MoeWeights&);

// ---------------------------------------------------------------- baselines
// What the speedups are measured against. Their run() follows the
// submission's contract (no allocation, no sync, scorer's stream only).
//   pooler: gather kernel + cuBLAS GEMM + bias/tanh kernel
//   dense:  cuBLASLt GEMM, default heuristic
//   router: cuBLAS GEMM with fp32 output + softmax/top-k kernel
//   moe:    bf16 weights dequantized once in prepare; align kernel, gather,
//           one grouped cuBLAS GEMM launch per stage (cublasGemmGroupedBatchedEx),
//           SiLU-and-mul and weighted-combine kernels
std::unique_ptr<submission::Pooler> make_pooler_baseline(const submission::PoolerDims&,
                                                         const submission::PoolerWeights&);
std::unique_ptr<submission::Dense> make_dense_baseline(const submission::DenseDims&,
                                                       const submission::DenseWeights&);
std::unique_ptr<submission::Router> make_router_baseline(const submission::RouterDims&,
                                                         const submission::RouterWeights&);
std::unique_ptr<submission::Moe> make_moe_baseline(const submission::MoeDims&,
                                                   const submission::MoeWeights&);

// cuBLAS's grouped GEMM takes each group's size from host memory, so the MoE
// baseline reads the per-expert token counts back inside run() (one stream
// synchronisation, as an eager serving stack does). The scorer therefore times
// it without holding the stream behind a blocking kernel, and cannot capture it
// in a CUDA graph. Every other baseline follows the submission's contract.
constexpr bool kMoeBaselineSynchronizes = true;

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
