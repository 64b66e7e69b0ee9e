// The small-M engines of the dev variants, each E(M, N, K, W, ...) with run(rows, epi, stream) as
// submission/small_m_rows.cuh's op classes expect:
//   SplitKEngine:         the split-K ring kernels (small_m_splitk.cuh), splits by the cost model;
//   ClusterEngine:        split-K inside thread-block clusters (cluster_gemm.cuh);
//   DirectUnpackedEngine: the direct kernel reading W as it is, one tile per block.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <stdexcept>

#include "dev/cluster_gemm.cuh"
#include "dev/small_m_splitk.cuh"
#include "dev/small_m_splitk_model.h"
#include "submission/cuda_check.h"
#include "submission/device_memory.h"
#include "submission/small_m_engine.cuh"

namespace submission::small_m {

enum class SplitKKind {
  wide,       // 128-row tiles, per-thread cp.async ring
  wide_bulk,  // the same, a stage's weights by one cp.async.bulk
  narrow,     // 16-row tiles, k split across 8 warps
};

template <class Rows, class Epi>  // as Engine's
using MmaKernel = void (*)(Params<Rows, Epi>);

template <class C,    // a TileConfig
          bool Bulk,  // weight stages by cp.async.bulk
          class Rows, class Epi>
MmaKernel<Rows, Epi> mma_kernel(int ng) {
  switch (ng) {
    case 1:
      return mma_gemm_kernel<C, 1, Bulk, Rows, Epi>;
    case 2:
      return mma_gemm_kernel<C, 2, Bulk, Rows, Epi>;
    case 3:
      return mma_gemm_kernel<C, 3, Bulk, Rows, Epi>;
    default:
      return mma_gemm_kernel<C, 4, Bulk, Rows, Epi>;
  }
}

template <class Rows, class Epi>  // as Engine's
class SplitKEngine {
 public:
  SplitKEngine(int M, int N, int K, const bf16* W, SplitKKind kind) : M_(M), N_(N), K_(K), W_(W), kind_(kind) {
    validate_small_m(M, N, K);
    const int sms = device_sm_count();
    ng_ = std::min(4, (M + 7) / 8);
    m_chunks_ = (M + 8 * ng_ - 1) / (8 * ng_);
    if (m_chunks_ > 65535) throw std::invalid_argument("small-M GEMM: M too large");
    int dev = 0, smem_optin = 0;
    SUBMISSION_CUDA(cudaGetDevice(&dev));
    SUBMISSION_CUDA(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    bool fits = false;
    if (kind == SplitKKind::wide) fits = consider<WideConfig, false>(sms, smem_optin, kCpAsyncMachine);
    if (kind == SplitKKind::wide_bulk) fits = consider<WideConfig, true>(sms, smem_optin, kBulkMachine);
    if (kind == SplitKKind::narrow) fits = consider<NarrowConfig, false>(sms, smem_optin, kCpAsyncMachine);
    if (!fits) throw std::invalid_argument("small-M GEMM: the forced tensor-core kernel does not fit this GPU");
    if (kind == SplitKKind::narrow)
      pack<NarrowConfig>();
    else
      pack<WideConfig>();
  }
  SplitKEngine(const SplitKEngine&) = delete;
  SplitKEngine& operator=(const SplitKEngine&) = delete;

  void run(const Rows& rows, const Epi& epi, cudaStream_t stream) const {
    const Params<Rows, Epi> p{
        packed_.as<uint4>(),     rows, epi, M_, N_, K_, k_stages_, splits_, n_tiles_, partials_.as<float4>(),
        counters_.as<unsigned>()};
    const dim3 grid(n_tiles_ * splits_, m_chunks_);
    const bool wide = kind_ != SplitKKind::narrow;
    const MmaKernel<Rows, Epi> kernel = kind_ == SplitKKind::wide_bulk ? mma_kernel<WideConfig, true, Rows, Epi>(ng_)
                                        : wide                         ? mma_kernel<WideConfig, false, Rows, Epi>(ng_)
                                               : mma_kernel<NarrowConfig, false, Rows, Epi>(ng_);
    const int threads = wide ? WideConfig::kThreads : NarrowConfig::kThreads;
    const size_t smem = wide ? smem_bytes<WideConfig>(ng_) : smem_bytes<NarrowConfig>(ng_);
    kernel<<<grid, threads, smem, stream>>>(p);
    SUBMISSION_CUDA(cudaGetLastError());
  }

 private:
  // The fewest predicted microseconds over the splits; false where the kernel does not fit.
  template <class C, bool Bulk>  // a TileConfig; weight stages by cp.async.bulk
  bool consider(int sms, int smem_optin, const Machine& mc) {
    const auto kernel = mma_kernel<C, Bulk, Rows, Epi>(ng_);
    const size_t smem = smem_bytes<C>(ng_);
    if (smem > size_t(smem_optin)) return false;
    SUBMISSION_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    // All global traffic bypasses L1 (cp.async.cg), so give the SM's memory to shared.
    SUBMISSION_CUDA(
        cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared));
    int per_sm = 0;
    SUBMISSION_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, C::kThreads, smem));
    if (per_sm < 1) return false;
    const ConfigCost cost{C::kRows, C::kStageK, C::kStages, per_sm};
    n_tiles_ = (N_ + C::kRows - 1) / C::kRows;
    k_stages_ = (K_ + C::kStageK - 1) / C::kStageK;
    // Splits beyond 32 only add fix-up traffic; grid.x must stay addressable.
    const int max_splits = std::min({k_stages_, 32, int(INT32_MAX / n_tiles_)});
    double best = 1e300;
    for (int s = 1; s <= max_splits; ++s) {
      const double us = estimate_us(cost, s, M_, N_, K_, ng_, sms, mc);
      if (us < best) best = us, splits_ = s;  // strict: ties keep fewer splits
    }
    return true;
  }

  template <class C>  // a TileConfig
  void pack() {
    const size_t chunks = size_t(n_tiles_) * k_stages_ * C::kWStageChunks;
    packed_ = DeviceMemory(chunks * sizeof(uint4));
    const int blocks = int(std::min<size_t>((chunks + 255) / 256, 65535));
    pack_weights_kernel<C><<<blocks, 256>>>(W_, N_, K_, k_stages_, packed_.as<uint4>(), chunks);
    SUBMISSION_CUDA(cudaGetLastError());
    if (splits_ > 1) {
      const size_t tiles = size_t(m_chunks_) * n_tiles_;
      const size_t frags = size_t(C::kWarpRows) * C::kTilesPerWarp * ng_ * 32;
      partials_ = DeviceMemory(tiles * splits_ * frags * sizeof(float4));
      counters_ = DeviceMemory(tiles * sizeof(unsigned));
      SUBMISSION_CUDA(cudaMemset(counters_.as<unsigned>(), 0, tiles * sizeof(unsigned)));
    }
    // The scorer's stream may not wait on the legacy stream: finish here.
    SUBMISSION_CUDA(cudaDeviceSynchronize());
  }

  int M_, N_, K_;
  const bf16* W_;
  SplitKKind kind_;
  int ng_ = 1, m_chunks_ = 0, n_tiles_ = 0, k_stages_ = 0, splits_ = 1;
  DeviceMemory packed_;    // uint4 chunks of the packed weights
  DeviceMemory partials_;  // float4, splits > 1
  DeviceMemory counters_;  // unsigned, splits > 1
};

// Where no slice of the token rows fits in shared memory (from K ~ 30000 at M = 32), the direct
// kernel on a tile-major copy, one tile per block, runs instead.
template <class Rows, class Epi>  // as Engine's
class ClusterEngine {
 public:
  ClusterEngine(int M, int N, int K, const bf16* W) : M_(M), N_(N), K_(K) {
    validate_small_m(M, N, K);
    ng_ = std::min(4, (M + 7) / 8);
    if ((M + 8 * ng_ - 1) / (8 * ng_) > 65535) throw std::invalid_argument("small-M GEMM: M too large");
    int dev = 0, smem_optin = 0;
    SUBMISSION_CUDA(cudaGetDevice(&dev));
    SUBMISSION_CUDA(cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    plan_ = plan_cluster<Rows, Epi>(M, N, K, ng_, device_sm_count(), smem_optin);
    if (plan_.clusters > 0)
      packed_ =
          direct::pack_tiles(W, N, K, direct::tile_strides(direct::TileOrder::tile_major, N, K, 1, 1, kDirectWarps));
    else
      fallback_ = std::make_unique<Engine<Rows, Epi>>(M, N, K, W, Path::direct,
                                                      DirectLayout{direct::TileOrder::tile_major, 1, 1});
  }

  void run(const Rows& rows, const Epi& epi, cudaStream_t stream) const {
    if (fallback_) return fallback_->run(rows, epi, stream);
    launch_cluster(plan_, packed_.as<uint4>(), rows, epi, M_, N_, K_, ng_, stream);
    SUBMISSION_CUDA(cudaGetLastError());
  }

 private:
  int M_, N_, K_, ng_ = 1;
  ClusterPlan plan_;
  DeviceMemory packed_;
  std::unique_ptr<Engine<Rows, Epi>> fallback_;
};

// The direct kernel's weights as W is, one tile per block (direct_mma): rows wa and wb (nullptr
// past the last row), K long. A warp's load touches 8 rows, 64 bytes of each.
struct RowMajorWeights {
  static constexpr int kTiles = 1;
  const bf16* wa;
  const bf16* wb;
  int K;
  __device__ __forceinline__ void load(int chunk, bool in, uint4 (&a)[1], uint4 (&b)[1]) const {
    const int k = chunk * direct::kChunkK + (threadIdx.x % 4) * 8;
    in = in && k < K;
    a[0] = direct::load_readonly(wa + k, in && wa != nullptr);
    b[0] = direct::load_readonly(wb + k, in && wb != nullptr);
  }
};
// direct_gemm_kernel's Source for W as it is: rows g and g + 8 of the block's tile, in order.
struct RowMajorSource {
  static constexpr bool kRotated = false;
  template <int Tiles>  // 16-row weight tiles per block: 1
  __device__ static RowMajorWeights weights(const bf16* W, const uint4*, const direct::TileStrides&, int N, int K) {
    static_assert(Tiles == 1, "direct: W as it is, one tile per block");
    const int tid = threadIdx.x, g = tid % 32 / 4, n0 = blockIdx.x * 16;
    const int ra = n0 + g, rb = n0 + g + 8;
    return {ra < N ? W + size_t(ra) * K : nullptr, rb < N ? W + size_t(rb) * K : nullptr, K};
  }
};

template <class Rows, class Epi>  // as Engine's
class DirectUnpackedEngine {
 public:
  DirectUnpackedEngine(int M, int N, int K, const bf16* W) : M_(M), N_(N), K_(K), W_(W) {
    validate_small_m(M, N, K);
    ng_ = direct_shape(M, N, K, device_sm_count(), 1).ng;
    m_chunks_ = (M + 8 * ng_ - 1) / (8 * ng_);
    if (m_chunks_ > 65535) throw std::invalid_argument("small-M GEMM: M too large");
  }

  void run(const Rows& rows, const Epi& epi, cudaStream_t stream) const {
    using Kernel = void (*)(const bf16*, const uint4*, direct::TileStrides, Rows, Epi, int, int, int);
    const Kernel kernel = ng_ == 1   ? direct_gemm_kernel<1, 1, RowMajorSource, false, Rows, Epi>
                          : ng_ == 2 ? direct_gemm_kernel<2, 1, RowMajorSource, false, Rows, Epi>
                          : ng_ == 3 ? direct_gemm_kernel<3, 1, RowMajorSource, false, Rows, Epi>
                                     : direct_gemm_kernel<4, 1, RowMajorSource, false, Rows, Epi>;
    kernel<<<dim3((N_ + 15) / 16, m_chunks_), kDirectWarps * 32, 0, stream>>>(W_, nullptr, direct::TileStrides{}, rows,
                                                                              epi, M_, N_, K_);
    SUBMISSION_CUDA(cudaGetLastError());
  }

 private:
  int M_, N_, K_;
  const bf16* W_;
  int ng_ = 1, m_chunks_ = 0;
};

}  // namespace submission::small_m
