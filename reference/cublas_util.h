// Helpers shared by the references and baselines (reference/*.cu, dense.cpp):
// error checks that throw std::runtime_error naming the failed call and the
// error, owners of device memory and cuBLAS handles (so that a prepare() that
// throws half-way leaks nothing), the row-major GEMM every op is built on, the
// reference GEMM of dense and router, and the dims check of every factory.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>

#include "reference/reference.h"

namespace reference::detail {

[[noreturn]] inline void throw_failed(const char* call, const char* error, const char* file, int line) {
  throw std::runtime_error(std::string(call) + " failed: " + error + " (" + file + ":" + std::to_string(line) + ")");
}

}  // namespace reference::detail

// `call` returned `status`; anything but `ok` throws, named by `name(status)`.
#define REF_CHECK_STATUS(call, ok, name)                                                              \
  do {                                                                                                \
    const auto status_ = (call);                                                                      \
    if (status_ != (ok)) ::reference::detail::throw_failed(#call, name(status_), __FILE__, __LINE__); \
  } while (0)
#define REF_CUDA(call) REF_CHECK_STATUS(call, cudaSuccess, cudaGetErrorName)
#define REF_CUBLAS(call) REF_CHECK_STATUS(call, CUBLAS_STATUS_SUCCESS, cublasGetStatusName)
#define REF_CUBLASLT(call) REF_CHECK_STATUS(call, CUBLAS_STATUS_SUCCESS, cublasLtGetStatusName)

// After a kernel launch: a bad configuration is only reported here.
#define REF_CHECK_LAUNCH() REF_CUDA(cudaGetLastError())

namespace reference::detail {

// Releasing (cudaFree, cudaFreeHost, cublasDestroy) cannot be reported from a
// destructor, and a failed release leaves nothing else to do, so its status is
// dropped.
struct CudaFree {
  void operator()(void* p) const { cudaFree(p); }
};
struct CudaFreeHost {
  void operator()(void* p) const { cudaFreeHost(p); }
};
template <class T>
using DeviceArray = std::unique_ptr<T[], CudaFree>;
template <class T>
using PinnedArray = std::unique_ptr<T[], CudaFreeHost>;

template <class T>
DeviceArray<T> device_array(size_t n) {
  void* p = nullptr;
  REF_CUDA(cudaMalloc(&p, (n ? n : 1) * sizeof(T)));
  return DeviceArray<T>(static_cast<T*>(p));
}

template <class T>
PinnedArray<T> pinned_array(size_t n) {
  void* p = nullptr;
  REF_CUDA(cudaMallocHost(&p, (n ? n : 1) * sizeof(T)));
  return PinnedArray<T>(static_cast<T*>(p));
}

// 32 MiB: what cuBLAS recommends for Hopper.
constexpr size_t kCublasWorkspaceBytes = size_t(32) << 20;

// A cuBLAS handle with a workspace of its own. cublasSetStream resets the
// workspace to cuBLAS's internal pool, which may allocate during a call (and so
// break graph capture); bind() therefore sets both, every run.
class Cublas {
 public:
  Cublas() : workspace_(device_array<unsigned char>(kCublasWorkspaceBytes)) { REF_CUBLAS(cublasCreate(&handle_)); }
  ~Cublas() { cublasDestroy(handle_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;

  cublasHandle_t bind(cudaStream_t stream) {
    REF_CUBLAS(cublasSetStream(handle_, stream));
    REF_CUBLAS(cublasSetWorkspace(handle_, workspace_.get(), kCublasWorkspaceBytes));
    return handle_;
  }

 private:
  DeviceArray<unsigned char> workspace_;
  cublasHandle_t handle_ = nullptr;
};

// out[M, N] = X[M, K] . W[N, K]^T, every matrix row-major and densely packed,
// alpha 1 and beta 0 as floats (so compute is one of the 32F types). cuBLAS is
// column-major, where the same memory holds out^T[N, M] = W^T . X^T: W is
// operand A read transposed (lda = K), X is operand B (ldb = K), ldc = N.
inline void gemm_xwt(cublasHandle_t handle, int M, int N, int K, const void* X, const void* W, cudaDataType_t in_type,
                     void* out, cudaDataType_t out_type, cublasComputeType_t compute) {
  const float one = 1.0f, zero = 0.0f;
  REF_CUBLAS(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W, in_type, K, X, in_type, K, &zero, out,
                          out_type, N, compute, CUBLAS_GEMM_DEFAULT));
}

// out[M, N] = X[M, K] . W[N, K]^T, bf16 in and fp32 out, in cuBLAS's pedantic
// fp32 compute: the reference of dense (its output) and of router (its
// logits), whose interfaces (reference.h) run alike. Interface:
// DenseReference or RouterReference.
template <class Interface>
class PedanticGemmReference final : public Interface {
 public:
  PedanticGemmReference(int M, int N, int K, const bf16* W) : M_(M), N_(N), K_(K), W_(W) {}

  void run(const bf16* X, float* out, cudaStream_t stream) override {
    gemm_xwt(cublas_.bind(stream), M_, N_, K_, X, W_, CUDA_R_16BF, out, CUDA_R_32F, CUBLAS_COMPUTE_32F_PEDANTIC);
  }

 private:
  int M_, N_, K_;
  const bf16* W_;
  Cublas cublas_;
};

// Throws std::invalid_argument(what) for dims outside the op's valid range.
inline void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(what);
}

}  // namespace reference::detail
