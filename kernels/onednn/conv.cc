// Conv on oneDNN's convolution_forward (1-D to 3-D, groups, strides, dilations, explicit and auto pads,
// optional bias). The primitive picks its own layouts (format_tag::any); prepared reorders move the
// caller's plain NC.../OI... buffers in and the result out when the layout differs (none when the chosen
// layout is the plain one). Weights are reordered on every run (they change every training step).
// A 1x1 convolution without pads and with strides reads only every stride-th pixel: its source is a
// strided view of the caller's buffer with the output's spatial sizes, gathered into a dense buffer, and the
// primitive is the same 1x1 convolution with stride 1, so the source reorder moves only the pixels read.
// Everything a run needs (memory objects, argument lists) is built at prepare; a run only sets the data
// handles (the layout copies and the scratchpad in the running thread's arena, kernels/scratch_arena.h), so
// one kernel object must not run on two threads at once. float32, and bfloat16 where the CPU has native bfloat16
// (onednn::native_bf16: accumulation in float32, the result rounded once). Other variants use the reference kernel.
// A convolution whose output is a single pixel is a matrix product instead (single_pixel_conv.h), one
// over a small output plane (2 to 16 positions, tap_product_takes) a product per kernel tap (tap_product_conv.h).
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "kernels/onednn/conv_operands.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/reference_fallback.h"
#include "kernels/onednn/single_pixel_conv.h"
#include "kernels/onednn/tap_product_conv.h"
#include "kernels/onednn/winograd.h"
#include "kernels/reference/window.h"

namespace onnxtrain {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// Plain row-major strides of `dims`.
memory::dims plain_strides(const memory::dims& dims) {
  memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
  return strides;
}

class OnednnConv final : public Kernel, public onednn::ReportsImplementation {
 public:
  // `algorithm`: convolution_direct, or convolution_winograd where winograd_pays.
  OnednnConv(const KernelSpec& spec, const reference::WindowGeometry& w, dnnl::algorithm algorithm) : spec_(spec) {
    const TensorDesc& x = spec.inputs[0];
    const TensorDesc& weight = spec.inputs[1];
    const TensorDesc& y = spec.outputs[0];
    const int64_t group = spec.attributes.get_int("group", 1);
    const bool has_bias = spec.inputs.size() > 2 && spec.inputs[2].present();
    std::vector<int64_t> w_sizes = weight.sizes;  // ONNX (M, C/g, k...) = oneDNN (g, M/g, C/g, k...) in memory
    if (group > 1) {
      w_sizes[0] /= group;
      w_sizes.insert(w_sizes.begin(), group);
    }
    memory::dims strides, dilations, pad_l, pad_r;
    for (size_t i = 0; i < w.spatial(); ++i) {
      strides.push_back(w.strides[i]);
      dilations.push_back(w.dilations[i] - 1);  // oneDNN counts the gaps
      pad_l.push_back(w.pad_begin[i]);
      pad_r.push_back(w.pad_end[i]);
    }
    // The source as the primitive sees it: the caller's buffer, or for a strided unpadded 1x1 convolution
    // the strided view of the pixels it reads (then the convolution has stride 1).
    const memory::data_type type = onednn::data_type_of(x.dtype);
    memory::dims x_dims = onednn::dims_of(x.sizes);
    std::optional<memory::desc> x_view;
    const auto all = [](const memory::dims& v, auto pred) { return std::all_of(v.begin(), v.end(), pred); };
    const bool one_by_one = std::all_of(weight.sizes.begin() + 2, weight.sizes.end(), [](int64_t k) { return k == 1; });
    if (one_by_one && all(pad_l, [](int64_t p) { return p == 0; }) && all(pad_r, [](int64_t p) { return p == 0; }) &&
        !all(strides, [](int64_t s) { return s == 1; })) {
      memory::dims view_dims = x_dims, view_strides = plain_strides(x_dims);
      bool fits = true;
      for (size_t i = 0; i < strides.size(); ++i) {
        view_dims[i + 2] = y.sizes[i + 2];
        view_strides[i + 2] *= strides[i];
        fits = fits && y.sizes[i + 2] * strides[i] <= x_dims[i + 2];  // oneDNN refuses overhanging views
      }
      if (fits) {
        x_dims = view_dims;
        x_view = memory::desc(view_dims, type, view_strides);
        std::fill(strides.begin(), strides.end(), 1);
        std::fill(dilations.begin(), dilations.end(), 0);
      }
    }
    const memory::desc x_any(x_dims, type, tag::any);
    const memory::desc w_any(onednn::dims_of(w_sizes), type, tag::any);
    const memory::desc y_any(onednn::dims_of(y.sizes), type, tag::any);
    const memory::desc bias_md =
        has_bias ? onednn::plain_desc(spec.inputs[2].sizes, spec.inputs[2].dtype) : memory::desc();
    const auto primitive_for = [&](const memory::desc& y_md) {
      return dnnl::convolution_forward::primitive_desc(
          dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm, x_any, w_any, bias_md, y_md,
                                          strides, dilations, pad_l, pad_r),
          onednn::user_scratchpad(), onednn::cpu_engine());
    };
    dnnl::convolution_forward::primitive_desc pd = primitive_for(y_any);
    // Few output channels in AVX-512's blocks of 16 (8 padded to 16: the fixture CNN's first convolution)
    // double the output the copy back to the plain layout reads; in blocks of 8 oneDNN runs its AVX2 kernel
    // with no padding, and convolution and copy together take 0.67x the time (batch 64, 1 -> 8 channels at
    // 28x28: 0.362 against 0.543 ms).
    const memory::desc y_plain = onednn::plain_desc(y.sizes, x.dtype);
    if (!x_view) pd = onednn::unpadded_where_blocks_pad(pd, pd.dst_desc(), y_plain, primitive_for);
    if (x_view)
      io_.src.prepare_view(*x_view, pd.src_desc());
    else
      io_.src.prepare(onednn::plain_desc(x.sizes, x.dtype), pd.src_desc(), true);
    io_.prepare(pd, onednn::plain_desc(w_sizes, x.dtype), y_plain, bias_md);
    conv_ = dnnl::convolution_forward(pd);
    implementation_ = pd.impl_info_str();
  }

  std::string library_implementation() const override { return implementation_; }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    onednn::checked(spec_, "run", [&] { io_.run(conv_, inputs, outputs); });
  }

 private:
  KernelSpec spec_;
  onednn::ConvOperands io_;
  dnnl::convolution_forward conv_;
  std::string implementation_;
};

std::unique_ptr<Kernel> make_conv(const KernelSpec& spec) {
  // The reference prepare checks sizes and attributes, so both implementations reject the same specs.
  std::unique_ptr<Kernel> reference = onednn::reference_kernel(spec);
  const TensorDesc& x = spec.inputs[0];
  const TensorDesc& y = spec.outputs[0];
  const size_t spatial = x.sizes.size() - 2;
  if (!onednn::takes_dtype(x.dtype) || spatial < 1 || spatial > 3 || x.numel() == 0 || y.numel() == 0) return reference;
  const std::vector<int64_t> kernel(spec.inputs[1].sizes.begin() + 2, spec.inputs[1].sizes.end());
  const reference::WindowGeometry w = reference::read_window_geometry(spec, {x.sizes.begin() + 2, x.sizes.end()},
                                                                      {y.sizes.begin() + 2, y.sizes.end()}, kernel);
  try {
    if (std::unique_ptr<Kernel> matrix_product = onednn::make_single_pixel_conv(spec, w)) return matrix_product;
    if (std::unique_ptr<Kernel> tap_products = onednn::make_tap_product_conv(spec, w)) return tap_products;
    return onednn::winograd_or_direct(spec, 0, w, [&](dnnl::algorithm algorithm) -> std::unique_ptr<Kernel> {
      return std::make_unique<OnednnConv>(spec, w, algorithm);
    });
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_unimplemented) return reference;  // a variant oneDNN has no implementation for
    return onednn::checked(spec, "prepare", [&]() -> std::unique_ptr<Kernel> { throw; });
  }
}

}  // namespace

void register_onednn_conv_kernels(KernelRegistry& registry) {
  registry.add({.domain = "",
                .op_type = "Conv",
                .device = DeviceKind::Cpu,
                .dtypes = {DType::Float32, DType::BFloat16},
                .implementation = "onednn",
                .factory = &make_conv});
  registry.add({.domain = "ai.onnxtrain",
                .op_type = "TapMajorConv",
                .device = DeviceKind::Cpu,
                .dtypes = {DType::Float32},
                .implementation = "onednn",
                .factory = &onednn::make_tap_major_conv});
}

}  // namespace onnxtrain
