// moe_w4a16: the experts of this rank applied to the routed tokens.
//   reference: weights dequantized to fp32 once; run reads the routing back to
//     the host and, expert by expert, gathers its tokens in fp32, runs pedantic
//     fp32 GEMMs (h rounded to bf16 as the op says) and adds the weighted result
//     into the fp32 output;
//   baseline: weights dequantized to bf16 once; run aligns the routes by local
//     expert, reads the counts back (one stream sync), gathers, and runs each
//     GEMM stage as one grouped cuBLAS launch over the experts with routes, with
//     SiLU-and-mul between and a weighted combine after, as an eager serving
//     stack without a fused MoE kernel does.
#include <cuda_bf16.h>

#include <algorithm>
#include <vector>

#include "reference/cublas_util.h"
#include "reference/reference.h"

namespace reference {
namespace {

using detail::Cublas;
using detail::DeviceArray;
using detail::device_array;
using submission::kMoeGroupSize;

constexpr int kThreads = 256;

__device__ float load(float x) { return x; }
__device__ float load(bf16 x) { return __bfloat162float(x); }
__device__ void store(float* p, float v) { *p = v; }
__device__ void store(bf16* p, float v) { *p = __float2bfloat16_rn(v); }

// packed [rows, cols/2] int4 codes, scales [rows, cols/128] -> out [rows, cols],
// w = (q - 8) * s. One thread per byte: its two codes are adjacent elements of
// one row, low nibble first, and (128 being even) share one scale.
template <class T>
__global__ void dequant_int4(const uint8_t* __restrict__ packed, const bf16* __restrict__ scales, size_t rows,
                             int cols, T* __restrict__ out) {
  const size_t bytes = rows * (cols / 2);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < bytes; i += size_t(gridDim.x) * blockDim.x) {
    const size_t row = i / (cols / 2);
    const int col = int(2 * i - row * cols);
    const float s = __bfloat162float(scales[row * (cols / kMoeGroupSize) + col / kMoeGroupSize]);
    const uint8_t b = packed[i];
    store(out + 2 * i, float(int(b & 0xf) - 8) * s);
    store(out + 2 * i + 1, float(int(b >> 4) - 8) * s);
  }
}

template <class T>
DeviceArray<T> dequantize(const uint8_t* packed, const bf16* scales, size_t rows, int cols) {
  DeviceArray<T> out = device_array<T>(rows * cols);
  const size_t blocks = std::min<size_t>((rows * cols / 2 + kThreads - 1) / kThreads, size_t(1) << 20);
  dequant_int4<<<unsigned(blocks), kThreads>>>(packed, scales, rows, cols, out.get());
  REF_CHECK_LAUNCH();
  return out;
}

// dst[i, :] = fp32(X[tokens[i], :]), one block per row.
__global__ void gather_rows_f32(const bf16* __restrict__ X, const int32_t* __restrict__ tokens, int H,
                                float* __restrict__ dst) {
  const bf16* src = X + size_t(tokens[blockIdx.x]) * H;
  for (int c = threadIdx.x; c < H; c += blockDim.x) dst[size_t(blockIdx.x) * H + c] = __bfloat162float(src[c]);
}

// dst[i, :] = X[tokens[i], :], one block per row, 16 bytes at a time (H % 128 == 0).
__global__ void gather_rows_bf16(const bf16* __restrict__ X, const int32_t* __restrict__ tokens, int H,
                                 bf16* __restrict__ dst) {
  const uint4* src = reinterpret_cast<const uint4*>(X + size_t(tokens[blockIdx.x]) * H);
  uint4* d = reinterpret_cast<uint4*>(dst + size_t(blockIdx.x) * H);
  for (int c = threadIdx.x; c < H / 8; c += blockDim.x) d[c] = src[c];
}

// h[i, :] = bf16(silu(gate) * up), with gate_up[i] = (gate[0..I), up[0..I)).
// The fp32 reference keeps h in fp32 storage, but with the bf16 value.
template <class T>
__global__ void silu_mul(const T* __restrict__ gate_up, int I, T* __restrict__ h) {
  const T* row = gate_up + size_t(blockIdx.x) * 2 * I;
  for (int i = threadIdx.x; i < I; i += blockDim.x) {
    const float g = load(row[i]), u = load(row[I + i]);
    store(h + size_t(blockIdx.x) * I + i, __bfloat162float(__float2bfloat16_rn(g / (1.0f + expf(-g)) * u)));
  }
}

// out[tokens[i], :] += weights[i] * y[i, :]. A token appears at most once per
// expert (ids are distinct per token), so rows of one launch never collide.
__global__ void scatter_add(const float* __restrict__ y, const int32_t* __restrict__ tokens,
                            const float* __restrict__ weights, int H, float* __restrict__ out) {
  float* dst = out + size_t(tokens[blockIdx.x]) * H;
  const float w = weights[blockIdx.x];
  for (int c = threadIdx.x; c < H; c += blockDim.x) dst[c] += w * y[size_t(blockIdx.x) * H + c];
}

void check_dims(const submission::MoeDims& d) {
  detail::require(d.M >= 1 && d.H >= kMoeGroupSize && d.H % kMoeGroupSize == 0 && d.I >= kMoeGroupSize &&
                      d.I % kMoeGroupSize == 0 && d.k >= 1 && d.k <= d.E_global && d.E_local >= 1 &&
                      d.E_global % d.E_local == 0 && d.ep_rank >= 0 && d.ep_rank < d.E_global / d.E_local,
                  "moe_w4a16: needs M >= 1, H and I positive multiples of 128, 1 <= k <= E_global, "
                  "E_global % E_local == 0, 0 <= ep_rank < E_global / E_local");
}

class MoeRef final : public MoeReference {
 public:
  MoeRef(const submission::MoeDims& d, const submission::MoeWeights& w)
      : d_(d),
        w13_(dequantize<float>(w.W13, w.S13, size_t(d.E_local) * 2 * d.I, d.H)),
        w2_(dequantize<float>(w.W2, w.S2, size_t(d.E_local) * d.H, d.I)),
        x_(device_array<float>(size_t(d.M) * d.H)),
        gate_up_(device_array<float>(size_t(d.M) * 2 * d.I)),
        h_(device_array<float>(size_t(d.M) * d.I)),
        y_(device_array<float>(size_t(d.M) * d.H)),
        route_token_(device_array<int32_t>(size_t(d.M) * d.k)),
        route_weight_(device_array<float>(size_t(d.M) * d.k)),
        ids_(size_t(d.M) * d.k), weights_(size_t(d.M) * d.k), tokens_(ids_.size()), token_weights_(ids_.size()),
        start_(d.E_local + 1) {
    REF_CUDA(cudaStreamSynchronize(nullptr));  // the dequantization, before any other stream reads it
  }

  void run(const bf16* X, const int32_t* topk_ids, const float* topk_weights, float* out,
           cudaStream_t stream) override {
    const int M = d_.M, H = d_.H, I = d_.I, E = d_.E_local, first = d_.ep_rank * d_.E_local;
    const size_t routes = ids_.size();
    REF_CUDA(cudaMemcpyAsync(ids_.data(), topk_ids, routes * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
    REF_CUDA(cudaMemcpyAsync(weights_.data(), topk_weights, routes * sizeof(float), cudaMemcpyDeviceToHost, stream));
    REF_CUDA(cudaStreamSynchronize(stream));

    // The local routes bucketed by expert, each bucket in route order.
    std::fill(start_.begin(), start_.end(), 0);
    for (size_t r = 0; r < routes; ++r)
      if (const int e = ids_[r] - first; e >= 0 && e < E) ++start_[e + 1];
    for (int e = 0; e < E; ++e) start_[e + 1] += start_[e];
    std::vector<int> next(start_.begin(), start_.end() - 1);
    for (size_t r = 0; r < routes; ++r) {
      if (const int e = ids_[r] - first; e >= 0 && e < E) {
        tokens_[next[e]] = int32_t(r / d_.k);
        token_weights_[next[e]++] = weights_[r];
      }
    }
    const size_t local = size_t(start_[E]);
    REF_CUDA(cudaMemcpyAsync(route_token_.get(), tokens_.data(), local * sizeof(int32_t),
                             cudaMemcpyHostToDevice, stream));
    REF_CUDA(cudaMemcpyAsync(route_weight_.get(), token_weights_.data(), local * sizeof(float),
                             cudaMemcpyHostToDevice, stream));
    REF_CUDA(cudaMemsetAsync(out, 0, size_t(M) * H * sizeof(float), stream));

    const cublasHandle_t handle = cublas_.bind(stream);
    for (int e = 0; e < E; ++e) {
      const int n = start_[e + 1] - start_[e];
      if (n == 0) continue;
      const int32_t* tokens = route_token_.get() + start_[e];
      gather_rows_f32<<<n, kThreads, 0, stream>>>(X, tokens, H, x_.get());
      REF_CHECK_LAUNCH();
      detail::gemm_xwt(handle, n, 2 * I, H, x_.get(), w13_.get() + size_t(e) * 2 * I * H, CUDA_R_32F,
                       gate_up_.get(), CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC);
      silu_mul<<<n, kThreads, 0, stream>>>(gate_up_.get(), I, h_.get());
      REF_CHECK_LAUNCH();
      detail::gemm_xwt(handle, n, H, I, h_.get(), w2_.get() + size_t(e) * H * I, CUDA_R_32F, y_.get(),
                       CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC);
      scatter_add<<<n, kThreads, 0, stream>>>(y_.get(), tokens, route_weight_.get() + start_[e], H, out);
      REF_CHECK_LAUNCH();
    }
  }

 private:
  submission::MoeDims d_;
  DeviceArray<float> w13_, w2_;                    // [E_local, 2I, H], [E_local, H, I]
  DeviceArray<float> x_, gate_up_, h_, y_;         // one expert's rows: at most M
  DeviceArray<int32_t> route_token_;               // local routes by expert: token
  DeviceArray<float> route_weight_;                //   and its routing weight
  std::vector<int32_t> ids_;                       // host copies of the routing
  std::vector<float> weights_;
  std::vector<int32_t> tokens_;                    // host side of route_token_
  std::vector<float> token_weights_;               //   and route_weight_
  std::vector<int> start_;                         // [E_local + 1] bucket starts
  Cublas cublas_;
};

constexpr int kAlignThreads = 1024;

// The operand pointers of both grouped GEMMs, one array per operand, each
// indexed by group (the experts with routes, ascending).
enum Operand { kA1, kB1, kC1, kA2, kB2, kC2, kOperands };

// One block. Counts the routes of each local expert, then gives every local
// route a slot: experts ascending, and within an expert its routes in (token, j)
// order, so the permutation is the same on every run. Also writes the grouped
// GEMMs' pointer arrays, so that the host needs only the counts.
__global__ void __launch_bounds__(kAlignThreads)
moe_align(const int32_t* __restrict__ topk_ids, int routes, int k, int first, int E, int H, int I,
          const bf16* w13, const bf16* w2, bf16* xg, bf16* gate_up, bf16* h, bf16* y,
          int32_t* __restrict__ counts, int32_t* __restrict__ slot_of_route, int32_t* __restrict__ slot_token,
          void** __restrict__ ptrs) {
  extern __shared__ int s_align[];
  int* s_count = s_align;      // [E]
  int* s_start = s_align + E;  // [E]
  for (int e = threadIdx.x; e < E; e += blockDim.x) s_count[e] = 0;
  __syncthreads();
  for (int r = threadIdx.x; r < routes; r += blockDim.x) {
    const int e = topk_ids[r] - first;
    if (e >= 0 && e < E)
      atomicAdd(&s_count[e], 1);
    else
      slot_of_route[r] = -1;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int start = 0, g = 0;
    for (int e = 0; e < E; ++e) {
      const int n = s_count[e];
      s_start[e] = start;
      counts[e] = n;
      if (n > 0) {
        ptrs[kA1 * E + g] = const_cast<bf16*>(w13) + size_t(e) * 2 * I * H;
        ptrs[kB1 * E + g] = xg + size_t(start) * H;
        ptrs[kC1 * E + g] = gate_up + size_t(start) * 2 * I;
        ptrs[kA2 * E + g] = const_cast<bf16*>(w2) + size_t(e) * H * I;
        ptrs[kB2 * E + g] = h + size_t(start) * I;
        ptrs[kC2 * E + g] = y + size_t(start) * H;
        ++g;
      }
      start += n;
    }
  }
  __syncthreads();
  // A warp per expert walks the routes 32 at a time; a ballot ranks the matches
  // of each step, so slots follow route order without atomics. It stops once
  // the expert's routes are all placed.
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int e = warp; e < E; e += warps) {
    int next = s_start[e];
    const int end = next + s_count[e];
    for (int r0 = 0; r0 < routes && next < end; r0 += 32) {
      const int r = r0 + lane;
      const bool match = r < routes && topk_ids[r] - first == e;
      const unsigned mask = __ballot_sync(0xffffffffu, match);
      if (match) {
        const int slot = next + __popc(mask & ((1u << lane) - 1));
        slot_of_route[r] = slot;
        slot_token[slot] = r / k;
      }
      next += __popc(mask);
    }
  }
}

// out[m, :] = bf16(sum over local routes j of w[m, j] * y[slot(m, j), :]),
// summed in fp32 in j order; zeros for a token with no local route.
__global__ void combine(const bf16* __restrict__ y, const int32_t* __restrict__ slot_of_route,
                        const float* __restrict__ topk_weights, int k, int H, bf16* __restrict__ out) {
  const int m = blockIdx.x;
  for (int c = threadIdx.x; c < H; c += blockDim.x) {
    float acc = 0.0f;
    for (int j = 0; j < k; ++j) {
      const int slot = slot_of_route[m * k + j];
      if (slot >= 0) acc += topk_weights[m * k + j] * __bfloat162float(y[size_t(slot) * H + c]);
    }
    out[size_t(m) * H + c] = __float2bfloat16_rn(acc);
  }
}

class MoeBaseline final : public submission::Moe {
 public:
  MoeBaseline(const submission::MoeDims& d, const submission::MoeWeights& w)
      : d_(d), routes_(d.M * d.k),
        w13_(dequantize<bf16>(w.W13, w.S13, size_t(d.E_local) * 2 * d.I, d.H)),
        w2_(dequantize<bf16>(w.W2, w.S2, size_t(d.E_local) * d.H, d.I)),
        counts_(device_array<int32_t>(d.E_local)),
        counts_host_(detail::pinned_array<int32_t>(d.E_local)),
        slot_of_route_(device_array<int32_t>(routes_)),
        slot_token_(device_array<int32_t>(routes_)),
        ptrs_(device_array<void*>(size_t(kOperands) * d.E_local)),
        xg_(device_array<bf16>(size_t(routes_) * d.H)),
        gate_up_(device_array<bf16>(size_t(routes_) * 2 * d.I)),
        h_(device_array<bf16>(size_t(routes_) * d.I)),
        y_(device_array<bf16>(size_t(routes_) * d.H)),
        op_t_(d.E_local, CUBLAS_OP_T), op_n_(d.E_local, CUBLAS_OP_N),
        two_i_(d.E_local, 2 * d.I), h_dim_(d.E_local, d.H), i_dim_(d.E_local, d.I), group_rows_(d.E_local),
        alpha_(d.E_local, 1.0f), beta_(d.E_local, 0.0f), group_size_(d.E_local, 1) {
    REF_CUDA(cudaStreamSynchronize(nullptr));  // the dequantization, before any other stream reads it
  }

  void run(const submission::MoeIO& io, cudaStream_t stream) override {
    const int H = d_.H, I = d_.I, E = d_.E_local;
    const cublasHandle_t handle = cublas_.bind(stream);
    moe_align<<<1, kAlignThreads, moe_align_smem_bytes(E), stream>>>(
        io.topk_ids, routes_, d_.k, d_.ep_rank * E, E, H, I, w13_.get(), w2_.get(), xg_.get(), gate_up_.get(),
        h_.get(), y_.get(), counts_.get(), slot_of_route_.get(), slot_token_.get(), ptrs_.get());
    REF_CHECK_LAUNCH();
    // cuBLAS reads the group sizes from host memory: the one sync of this baseline.
    REF_CUDA(cudaMemcpyAsync(counts_host_.get(), counts_.get(), E * sizeof(int32_t), cudaMemcpyDeviceToHost, stream));
    REF_CUDA(cudaStreamSynchronize(stream));
    int groups = 0, rows = 0;
    for (int e = 0; e < E; ++e) {
      if (counts_host_[e] == 0) continue;
      group_rows_[groups++] = counts_host_[e];
      rows += counts_host_[e];
    }

    if (rows > 0) {
      void** p = ptrs_.get();
      gather_rows_bf16<<<rows, 128, 0, stream>>>(io.X, slot_token_.get(), H, xg_.get());
      REF_CHECK_LAUNCH();
      // In gemm_xwt's column-major view: gate_up^T[2I, n] = W13_e^T . xg^T, and
      // y^T[H, n] = W2_e^T . h^T. Rows are dense, so lda = ldb = k and ldc = m.
      REF_CUBLAS(cublasGemmGroupedBatchedEx(
          handle, op_t_.data(), op_n_.data(), two_i_.data(), group_rows_.data(), h_dim_.data(), alpha_.data(),
          p + kA1 * E, CUDA_R_16BF, h_dim_.data(), p + kB1 * E, CUDA_R_16BF, h_dim_.data(), beta_.data(),
          p + kC1 * E, CUDA_R_16BF, two_i_.data(), groups, group_size_.data(), CUBLAS_COMPUTE_32F));
      silu_mul<<<rows, kThreads, 0, stream>>>(gate_up_.get(), I, h_.get());
      REF_CHECK_LAUNCH();
      REF_CUBLAS(cublasGemmGroupedBatchedEx(
          handle, op_t_.data(), op_n_.data(), h_dim_.data(), group_rows_.data(), i_dim_.data(), alpha_.data(),
          p + kA2 * E, CUDA_R_16BF, i_dim_.data(), p + kB2 * E, CUDA_R_16BF, i_dim_.data(), beta_.data(),
          p + kC2 * E, CUDA_R_16BF, h_dim_.data(), groups, group_size_.data(), CUBLAS_COMPUTE_32F));
    }
    combine<<<d_.M, kThreads, 0, stream>>>(y_.get(), slot_of_route_.get(), io.topk_weights, d_.k, H, io.out);
    REF_CHECK_LAUNCH();
  }

 private:
  submission::MoeDims d_;
  int routes_;                                  // M * k
  DeviceArray<bf16> w13_, w2_;                  // [E_local, 2I, H], [E_local, H, I]
  DeviceArray<int32_t> counts_;                 // [E_local] routes per local expert
  detail::PinnedArray<int32_t> counts_host_;
  DeviceArray<int32_t> slot_of_route_;          // [M*k] slot of each route, -1 if not local
  DeviceArray<int32_t> slot_token_;             // [M*k] token of each slot
  DeviceArray<void*> ptrs_;                     // [kOperands, E_local]
  DeviceArray<bf16> xg_, gate_up_, h_, y_;      // per slot: [., H], [., 2I], [., I], [., H]
  // Per-group arguments of cublasGemmGroupedBatchedEx, on the host as it requires;
  // only group_rows_ changes between runs.
  std::vector<cublasOperation_t> op_t_, op_n_;
  std::vector<int> two_i_, h_dim_, i_dim_, group_rows_;
  std::vector<float> alpha_, beta_;
  std::vector<int> group_size_;
  Cublas cublas_;
};

}  // namespace

std::unique_ptr<MoeReference> make_moe_reference(const submission::MoeDims& d, const submission::MoeWeights& w) {
  check_dims(d);
  return std::make_unique<MoeRef>(d, w);
}

std::unique_ptr<submission::Moe> make_moe_baseline(const submission::MoeDims& d, const submission::MoeWeights& w) {
  check_dims(d);
  detail::require(moe_align_smem_bytes(d.E_local) <= kBaselineSmemBytes,
                  "moe baseline: E_local too large for one block's counters");
  return std::make_unique<MoeBaseline>(d, w);
}

}  // namespace reference
