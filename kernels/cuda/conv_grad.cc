// cuDNN ai.onnxtrain::ConvGrad(dY, X, W) -> dX, dW, dB (each optional): backward data, backward filter
// and backward bias of the Conv in conv.cc, with the same window mapping and prepare-time refusals. With
// an explicitly padded X (conv_padding.h) dW is taken over the padded X and dX is cropped out of the
// padded gradient, in that order: both use the one padding buffer. dB of float16 and bfloat16 is a
// channel sum of our own (conv_bias_grad.h): cuDNN 9 refuses those in cudnnConvolutionBackwardBias.
// Algorithms are found at the first run (conv_algorithms.h), one per wanted output. With an empty dY,
// X or W the sums are empty: the wanted outputs are zero-filled. float32, float16 and bfloat16 (float32
// accumulation) as conv.cc.
#include "kernels/cuda/cuda_kernels.h"

#if ONNXTRAIN_HAVE_CUDNN

#include <algorithm>
#include <optional>

#include "kernels/cuda/conv_algorithms.h"
#include "kernels/cuda/conv_bias_grad.h"
#include "kernels/cuda/conv_padding.h"
#include "kernels/reference/conv_geometry.h"

namespace onnxtrain {
namespace {

using namespace cuda;
using reference::kernel_fail;

class CudnnConvGrad final : public Kernel {
 public:
  CudnnConvGrad(const std::vector<int>& x, const std::vector<int>& w, const std::vector<int>& dy,
                const CudnnConvWindow& window, int group, bool empty, DType dtype)
      : padded_(window.padded() ? std::make_optional<PaddedOperand>(x, window, dtype) : std::nullopt),
        x_(padded_ ? padded_->padded_dims() : x, dtype),
        w_(w, dtype),
        dy_(dy, dtype),
        conv_(window.window, group, dtype),
        db_(per_channel_dims(dy), dtype),
        dy_dims_(dy),
        dtype_(dtype),
        empty_(empty),
        key_(conv_problem_key(padded_ ? padded_->padded_dims() : x, w, dy, window.window, group, dtype)) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    DeviceGuard guard(stream);
    auto wanted = [&](size_t i) { return i < outputs.size() && outputs[i].data != nullptr; };
    if (empty_) {
      for (size_t i = 0; i < 3; ++i) {
        if (wanted(i) && outputs[i].numel() > 0) {
          const size_t bytes = static_cast<size_t>(outputs[i].numel()) * dtype_size(outputs[i].dtype);
          ONNXTRAIN_CUDA_CHECK(cudaMemsetAsync(outputs[i].data, 0, bytes, native_stream(stream)));
        }
      }
      return;
    }
    cudnnHandle_t handle = cudnn_handle(stream);
    const void* dy = inputs[0].data;
    const void* x = inputs[1].data;
    const void* w = inputs[2].data;
    const float one = 1.0f, zero = 0.0f;
    if (wanted(1)) {
      if (padded_) x = padded_->pad(handle, stream, x);
      void* dw = outputs[1].data;
      if (!filter_algo_) filter_algo_ = find_backward_filter(key_, handle, stream, x_, x, dy_, dy, conv_, w_, dw);
      filter_algo_->use(conv_);
      void* ws = workspace(stream, filter_algo_->workspace);
      ONNXTRAIN_CUDNN_CHECK(cudnnConvolutionBackwardFilter(handle, &one, x_.get(), x, dy_.get(), dy, conv_.get(),
                                                           filter_algo_->algo, ws, filter_algo_->workspace, &zero,
                                                           w_.get(), dw));
    }
    if (wanted(0)) {  // after dW: the padded dX overwrites the padded X
      void* dx = padded_ ? padded_->buffer(stream) : outputs[0].data;
      convolution_backward_data(data_algo_, key_, handle, stream, w_, w, dy_, dy, conv_, x_, dx);
      if (padded_) padded_->crop(handle, dx, outputs[0].data);
    }
    if (wanted(2)) {
      if (is_half(dtype_)) {
        int64_t inner = 1;
        for (size_t d = 2; d < dy_dims_.size(); ++d) inner *= dy_dims_[d];
        launch_channel_sum_half(dtype_ == DType::BFloat16, dy, outputs[2].data, dy_dims_[0], dy_dims_[1], inner,
                                native_stream(stream));
      } else {
        ONNXTRAIN_CUDNN_CHECK(
            cudnnConvolutionBackwardBias(handle, &one, dy_.get(), dy, &zero, db_.get(), outputs[2].data));
      }
    }
  }

 private:
  std::optional<PaddedOperand> padded_;
  TensorDescriptor x_;  // the padded X's with padded_
  FilterDescriptor w_;
  TensorDescriptor dy_;
  ConvolutionDescriptor conv_;
  TensorDescriptor db_;
  std::vector<int> dy_dims_;
  DType dtype_;
  bool empty_;
  std::vector<int> key_;
  std::optional<ConvAlgorithm<cudnnConvolutionBwdDataAlgo_t>> data_algo_;
  std::optional<ConvAlgorithm<cudnnConvolutionBwdFilterAlgo_t>> filter_algo_;
};

std::unique_ptr<Kernel> make_conv_grad(const KernelSpec& spec) {
  validate_with_reference(spec);
  const DType dtype = require_conv_gemm_dtype(spec);
  const TensorDesc& dy = spec.inputs[0];
  const TensorDesc& x = spec.inputs[1];
  const TensorDesc& w = spec.inputs[2];
  const reference::ConvGeometry g = reference::read_conv_geometry(spec, x, w, dy, "dY");
  const bool empty = dy.numel() == 0 || x.numel() == 0 || w.numel() == 0;
  const CudnnConvWindow window = require_cudnn_conv_window(spec, g.window, x, "X");
  auto dims = [&](const TensorDesc& t, const char* what) { return require_cudnn_dims(spec, t.sizes, what); };
  return std::make_unique<CudnnConvGrad>(dims(x, "X"), dims(w, "W"), dims(dy, "dY"), window, static_cast<int>(g.group),
                                         empty, dtype);
}

}  // namespace

void register_cuda_conv_grad_kernels(KernelRegistry& registry) {
  registry.add(cuda_kernel_entry("ai.onnxtrain", "ConvGrad", kConvGemmDTypes, &make_conv_grad));
}

}  // namespace onnxtrain

#endif
