// The explicitly padded operand of a cuDNN convolution whose pads cuDNN cannot take as they are
// (CudnnConvWindow::padded(), cudnn_params.h): the node's tensor is the interior of a zero-bordered
// tensor in the stream's padding_workspace(). Conv pads X before the forward pass; ConvGrad pads X for
// dW and crops dX out of the padded gradient; ConvTranspose crops its Y out of the backward-data pass.
// The copies are cudnnTransformTensor between the packed tensor and the interior, a view of the padded
// buffer with the padded tensor's strides.
//
//   PaddedOperand padded(x_dims, window, dtype);
//   const void* xp = padded.pad(handle, stream, x);        // zeroed border, X inside
//   void* dxp = padded.buffer(stream);  /* backward data into dxp */  padded.crop(handle, dxp, dx);
#pragma once

#if ONNXTRAIN_HAVE_CUDNN

#include <string>
#include <vector>

#include "kernels/cuda/cudnn_common.h"

namespace onnxtrain::cuda {

// The cuDNN window of a Conv `geometry` whose input (`operand`, named `what`) is padded explicitly where
// cuDNN's symmetric pads differ from the node's; fails naming the problem, or the padded operand's size
// where it does not fit cuDNN's int.
inline CudnnConvWindow require_cudnn_conv_window(const KernelSpec& spec, const reference::WindowGeometry& geometry,
                                                 const TensorDesc& operand, const std::string& what) {
  CudnnConvWindow window = cudnn_conv_window(geometry);
  if (!window.window.problem.empty()) reference::kernel_fail(spec, window.window.problem);
  if (window.padded()) {
    std::vector<int64_t> padded = operand.sizes;
    for (size_t d = 0; d < window.extra_begin.size(); ++d) padded[2 + d] += window.extra_begin[d] + window.extra_end[d];
    require_cudnn_dims(spec, padded, what + " padded explicitly");
  }
  return window;
}

class PaddedOperand {
 public:
  // `dims`: the node's operand as cuDNN sees it (require_cudnn_dims); `window.padded()` must hold.
  PaddedOperand(const std::vector<int>& dims, const CudnnConvWindow& window, DType dtype)
      : dims_(padded_operand_dims(dims, window)), packed_(dims, dtype) {
    const std::vector<int> strides = packed_strides(dims_);
    interior_.set_strided(dims, strides, dtype);
    size_t offset = 0, numel = 1;
    for (size_t d = 0; d < window.extra_begin.size(); ++d)
      offset += static_cast<size_t>(window.extra_begin[d]) * static_cast<size_t>(strides[2 + d]);
    for (int n : dims_) numel *= static_cast<size_t>(n);
    offset_bytes_ = offset * dtype_size(dtype);
    bytes_ = numel * dtype_size(dtype);
  }

  const std::vector<int>& padded_dims() const { return dims_; }

  // The padded buffer (the stream's padding_workspace), for a pass to write; crop() then reads it.
  void* buffer(const Stream& stream) const { return padding_workspace(stream, bytes_); }

  // `src` (packed, the node's dims) inside a zeroed border; returns the padded buffer.
  const void* pad(cudnnHandle_t handle, const Stream& stream, const void* src) const {
    void* padded = buffer(stream);
    ONNXTRAIN_CUDA_CHECK(cudaMemsetAsync(padded, 0, bytes_, native_stream(stream)));
    const float one = 1.0f, zero = 0.0f;
    ONNXTRAIN_CUDNN_CHECK(cudnnTransformTensor(handle, &one, packed_.get(), src, &zero, interior_.get(),
                                               static_cast<char*>(padded) + offset_bytes_));
    return padded;
  }

  // The interior of `padded` into `dst` (packed, the node's dims).
  void crop(cudnnHandle_t handle, const void* padded, void* dst) const {
    const float one = 1.0f, zero = 0.0f;
    ONNXTRAIN_CUDNN_CHECK(cudnnTransformTensor(
        handle, &one, interior_.get(), static_cast<const char*>(padded) + offset_bytes_, &zero, packed_.get(), dst));
  }

 private:
  std::vector<int> dims_;      // padded
  TensorDescriptor packed_;    // the node's dims, packed
  TensorDescriptor interior_;  // the node's dims, the padded tensor's strides
  size_t offset_bytes_ = 0;    // of the interior's first element in the padded buffer
  size_t bytes_ = 0;           // of the padded buffer
};

}  // namespace onnxtrain::cuda

#endif  // ONNXTRAIN_HAVE_CUDNN
