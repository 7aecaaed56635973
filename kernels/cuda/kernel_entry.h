// The KernelEntry of a "cuda" kernel: every CUDA kernel family registers through it (directly, or through
// its family's shorthand: cuda_entry in cudnn_common.h and elementwise_launch.cuh, movement_entry in
// data_movement_common.cuh). Safe for nvcc and the host compiler alike.
//
//   registry.add(cuda_kernel_entry("ai.onnxtrain", "SoftmaxGrad", {DType::Float32, DType::Float64}, &make));
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "kernels/kernel.h"

namespace onnxtrain::cuda {

// The entry of a "cuda" kernel of `op_type` in `domain` ("" or "ai.onnxtrain") over `dtypes`.
inline KernelEntry cuda_kernel_entry(std::string domain, std::string op_type, std::vector<DType> dtypes,
                                     KernelFactory factory) {
  return {.domain = std::move(domain),
          .op_type = std::move(op_type),
          .device = DeviceKind::Cuda,
          .dtypes = std::move(dtypes),
          .implementation = "cuda",
          .factory = factory};
}

}  // namespace onnxtrain::cuda
