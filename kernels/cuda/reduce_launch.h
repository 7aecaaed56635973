// Launchers of the CUDA reduction kernels (reduce.cu), called by the Reduce*/ArgMax/ArgMin kernels of
// reduce.cc. Plain C++ declarations: enqueue on `stream`, never synchronise. Instantiated for float,
// double, int32_t and int64_t. Floats accumulate in double and integers in int64 (L2, LogSum and
// LogSumExp of integers in double), as the reference does.
//
//   launch_reduce<float>(ReduceOp::Mean, geometry, x, y, stream);
//   launch_arg_reduce<float>(/*is_max=*/true, /*select_last=*/false, {outer, n, inner}, x, indices, stream);
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/reduce_geometry.h"

namespace onnxtrain::cuda {

enum class ReduceOp { Sum, Mean, Max, Min, Prod, L1, L2, SumSquare, LogSum, LogSumExp };

// y[o] = reduction of x over g's reduced dims, for every output o (g.out_numel > 0).
template <typename T>
void launch_reduce(ReduceOp op, const ReduceGeometry& g, const T* x, T* y, cudaStream_t stream);

// y[o, i] = index k along n of the max (min) of x[o, k, i]; ties pick the first index, or the last with
// select_last. NaNs never win except at k = 0, where nothing compares better (the reference's loop).
template <typename T>
void launch_arg_reduce(bool is_max, bool select_last, const AxisGeometry& g, const T* x, int64_t* y,
                       cudaStream_t stream);

}  // namespace onnxtrain::cuda
