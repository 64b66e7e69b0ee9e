// PTX wrappers of the moe_w4a16 kernels (sm_90): programmatic dependent
// launch, the bf16 tensor-core MMA and the int4 -> bf16 dequant (the copies'
// wrappers: async_copy.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "submission/async_copy.cuh"
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

// d += A(16x16, row) . B(16x8, col), bf16 inputs, fp32 accumulation. Fragment
// layouts (PTX ISA, mma.m16n8k16, groupID g = lane/4, threadID_in_group t):
//   a0: (g, 2t..2t+1) a1: (g+8, 2t..2t+1) a2: (g, 2t+8..) a3: (g+8, 2t+8..)
//   b0: (k 2t..2t+1, n g) b1: (k 2t+8..2t+9, n g)
//   d0, d1: (g, 2t), (g, 2t+1)   d2, d3: (g+8, 2t), (g+8, 2t+1)
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// The four A registers of one repacked word (see moe_plan.h), biased: each
// pair is 128 + q, from one shift and one LOP3 ((x & mask) | magic; the
// magic constant lives in a register, so ptxas need not split the LOP3 in
// two for its two immediates). The bias is not subtracted here: the caller
// adds one MMA of the constant -136 per k16 step, shared by all its tiles
// (compute_stage), which costs fewer instructions than a bf16x2 subtract
// per register. The group scale is applied to the fp32 accumulators
// afterwards, so w = (q - 8) * s is never rounded to bf16.
__device__ __forceinline__ void biased_word(uint32_t word, uint32_t (&a)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;\n"  // 0xEA: (a & b) | c
        : "=r"(a[j])
        : "r"(word >> (4 * j)), "n"(0x000f000f), "r"(kBf16Pair128));
}

// q - 8 from biased_word's 128 + q, exactly: for kernels that cannot afford
// the extra accumulators of the folded zero point.
__device__ __forceinline__ void unbias(uint32_t (&a)[4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) asm("sub.rn.bf16x2 %0, %0, %1;\n" : "+r"(a[j]) : "r"(kBf16Pair136));
}

__device__ __forceinline__ float bf16_lo_to_float(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float bf16_hi_to_float(uint32_t pair) {
  return __uint_as_float(pair & 0xffff0000u);
}

}  // namespace submission::moe
