// ConvTranspose, float32, 1-D to 3-D, on oneDNN's deconvolution_forward: groups, strides, dilations,
// explicit pads, auto_pad, output_padding and output_shape. The output sizes are the caller's; the leading
// pads are resolved as kernels/reference/conv_transpose.cc resolves them, and the trailing pads follow
// from the output size: pad_r = stride·(in-1) + dilated kernel - pad_l - out. An output that reaches past
// the full result (output_padding, a large output_shape) needs pad_r < 0; oneDNN's shape rule rounds
// (out + pad_l + pad_r - dilated kernel) / stride down, so pad_r = 0 describes the same deconvolution while
// the excess is below the stride, and the positions no input reaches get the bias alone. Negative leading
// pads and larger excesses fall back to the reference kernel, as do empty tensors.
// ONNX's weight (C, M/group, k...) is oneDNN's (group, M/group, C/group, k...) with the two channel axes
// swapped: a strided memory descriptor over the caller's buffer, reordered into the primitive's layout on
// every run (weights change every training step). The primitive picks its layouts (format_tag::any);
// prepared reorders move X in and Y out when they differ from the plain ones. One kernel object must not
// run on two threads at once (the scratchpad and internal buffers are its own).
#include <optional>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/losses_norm_common.h"
#include "kernels/onednn/conv_operands.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/reference/nn_common.h"
#include "kernels/reference/window.h"

namespace onnxtrain {
namespace {

using dnnl::memory;

// The deconvolution's window: strides, dilations (oneDNN counts the gaps) and pads per spatial axis.
struct Deconvolution {
  memory::dims strides, dilations, pad_l, pad_r;
};

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

// The window of the spec in oneDNN's terms; nullopt when oneDNN's deconvolution cannot express it.
std::optional<Deconvolution> read_deconvolution(const KernelSpec& spec) {
  const TensorDesc& x = spec.inputs[0];
  const TensorDesc& y = spec.outputs[0];
  const std::vector<int64_t> in(x.sizes.begin() + 2, x.sizes.end()), out(y.sizes.begin() + 2, y.sizes.end());
  const std::vector<int64_t> kernel(spec.inputs[1].sizes.begin() + 2, spec.inputs[1].sizes.end());
  reference::WindowGeometry w = reference::read_window_geometry(spec, in, out, kernel);
  const size_t spatial = in.size();
  const std::vector<int64_t> output_padding =
      spec.attributes.get_ints("output_padding", std::vector<int64_t>(spatial, 0));
  const bool same = w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER";
  Deconvolution d;
  for (size_t i = 0; i < spatial; ++i) {
    const int64_t dilated = (kernel[i] - 1) * w.dilations[i] + 1;
    int64_t begin = w.pad_begin[i];
    if (same || spec.attributes.has("output_shape")) {  // as the reference kernel resolves them
      const int64_t total = w.strides[i] * (in[i] - 1) + output_padding[i] + dilated - out[i];
      begin = w.auto_pad == "SAME_UPPER" ? floor_div(total, 2) : total - floor_div(total, 2);
    }
    const int64_t end = w.strides[i] * (in[i] - 1) + dilated - begin - out[i];
    if (begin < 0 || end <= -w.strides[i]) return std::nullopt;
    d.strides.push_back(w.strides[i]);
    d.dilations.push_back(w.dilations[i] - 1);
    d.pad_l.push_back(begin);
    d.pad_r.push_back(end < 0 ? 0 : end);
  }
  return d;
}

// ONNX's W (C, M/group, k...) as oneDNN's deconvolution weights (M, C, k...) or (group, M/g, C/g, k...).
memory::desc weights_desc(const std::vector<int64_t>& w, int64_t group) {
  const int64_t in_per_group = w[0] / group, out_per_group = w[1];
  int64_t volume = 1;
  for (size_t i = 2; i < w.size(); ++i) volume *= w[i];
  memory::dims dims, strides;
  if (group > 1) {
    dims = {group, out_per_group, in_per_group};
    strides = {in_per_group * out_per_group * volume, volume, out_per_group * volume};
  } else {
    dims = {out_per_group, in_per_group};
    strides = {volume, out_per_group * volume};
  }
  int64_t stride = volume;
  for (size_t i = 2; i < w.size(); ++i) {
    stride /= w[i];
    dims.push_back(w[i]);
    strides.push_back(stride);
  }
  return memory::desc(dims, memory::data_type::f32, strides);
}

class ConvTransposeKernel final : public Kernel {
 public:
  ConvTransposeKernel(const KernelSpec& spec, const Deconvolution& d) : spec_(spec) {
    const TensorDesc& x = spec.inputs[0];
    const TensorDesc& y = spec.outputs[0];
    const int64_t group = spec.attributes.get_int("group", 1);
    const bool has_bias = reference::has_input(spec, 2);
    const auto f32 = memory::data_type::f32;
    const auto any = memory::format_tag::any;
    const memory::desc w_user = weights_desc(spec.inputs[1].sizes, group);
    const memory::desc bias_md = has_bias ? onednn::plain_desc(spec.inputs[2].sizes) : memory::desc();
    dnnl::deconvolution_forward::desc desc(
        dnnl::prop_kind::forward_training, dnnl::algorithm::deconvolution_direct,
        memory::desc(onednn::dims_of(x.sizes), f32, any), memory::desc(w_user.dims(), f32, any), bias_md,
        memory::desc(onednn::dims_of(y.sizes), f32, any), d.strides, d.dilations, d.pad_l, d.pad_r);
    dnnl::deconvolution_forward::primitive_desc pd(desc, onednn::user_scratchpad(), onednn::cpu_engine());
    io_.src.prepare(onednn::plain_desc(x.sizes), pd.src_desc(), true);
    io_.prepare(pd, w_user, onednn::plain_desc(y.sizes), bias_md);
    deconv_ = dnnl::deconvolution_forward(pd);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    onednn::checked(spec_, "run", [&] { io_.run(deconv_, inputs, outputs); });
  }

 private:
  KernelSpec spec_;
  onednn::ConvOperands io_;
  dnnl::deconvolution_forward deconv_;
};

std::unique_ptr<Kernel> make_conv_transpose(const KernelSpec& spec) {
  std::unique_ptr<Kernel> reference = cpu::reference_kernel(spec);  // checks the spec as the reference does
  const TensorDesc& x = spec.inputs[0];
  const TensorDesc& y = spec.outputs[0];
  const size_t spatial = x.sizes.size() - 2;
  if (x.dtype != DType::Float32 || spatial < 1 || spatial > 3 || x.numel() == 0 || y.numel() == 0 ||
      spec.inputs[1].numel() == 0) {
    return reference;
  }
  const std::optional<Deconvolution> d = read_deconvolution(spec);
  if (!d) return reference;
  try {
    return std::make_unique<ConvTransposeKernel>(spec, *d);
  } catch (const dnnl::error& e) {
    // a variant oneDNN has no implementation for, or whose sizes its deconvolution does not accept
    if (e.status == dnnl_unimplemented || e.status == dnnl_invalid_arguments) return reference;
    return onednn::checked(spec, "prepare", [&]() -> std::unique_ptr<Kernel> { throw; });
  }
}

}  // namespace

void register_cpu_conv_transpose_kernels(KernelRegistry& registry) {
  registry.add(cpu::cpu_entry("ConvTranspose", {DType::Float32}, &make_conv_transpose));
}

}  // namespace onnxtrain
