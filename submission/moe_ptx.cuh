// PTX wrappers of the moe_w4a16 kernels (sm_90): programmatic dependent
// launch and the int4 -> bf16 dequant (the copies' wrappers: async_copy.cuh;
// the MMA: mma_bf16.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "submission/async_copy.cuh"
#include "submission/mma_bf16.cuh"
#include "submission/moe_plan.h"

namespace submission::moe {

// Programmatic dependent launch. Both are no-ops for a grid launched without
// the programmatic-serialization attribute, so every kernel calls them.
// wait: blocks until the grids this one depends on have completed and their
// memory is visible; nothing they write may be read before it.
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
// launch_dependents: lets the next grid become resident now. It orders no
// memory: the next grid still calls pdl_wait before reading anything.
__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// The four A registers of one repacked word (see moe_plan.h), biased: each
// pair is 128 + q, from one shift and one LOP3 ((x & mask) | magic; the
// magic constant lives in a register, so ptxas need not split the LOP3 in
// two for its two immediates). The bias is not subtracted here: at one
// token tile the caller folds it into one MMA of the constant -136 per k16
// step, shared by all its tiles, and with more it subtracts it (unbias;
// compute_stage_tiles says why). The group scale is applied to the fp32
// accumulators afterwards, so w = (q - 8) * s is never rounded to bf16.
__device__ __forceinline__ void biased_word(uint32_t word, uint32_t (&a)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n"  // 0xEA: (a & b) | c
        : "=r"(a[j])
        : "r"(word >> (4 * j)), "n"(0x000f000f), "r"(kBf16Pair128));
}

// q - 8 from biased_word's 128 + q, exactly: for the stages of more than one
// token tile, where folding the zero point into MMAs costs more (see
// compute_stage_tiles).
__device__ __forceinline__ void unbias(uint32_t (&a)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) asm("sub.rn.bf16x2 %0, %0, %1;\n" : "+r"(a[j]) : "r"(kBf16Pair136));
}

__device__ __forceinline__ float bf16_lo_to_float(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float bf16_hi_to_float(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

}  // namespace submission::moe
