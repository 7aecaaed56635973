// Whether CUDA convolutions and matrix products may use TF32 tensor cores (products of operands rounded
// to a 10-bit mantissa, float32 accumulation; about 1e-3 relative error, several times faster on Ampere
// and newer): PyTorch's torch.backends.cudnn.allow_tf32 and torch.backends.cuda.matmul.allow_tf32 in one
// switch. Off by default, so CUDA results stay within float32 tolerance of the reference kernels.
// Process-wide, like PyTorch's: set it before kernels are prepared (`onnxtrain train --tf32` does, at
// startup). cuDNN kernels read it at prepare (their convolution descriptor's math type, and the key of
// the algorithm cache), cuBLAS kernels each time they take a handle. Plain C++, compiled in every build.
#pragma once

namespace onnxtrain::cuda {

void set_allow_tf32(bool allow);
bool allow_tf32();

}  // namespace onnxtrain::cuda
