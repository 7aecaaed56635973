// ConvGrad's dB for float16 and bfloat16 dY (conv_grad.cc): cudnnConvolutionBackwardBias returned
// CUDNN_STATUS_NOT_SUPPORTED for half dY on an H200 with cuDNN 9 (pip nvidia-cudnn-cu13, 2026-12-04).
// Plain C++ declaration; conv_bias_grad.cu defines it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace onnxtrain::cuda {

// db[c] = Σ over n < batch and i < inner of dy[(n·channels + c)·inner + i], for 16-bit dy and db (float16,
// or bfloat16 with `bfloat16`), accumulated in float32 in a fixed order and rounded once. Enqueued on `stream`.
void launch_channel_sum_half(bool bfloat16, const void* dy, void* db, int64_t batch, int64_t channels, int64_t inner,
                             cudaStream_t stream);

}  // namespace onnxtrain::cuda
