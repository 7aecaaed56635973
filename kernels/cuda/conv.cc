// cuDNN Conv and ConvTranspose (float32, float16 and bfloat16 with float32 accumulation; 1 to 3 spatial
// dims, groups, strides, dilations, optional bias).
// Descriptors are made at prepare; the algorithm is found at the first run (conv_algorithms.h).
// ConvTranspose is the backward-data pass of the Conv it transposes (Y as that Conv's input, X as its
// output, W its filter). cuDNN pads both ends alike; where the node's pads differ (asymmetric pads, auto_pad
// SAME with an odd total), that Conv input is padded explicitly by the difference (cudnn_conv_window,
// cudnn_params.h; conv_padding.h): Conv pads X, ConvTranspose crops Y. Bias is added with cudnnAddTensor.
#include "kernels/cuda/cuda_kernels.h"

#if ONNXTRAIN_HAVE_CUDNN

#include <algorithm>
#include <optional>
#include <type_traits>

#include "kernels/cuda/conv_algorithms.h"
#include "kernels/cuda/conv_padding.h"
#include "kernels/reference/conv_geometry.h"

namespace onnxtrain {
namespace {

using namespace cuda;
using reference::kernel_fail;

void add_bias(cudnnHandle_t handle, const TensorDescriptor& bias, const void* b, const TensorDescriptor& y, void* out) {
  const float one = 1.0f;
  ONNXTRAIN_CUDNN_CHECK(cudnnAddTensor(handle, &one, bias.get(), b, &one, y.get(), out));
}

// Conv (Transpose false): the forward pass of X by W into Y. ConvTranspose (true): the backward-data pass
// of the Conv it transposes, which reads the ConvTranspose's X and writes its Y. Then B added to Y. With
// an explicitly padded operand (Conv: X; ConvTranspose: Y) the cuDNN descriptors x_/y_ are the padded
// tensor's.
template <bool Transpose>
class CudnnConv final : public Kernel {
 public:
  using Algo = std::conditional_t<Transpose, cudnnConvolutionBwdDataAlgo_t, cudnnConvolutionFwdAlgo_t>;

  CudnnConv(const std::vector<int>& x, const std::vector<int>& w, const std::vector<int>& y,
            const CudnnConvWindow& window, int group, bool has_bias, bool empty, DType dtype)
      : padded_(window.padded() ? std::make_optional<PaddedOperand>(Transpose ? y : x, window, dtype) : std::nullopt),
        x_(Transpose ? x : conv_input(x), dtype),
        w_(w, dtype),
        y_(Transpose ? conv_input(y) : y, dtype),
        y_out_(y, dtype),
        conv_(window.window, group, dtype),
        bias_(per_channel_dims(y), dtype),
        has_bias_(has_bias),
        empty_(empty),
        key_(Transpose ? conv_problem_key(conv_input(y), w, x, window.window, group, dtype)
                       : conv_problem_key(conv_input(x), w, y, window.window, group, dtype)) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    if (empty_) return;
    DeviceGuard guard(stream);
    cudnnHandle_t handle = cudnn_handle(stream);
    const void* x = inputs[0].data;
    const void* w = inputs[1].data;
    void* y = outputs[0].data;
    if constexpr (Transpose) {
      void* full = padded_ ? padded_->buffer(stream) : y;
      convolution_backward_data(algo_, key_, handle, stream, w_, w, x_, x, conv_, y_, full);
      if (padded_) padded_->crop(handle, full, y);
    } else {
      if (padded_) x = padded_->pad(handle, stream, x);
      if (!algo_) algo_ = find_forward(key_, handle, stream, x_, x, w_, w, conv_, y_, y);
      algo_->use(conv_);
      void* ws = workspace(stream, algo_->workspace);
      const float one = 1.0f, zero = 0.0f;
      ONNXTRAIN_CUDNN_CHECK(cudnnConvolutionForward(handle, &one, x_.get(), x, w_.get(), w, conv_.get(), algo_->algo,
                                                    ws, algo_->workspace, &zero, y_.get(), y));
    }
    if (has_bias_ && inputs.size() > 2 && inputs[2].data) add_bias(handle, bias_, inputs[2].data, y_out_, y);
  }

 private:
  // The dims of the Conv's input (Conv: X, ConvTranspose: Y) as cuDNN sees them: padded where padded_.
  const std::vector<int>& conv_input(const std::vector<int>& node_dims) const {
    return padded_ ? padded_->padded_dims() : node_dims;
  }

  std::optional<PaddedOperand> padded_;  // first: the members below are made from it
  TensorDescriptor x_;
  FilterDescriptor w_;
  TensorDescriptor y_;
  TensorDescriptor y_out_;  // the node's Y (the bias is added to it)
  ConvolutionDescriptor conv_;
  TensorDescriptor bias_;
  bool has_bias_;
  bool empty_;
  std::vector<int> key_;  // ConvTranspose: the Conv it transposes, input Y, output X
  std::optional<ConvAlgorithm<Algo>> algo_;
};

// The checks Conv and ConvTranspose share: the reference kernel's, one dtype of kConvGemmDTypes, and no
// empty tensor that Y depends on while Y is not empty (zero input channels): cuDNN has no such case.
void require_cudnn_conv_operands(const KernelSpec& spec) {
  validate_with_reference(spec);
  require_conv_gemm_dtype(spec);
  if (spec.outputs[0].numel() == 0) return;
  for (size_t i = 0; i < 2; ++i) {
    if (spec.inputs[i].numel() == 0) {
      kernel_fail(spec, "input " + std::to_string(i) + " " + reference::sizes_to_string(spec.inputs[i].sizes) +
                            " is empty but the output is not: not supported by the cuDNN kernel");
    }
  }
}

// The kernel of a checked Conv (Transpose false) or ConvTranspose over `geometry`: the Conv's window, or
// that of the Conv the ConvTranspose transposes. Fails where cuDNN cannot take the window.
template <bool Transpose>
std::unique_ptr<Kernel> make_cudnn_conv(const KernelSpec& spec, const reference::WindowGeometry& geometry,
                                        int64_t group) {
  const CudnnConvWindow window =
      require_cudnn_conv_window(spec, geometry, Transpose ? spec.outputs[0] : spec.inputs[0], Transpose ? "Y" : "X");
  const TensorDesc& y = spec.outputs[0];
  const bool has_bias = spec.inputs.size() > 2 && spec.inputs[2].present();
  return std::make_unique<CudnnConv<Transpose>>(require_cudnn_dims(spec, spec.inputs[0].sizes, "X"),
                                                require_cudnn_dims(spec, spec.inputs[1].sizes, "W"),
                                                require_cudnn_dims(spec, y.sizes, "Y"), window, static_cast<int>(group),
                                                has_bias, y.numel() == 0, spec.inputs[0].dtype);
}

std::unique_ptr<Kernel> make_conv(const KernelSpec& spec) {
  require_cudnn_conv_operands(spec);
  const reference::ConvGeometry g =
      reference::read_conv_geometry(spec, spec.inputs[0], spec.inputs[1], spec.outputs[0], "Y");
  return make_cudnn_conv<false>(spec, g.window, g.group);
}

// ConvTranspose's window (the reference's resolution of pads, output_padding and output_shape) as the
// window of the Conv it transposes: input Y's spatial sizes, output X's, the same begin pads.
reference::WindowGeometry conv_transpose_window(const KernelSpec& spec) {
  const TensorDesc& x = spec.inputs[0];
  const TensorDesc& w = spec.inputs[1];
  const TensorDesc& y = spec.outputs[0];
  const std::vector<int64_t> in(x.sizes.begin() + 2, x.sizes.end()), out(y.sizes.begin() + 2, y.sizes.end());
  const std::vector<int64_t> kernel(w.sizes.begin() + 2, w.sizes.end());
  reference::WindowGeometry fwd = reference::read_window_geometry(spec, in, out, kernel);
  const size_t n = in.size();
  const std::vector<int64_t> output_padding = spec.attributes.get_ints("output_padding", std::vector<int64_t>(n, 0));
  const bool same = fwd.auto_pad == "SAME_UPPER" || fwd.auto_pad == "SAME_LOWER";
  for (size_t d = 0; d < n; ++d) {  // as kernels/reference/conv_transpose.cc
    if (!same && !spec.attributes.has("output_shape")) continue;
    const int64_t dilated = (kernel[d] - 1) * fwd.dilations[d] + 1;
    const int64_t total = fwd.strides[d] * (in[d] - 1) + output_padding[d] + dilated - out[d];
    const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor division
    fwd.pad_begin[d] = fwd.auto_pad == "SAME_UPPER" ? half : total - half;
    fwd.pad_end[d] = total - fwd.pad_begin[d];
  }
  reference::WindowGeometry conv = fwd;
  conv.input = out;
  conv.output = in;
  return conv;
}

std::unique_ptr<Kernel> make_conv_transpose(const KernelSpec& spec) {
  require_cudnn_conv_operands(spec);
  const reference::WindowGeometry window = conv_transpose_window(spec);
  for (size_t d = 0; d < window.spatial(); ++d) {
    if (window.pad_begin[d] < 0) {
      kernel_fail(spec, "output_shape/output_padding give spatial axis " + std::to_string(d) +
                            " a negative begin pad, which cuDNN cannot take");
    }
  }
  return make_cudnn_conv<true>(spec, window, spec.attributes.get_int("group", 1));
}

}  // namespace

void register_cuda_conv_kernels(KernelRegistry& registry) {
  registry.add(cuda_kernel_entry("", "Conv", kConvGemmDTypes, &make_conv));
  registry.add(cuda_kernel_entry("", "ConvTranspose", kConvGemmDTypes, &make_conv_transpose));
  register_cuda_conv_grad_kernels(registry);
}

}  // namespace onnxtrain

#else  // no cuDNN: no convolution kernels

namespace onnxtrain {
void register_cuda_conv_kernels(KernelRegistry&) {}
}  // namespace onnxtrain

#endif
