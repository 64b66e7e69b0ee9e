// The copy wrappers only dev/'s kernels use, beside the upload's (submission/async_copy.cuh):
// cp.async groups (the CTA-copies and split-K rings), a bulk copy without a cache policy and the
// proxy fence before a bulk copy refills a slot (the split-K bulk ring).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "submission/async_copy.cuh"

namespace submission {

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Global -> shared copy by the copy engine of `bytes` (a multiple of 16, both addresses 16-byte
// aligned); completes `bytes` on `bar`, as the upload's form does, with the default L2 policy.
__device__ __forceinline__ void bulk_copy(void* smem, const void* gmem, unsigned bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(smem)),
               "l"(gmem), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}

// Orders this thread's view of shared memory (generic-proxy reads of a slot, made complete by a
// preceding barrier) before an async-proxy write that refills it.
__device__ __forceinline__ void fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

}  // namespace submission
