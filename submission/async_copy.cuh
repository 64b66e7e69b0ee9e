// PTX wrappers for the kernels' asynchronous global -> shared copies (sm_90):
// cp.async (per thread, 16 bytes), bulk copies (the TMA's non-tensor form)
// and the mbarriers that say when copies have landed. dev/async_copy.cuh adds
// the forms only dev/'s kernels use.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace submission {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte copy that bypasses L1. src_bytes < 16 zero-fills the rest: 0 reads
// nothing and writes 16 zeros (padding rows, chunks past the end).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)), "l"(gmem), "r"(src_bytes)
               : "memory");
}
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>  // N: groups this thread may leave in flight
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(count) : "memory");
}
// Makes the initialised barriers visible to the async proxy (the bulk copies).
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// One arrival that also announces `bytes` of bulk copy the phase must wait for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}
// One arrival once all of this thread's earlier cp.async copies have landed;
// "noinc": the barrier's expected count already includes it.
__device__ __forceinline__ void cp_async_mbar_arrive(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
// Blocks until the phase with this parity has completed (acquire: what was
// written before the arrivals, and the copies' bytes, are visible after it).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_addr(bar)), "r"(parity)
        : "memory");
  } while (!done);
}

// Whether the phase with this parity has completed, without waiting (the
// same acquire as mbar_wait when it answers true).
__device__ __forceinline__ bool mbar_test(uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
               : "=r"(done)
               : "r"(smem_addr(bar)), "r"(parity)
               : "memory");
  return done != 0;
}

// Global -> shared copy by the copy engine of `bytes` (a multiple of 16, both
// addresses 16-byte aligned) under an L2 cache policy (l2_evict_first_policy);
// completes `bytes` on `bar`. The CTA's own shared address is valid in the
// shared::cluster window without a cluster.
__device__ __forceinline__ void bulk_copy(void* smem, const void* gmem, unsigned bytes, uint64_t* bar,
                                          uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], "
      "%4;\n" ::"r"(smem_addr(smem)),
      "l"(gmem), "r"(bytes), "r"(smem_addr(bar)), "l"(policy)
      : "memory");
}
// An L2 policy for data read exactly once (streamed weights): evicted first,
// so that what is re-read (activations) stays in L2.
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  return policy;
}

}  // namespace submission
