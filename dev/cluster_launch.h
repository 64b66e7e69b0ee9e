// The launch configuration of a kernel run in thread-block clusters along x. One builder, so that
// an occupancy query (cudaOccupancyMaxActiveClusters) and the launch (cudaLaunchKernelEx)
// describe the same launch.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace submission {

// cluster_x = 0: a plain launch, no cluster attribute. `attr` holds the attribute and must
// outlive the returned configuration.
inline cudaLaunchConfig_t cluster_launch_config(dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                                                unsigned cluster_x, cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  if (cluster_x > 0) {
    *attr = cudaLaunchAttribute{};
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = cluster_x;
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  return cfg;
}

}  // namespace submission
