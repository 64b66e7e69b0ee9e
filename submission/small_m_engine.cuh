// The small-M engine as an op uses it: the plan made in prepare (small_m_plan.h) and one launch
// per call of the direct kernel (small_m_direct.cuh) or, as the fallback, the CUDA-core kernel
// (small_m_simt.cuh). A template over the op's row lookup and epilogue (small_m_rows.cuh), so
// that the pooler's gather and bias+tanh are part of the one launch.
#pragma once

#include <cuda_runtime.h>

#include "submission/cuda_check.h"
#include "submission/small_m_direct.cuh"
#include "submission/small_m_plan.h"
#include "submission/small_m_simt.cuh"

namespace submission::small_m {

enum class Path { direct, simt };

template <class Rows,  // where token row m starts: row(m), or lookup(m) then row(m, end)
          class Epi>   // the output side: kHasBias, bias(n), store(m, n, v)
class Engine {
 public:
  Engine(int M, int N, int K, const bf16* W, Path path, const DirectLayout& layout = kRotatedLayout)
      : M_(M), N_(N), K_(K), W_(W), path_(path) {
    validate_small_m(M, N, K);
    if (path == Path::direct) plan_ = plan_direct(M, N, K, W, layout);
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  void run(const Rows& rows, const Epi& epi, cudaStream_t stream) const {
    if (path_ == Path::simt) {
      simt_gemm_kernel<Rows, Epi><<<(N_ + 7) / 8, 256, 0, stream>>>(W_, rows, epi, M_, N_, K_);
    } else {
      const dim3 grid((N_ + 16 * plan_.rt - 1) / (16 * plan_.rt), plan_.m_chunks);
      direct_kernel(plan_.ng, plan_.rt, K_)<<<grid, kDirectWarps * 32, 0, stream>>>(
          W_, plan_.packed.as<uint4>(), plan_.strides, rows, epi, M_, N_, K_);
    }
    SUBMISSION_CUDA(cudaGetLastError());
  }

 private:
  using DirectKernel = void (*)(const bf16*, const uint4*, direct::TileStrides, Rows, Epi, int, int, int);
  template <int Tiles,       // 16-row weight tiles per block
            bool kOneBatch>  // every warp's chunks fit one batch
  static DirectKernel direct_kernel_for(int ng) {
    return ng == 1   ? direct_gemm_kernel<1, Tiles, PackedSource, kOneBatch, Rows, Epi>
           : ng == 2 ? direct_gemm_kernel<2, Tiles, PackedSource, kOneBatch, Rows, Epi>
           : ng == 3 ? direct_gemm_kernel<3, Tiles, PackedSource, kOneBatch, Rows, Epi>
                     : direct_gemm_kernel<4, Tiles, PackedSource, kOneBatch, Rows, Epi>;
  }
  template <int Tiles>  // 16-row weight tiles per block
  static DirectKernel direct_kernel_for(int ng, int K) {
    return direct_one_batch(ng, Tiles, K) ? direct_kernel_for<Tiles, true>(ng) : direct_kernel_for<Tiles, false>(ng);
  }
  static DirectKernel direct_kernel(int ng, int rt, int K) {
    return rt == 1 ? direct_kernel_for<1>(ng, K) : rt == 2 ? direct_kernel_for<2>(ng, K) : direct_kernel_for<3>(ng, K);
  }

  int M_, N_, K_;
  const bf16* W_;
  Path path_;
  DirectPlan plan_;  // Path::direct
};

}  // namespace submission::small_m
