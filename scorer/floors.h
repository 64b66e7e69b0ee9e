// Floors: the fastest a kernel could run a shape. The read floor is a tuned
// streaming read of exactly the shape's minimal bytes, timed like the shapes
// (ColdTimer: cold L2, stream held, events, median), so it includes one launch
// and the memory system's ramp and every real kernel can be compared with it.
// The ceilings it is judged against are measured once at start-up.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "scorer/cold_timer.h"

namespace scorer {

// Median µs of the fastest of several launch configurations (blocks per SM,
// threads per block) reading `bytes` once with 16-byte loads, 4 in flight per
// thread. `buffer` holds at least `bytes`.
double measure_read_floor_us(size_t bytes, const DeviceBuffer& buffer, ColdTimer& timer, int reps = 15);

// Device-to-device copy bandwidth in GB/s, counting bytes read plus written
// (1 GiB copied, median of 10).
double measure_copy_gbps(cudaStream_t stream);

// bf16 GEMM rate in TFLOP/s (cuBLAS, 8192^3, fp32 accumulation, random data,
// median of 10).
double measure_matrix_tflops(cudaStream_t stream);

}  // namespace scorer
