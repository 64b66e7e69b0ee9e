// The bf16 tensor-core MMA every kernel here uses: mma.sync m16n8k16, bf16
// inputs, fp32 accumulation, d += A(16x16, row) . B(16x8, col).
// Fragment layouts (PTX ISA, groupID g = lane/4, threadID_in_group t):
//   a0: (g, 2t..2t+1) a1: (g+8, 2t..2t+1) a2: (g, 2t+8..) a3: (g+8, 2t+8..)
//   b0: (k 2t..2t+1, n g) b1: (k 2t+8..2t+9, n g)
//   d0, d1: (g, 2t), (g, 2t+1)   d2, d3: (g+8, 2t), (g+8, 2t+1)
#pragma once

#include <cstdint>

namespace submission {

__device__ __forceinline__ void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  mma_bf16(d, a[0], a[1], a[2], a[3], b0, b1);
}

}  // namespace submission
