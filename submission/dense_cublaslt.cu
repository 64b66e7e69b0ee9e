// dense as the baseline computes it: cublasLtMatmul, bf16 in and out, fp32
// compute, the algorithm cuBLASLt's heuristic ranks first.
//
// Why it exists: a regime's default keeps the baseline's own path until one of
// our kernels has been measured to beat it there; at M = 32 that is every dense
// shape whose direct-kernel blocks do not fit one wave (gate_up; dense.cu).
//
// Everything that allocates or queries (handle, descriptors, heuristic,
// workspace) happens at construction; run() is one cublasLtMatmul on the given
// stream with a caller-owned workspace, so it is graph-capturable.
#include "submission/dense_cublaslt.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "submission/cuda_check.h"

namespace submission {
namespace {

#define DENSE_LT(call)                                                                                         \
  do {                                                                                                         \
    const cublasStatus_t s_ = (call);                                                                          \
    if (s_ != CUBLAS_STATUS_SUCCESS)                                                                           \
      throw std::runtime_error(std::string(#call) + ": " + cublasLtGetStatusName(s_) + " (" + __FILE__ + ":" + \
                               std::to_string(__LINE__) + ")");                                                \
  } while (0)

// 32 MiB: the workspace cuBLAS recommends on Hopper, and what the baseline gives it.
constexpr size_t kWorkspaceBytes = size_t(32) << 20;

class DenseCublasLt final : public Dense {
 public:
  DenseCublasLt(const DenseDims& d, const DenseWeights& w) : W_(w.W) {
    // A throwing constructor skips the destructor: release what was made.
    try {
      SUBMISSION_CUDA(cudaMalloc(&workspace_, kWorkspaceBytes));
      DENSE_LT(cublasLtCreate(&lt_));
      DENSE_LT(cublasLtMatmulDescCreate(&desc_, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      // Column-major view of the row-major op: out^T[N, M] = W^T . X^T, W read
      // transposed (ld K), X as is (ld K), out with ld N.
      const cublasOperation_t op_t = CUBLAS_OP_T, op_n = CUBLAS_OP_N;
      DENSE_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSA, &op_t, sizeof(op_t)));
      DENSE_LT(cublasLtMatmulDescSetAttribute(desc_, CUBLASLT_MATMUL_DESC_TRANSB, &op_n, sizeof(op_n)));
      DENSE_LT(cublasLtMatrixLayoutCreate(&a_, CUDA_R_16BF, d.K, d.N, d.K));
      DENSE_LT(cublasLtMatrixLayoutCreate(&b_, CUDA_R_16BF, d.K, d.M, d.K));
      DENSE_LT(cublasLtMatrixLayoutCreate(&c_, CUDA_R_16BF, d.N, d.M, d.N));
      // The contract promises 16-byte aligned pointers, cuBLASLt assumes 256
      // unless told: one algorithm for 256-aligned buffers (what cudaMalloc
      // gives), one for any other.
      algo_aligned_ = pick_algo(256);
      algo_any_ = pick_algo(16);
    } catch (...) {
      release();
      throw;
    }
  }
  ~DenseCublasLt() override { release(); }
  DenseCublasLt(const DenseCublasLt&) = delete;
  DenseCublasLt& operator=(const DenseCublasLt&) = delete;

  void run(const DenseIO& io, cudaStream_t stream) override {
    const float one = 1.0f, zero = 0.0f;
    const auto addr = [](const void* p) { return reinterpret_cast<uintptr_t>(p); };
    const bool aligned = ((addr(io.X) | addr(io.out) | addr(W_)) & 255) == 0;
    DENSE_LT(cublasLtMatmul(lt_, desc_, &one, W_, a_, io.X, b_, &zero, io.out, c_, io.out, c_,
                            aligned ? &algo_aligned_ : &algo_any_, workspace_, kWorkspaceBytes, stream));
  }

 private:
  cublasLtMatmulAlgo_t pick_algo(uint32_t alignment) {
    cublasLtMatmulPreference_t pref = nullptr;
    DENSE_LT(cublasLtMatmulPreferenceCreate(&pref));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
    const uint64_t ws = kWorkspaceBytes;
    s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(pref, attr, &alignment, sizeof(alignment));
    if (s == CUBLAS_STATUS_SUCCESS)
      s = cublasLtMatmulAlgoGetHeuristic(lt_, desc_, a_, b_, c_, c_, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    DENSE_LT(s);
    if (found == 0) throw std::runtime_error("dense cublaslt: cuBLASLt has no algorithm for this shape");
    return result.algo;
  }

  // Destroy calls cannot report failure usefully here, so their status is dropped.
  void release() {
    if (c_) cublasLtMatrixLayoutDestroy(c_);
    if (b_) cublasLtMatrixLayoutDestroy(b_);
    if (a_) cublasLtMatrixLayoutDestroy(a_);
    if (desc_) cublasLtMatmulDescDestroy(desc_);
    if (lt_) cublasLtDestroy(lt_);
    cudaFree(workspace_);
    c_ = b_ = a_ = nullptr;
    desc_ = nullptr;
    lt_ = nullptr;
    workspace_ = nullptr;
  }

  const bf16* W_;
  void* workspace_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, c_ = nullptr;
  cublasLtMatmulAlgo_t algo_aligned_{}, algo_any_{};
};

}  // namespace

std::unique_ptr<Dense> make_dense_cublaslt(const DenseDims& dims, const DenseWeights& w) {
  if (dims.M < 1 || dims.N < 1 || dims.K < 8 || dims.K % 8 != 0)
    throw std::invalid_argument("dense: need M >= 1, N >= 1, K >= 8, K % 8 == 0 (got M=" + std::to_string(dims.M) +
                                " N=" + std::to_string(dims.N) + " K=" + std::to_string(dims.K) + ")");
  return std::make_unique<DenseCublasLt>(dims, w);
}

}  // namespace submission
