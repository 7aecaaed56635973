// ConvGrad (ai.onnxtrain) on oneDNN, float32 (and bfloat16 where native, onednn::native_bf16), 1-D to 3-D:
// convolution_backward_data gives dX and convolution_backward_weights gives dW, with the bias gradient folded in when
// dB is wanted too (dB alone is a plain sum over dY). Both primitive descriptors are built at prepare time over
// format_tag::any with a forward_training primitive descriptor as their hint, so they agree on layouts; prepared
// reorders move the caller's plain buffers in (dY, X, W) and the results out (dX, dW) only where a primitive wants a
// blocked layout, and dY is reordered once when both primitives want the same one. A 1x1 convolution
// without pads and with strides touches only every stride-th pixel of X and dX: as in the forward kernel
// (conv.cc) the primitives are those of the same 1x1 convolution with stride 1 over strided views of X and
// dX (X's pixels gathered into a dense buffer first; dX zeroed, then the computed pixels scattered into
// it), so no reorder moves the pixels that are not read. A run only sets data handles and executes; the
// layout copies and the scratchpad are the running thread's arena (kernels/scratch_arena.h), and the data
// handles are the kernel's own state, so one kernel object must not run on two threads at once. What oneDNN
// has no implementation for (and empty tensors) runs the reference kernel. A convolution whose output is a
// single pixel runs as matrix products instead (single_pixel_conv.h), one over a small output plane (2 to
// 16 positions, tap_product_takes) as products per kernel tap (tap_product_conv.h).
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "kernels/onednn/conv_operands.h"
#include "kernels/onednn/depthwise_weight_gradient.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/primitive_sequence_kernel.h"
#include "kernels/onednn/reference_fallback.h"
#include "kernels/onednn/single_pixel_conv.h"
#include "kernels/onednn/tap_product_conv.h"
#include "kernels/onednn/winograd.h"
#include "kernels/reference/window.h"

namespace onnxtrain {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

using onednn::execute;
using onednn::Operand;

class OnednnConvGrad final : public Kernel, public onednn::ReportsImplementation {
 public:
  // `algorithm`: convolution_direct, or convolution_winograd where winograd_pays (conv.cc's choice).
  OnednnConvGrad(const KernelSpec& spec, const reference::WindowGeometry& w, dnnl::algorithm algorithm) : spec_(spec) {
    const TensorDesc& dy = spec.inputs[0];
    const TensorDesc& x = spec.inputs[1];
    const TensorDesc& weight = spec.inputs[2];
    const auto wanted = [&](size_t i) { return i < spec.outputs.size() && spec.outputs[i].present(); };
    want_dx_ = wanted(0);
    want_dw_ = wanted(1);
    want_db_ = wanted(2);
    const int64_t group = spec.attributes.get_int("group", 1);
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
    // For a strided unpadded 1x1 convolution, X and dX as the primitives see them: strided views of the
    // caller's buffers with dY's spatial sizes (then the convolution has stride 1).
    const DType dtype = x.dtype;
    const memory::data_type type = onednn::data_type_of(dtype);
    memory::dims x_dims = onednn::dims_of(x.sizes);
    std::optional<memory::desc> x_view;
    const auto all = [](const memory::dims& v, int64_t value) {
      return std::all_of(v.begin(), v.end(), [value](int64_t e) { return e == value; });
    };
    const bool one_by_one = std::all_of(weight.sizes.begin() + 2, weight.sizes.end(), [](int64_t k) { return k == 1; });
    if (one_by_one && all(pad_l, 0) && all(pad_r, 0) && !all(strides, 1)) {
      memory::dims view_dims = x_dims, view_strides(x_dims.size(), 1);
      for (size_t i = x_dims.size() - 1; i-- > 0;) view_strides[i] = view_strides[i + 1] * x_dims[i + 1];
      bool fits = true;
      for (size_t i = 0; i < strides.size(); ++i) {
        view_dims[i + 2] = dy.sizes[i + 2];
        view_strides[i + 2] *= strides[i];
        fits = fits && dy.sizes[i + 2] * strides[i] <= x_dims[i + 2];  // oneDNN refuses overhanging views
      }
      if (fits) {
        x_dims = view_dims;
        x_view = memory::desc(view_dims, type, view_strides);
        std::fill(strides.begin(), strides.end(), 1);
        std::fill(dilations.begin(), dilations.end(), 0);
        x_bytes_ = static_cast<size_t>(x.numel()) * dtype_size(dtype);
      }
    }
    const memory::desc x_any(x_dims, type, tag::any);
    const memory::desc w_any(onednn::dims_of(w_sizes), type, tag::any);
    const memory::desc y_any(onednn::dims_of(dy.sizes), type, tag::any);
    if (want_dw_ && !x_view && onednn::DepthwiseWeightGradient::applies(spec, w)) depthwise_dw_.emplace(spec, w);
    const bool bias_in_weights = want_dw_ && want_db_ && !depthwise_dw_;
    const memory::desc bias_md = bias_in_weights ? onednn::plain_desc({weight.sizes[0]}, dtype) : memory::desc();
    const auto plain = [dtype](const std::vector<int64_t>& sizes) { return onednn::plain_desc(sizes, dtype); };
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const dnnl::convolution_forward::primitive_desc hint(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training, algorithm, x_any, w_any, bias_md, y_any,
                                        strides, dilations, pad_l, pad_r),
        onednn::cpu_engine());
    size_t scratch_bytes = 0;
    std::optional<memory::desc> dy_layout;  // the layout dy_ was reordered into (for sharing)
    if (want_dx_) {
      const auto data_pd = [&](const memory::desc& x_md) {
        return dnnl::convolution_backward_data::primitive_desc(
            dnnl::convolution_backward_data::desc(algorithm, x_md, w_any, y_any, strides, dilations, pad_l, pad_r),
            attr, onednn::cpu_engine(), hint);
      };
      dnnl::convolution_backward_data::primitive_desc pd = data_pd(x_any);
      // Few input channels in AVX-512's blocks of 16 (8 padded to 16: the fixture CNN's second convolution)
      // make the AVX-512 kernel compute dX's padding too and double what the copy back to the plain layout
      // reads; in blocks of 8 oneDNN runs its AVX2 kernel without it (batch 64, 8 <- 16 channels at 14x14,
      // one thread: 0.29 against 0.45 ms, as Conv's few output channels in conv.cc).
      if (!x_view) pd = onednn::unpadded_where_blocks_pad(pd, pd.diff_src_desc(), plain(x.sizes), data_pd);
      dy_.prepare(plain(dy.sizes), pd.diff_dst_desc(), true);
      dy_layout = pd.diff_dst_desc();
      weights_.prepare(plain(w_sizes), pd.weights_desc(), true);
      dx_.prepare(x_view ? *x_view : plain(x.sizes), pd.diff_src_desc(), false);
      implementation_ = pd.impl_info_str();
      data_scratch_desc_ = pd.scratchpad_desc();
      scratch_bytes = std::max(scratch_bytes, data_scratch_desc_.get_size());
      backward_data_ = dnnl::convolution_backward_data(pd);
    }
    if (depthwise_dw_)
      implementation_ += (implementation_.empty() ? "" : ", ") + std::string("depthwise small-plane loops");
    if (want_dw_ && !depthwise_dw_) {
      const auto weights_pd = [&](const memory::desc& x_md, const memory::desc& y_md) {
        return dnnl::convolution_backward_weights::primitive_desc(
            bias_in_weights ? dnnl::convolution_backward_weights::desc(algorithm, x_md, w_any, bias_md, y_md, strides,
                                                                       dilations, pad_l, pad_r)
                            : dnnl::convolution_backward_weights::desc(algorithm, x_md, w_any, y_md, strides, dilations,
                                                                       pad_l, pad_r),
            attr, onednn::cpu_engine(), hint);
      };
      dnnl::convolution_backward_weights::primitive_desc pd = weights_pd(x_any, y_any);
      // With fewer input channels than AVX-512's block of 16, oneDNN (2.6) takes its AVX2 kernel over blocks
      // of 8 on an AVX-512 CPU; over channels-last data its AVX-512 kernel runs it in 0.65x the time (batch
      // 64, 8 -> 16 channels at 14x14: 0.224 against 0.347 ms), and the reorders into either layout cost
      // the same (0.013 + 0.027 against 0.013 + 0.031 ms). A grouped (depthwise) convolution over a small
      // plane gets oneDNN's im2col + GEMM per group over blocked data, and its depthwise JIT kernel over
      // channels-last: MobileNetV2's 3x3 depthwise weights at 2x2, batch 32, one thread, 4.1 -> 1.1 ms
      // (576 channels) and 2.8 -> 0.7 ms (384), `ONEDNN_VERBOSE`.
      const std::string chosen = pd.impl_info_str();
      const bool worth_channels_last =
          chosen.starts_with("jit:avx2") || (group > 1 && chosen.find("gemm") != std::string::npos);
      if (!x_view && type == memory::data_type::f32 && onednn::channel_block_is_16() && worth_channels_last) {
        try {
          const tag last = x_dims.size() == 3 ? tag::nwc : x_dims.size() == 4 ? tag::nhwc : tag::ndhwc;
          auto channels_last =
              weights_pd(memory::desc(x_dims, type, last), memory::desc(onednn::dims_of(dy.sizes), type, last));
          if (std::string(channels_last.impl_info_str()).starts_with("jit:avx512")) pd = channels_last;
        } catch (const dnnl::error&) {  // no implementation: keep the first
        }
      }
      if (!dy_layout || *dy_layout != pd.diff_dst_desc()) {
        dy_for_weights_.emplace();
        dy_for_weights_->prepare(plain(dy.sizes), pd.diff_dst_desc(), true);
      }
      if (x_view)
        x_.prepare_view(*x_view, pd.src_desc());
      else
        x_.prepare(plain(x.sizes), pd.src_desc(), true);
      dw_.prepare(plain(w_sizes), pd.diff_weights_desc(), false);
      implementation_ += (implementation_.empty() ? "" : ", ") + std::string(pd.impl_info_str());
      if (bias_in_weights) db_ = memory(bias_md, onednn::cpu_engine(), nullptr);
      weights_scratch_desc_ = pd.scratchpad_desc();
      scratch_bytes = std::max(scratch_bytes, weights_scratch_desc_.get_size());
      backward_weights_ = dnnl::convolution_backward_weights(pd);
    }
    scratch_bytes_ = scratch_bytes;
    if (want_dx_) {
      const memory scratch(data_scratch_desc_, onednn::cpu_engine(), nullptr);
      data_args_ = {{DNNL_ARG_DIFF_DST, dy_.primitive_side().get()},
                    {DNNL_ARG_WEIGHTS, weights_.primitive_side().get()},
                    {DNNL_ARG_DIFF_SRC, dx_.primitive_side().get()},
                    {DNNL_ARG_SCRATCHPAD, scratch.get()}};
      data_scratch_ = scratch;
    }
    if (want_dw_ && !depthwise_dw_) {
      const memory scratch(weights_scratch_desc_, onednn::cpu_engine(), nullptr);
      const memory& diff_dst = dy_for_weights_ ? dy_for_weights_->primitive_side() : dy_.primitive_side();
      weights_args_ = {{DNNL_ARG_SRC, x_.primitive_side().get()},
                       {DNNL_ARG_DIFF_DST, diff_dst.get()},
                       {DNNL_ARG_DIFF_WEIGHTS, dw_.primitive_side().get()},
                       {DNNL_ARG_SCRATCHPAD, scratch.get()}};
      if (bias_in_weights) weights_args_.push_back({DNNL_ARG_DIFF_BIAS, db_.get()});
      weights_scratch_ = scratch;
    }
    out_channels_ = dy.sizes[1];
    plane_ = 1;
    for (size_t i = 2; i < dy.sizes.size(); ++i) plane_ *= dy.sizes[i];
    batch_ = dy.sizes[0];
  }

  // Backward data's, then backward weights' ("jit_bf16:avx512_core_bf16, jit_bf16:avx512_core_bf16").
  std::string library_implementation() const override { return implementation_; }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    onednn::checked(spec_, "run", [&] {
      dnnl::stream& stream = onednn::cpu_stream();
      // The layout copies and the scratchpad (one, for backward data and then backward weights) live in
      // the thread's arena for this run only.
      ScratchArena::Lease lease;
      for (Operand* o : {&dy_, &weights_, &dx_, &x_, &dw_}) o->place(lease);
      if (dy_for_weights_) dy_for_weights_->place(lease);
      std::byte* scratchpad = lease.take(scratch_bytes_);
      for (memory* m : {&data_scratch_, &weights_scratch_})
        if (*m) m->set_data_handle(scratchpad);
      if (want_dx_) {
        dy_.user.set_data_handle(inputs[0].data);
        weights_.user.set_data_handle(inputs[2].data);
        dx_.user.set_data_handle(outputs[0].data);
        dy_.run_reorder(stream);
        weights_.run_reorder(stream);
        execute(backward_data_, stream, data_args_);
        if (x_bytes_) std::memset(outputs[0].data, 0, x_bytes_);  // the pixels the strided 1x1 conv skips
        dx_.run_reorder(stream);
      }
      if (want_dw_ && !depthwise_dw_) {
        if (dy_for_weights_) {
          dy_for_weights_->user.set_data_handle(inputs[0].data);
          dy_for_weights_->run_reorder(stream);
        }
        x_.bind(inputs[1].data);
        dw_.user.set_data_handle(outputs[1].data);
        if (want_db_) db_.set_data_handle(outputs[2].data);
        x_.run_reorder(stream);
        execute(backward_weights_, stream, weights_args_);
        dw_.run_reorder(stream);
      }
      stream.wait();
    });
    if (depthwise_dw_)
      depthwise_dw_->run(inputs[0].as<const float>(), inputs[1].as<const float>(), outputs[1].as<float>());
    if (want_db_ && (!want_dw_ || depthwise_dw_)) sum_bias(inputs[0].as<const float>(), outputs[2].as<float>());
  }

 private:
  // dB alone: dY summed over batch and spatial positions.
  void sum_bias(const float* dy, float* db) const {
    for (int64_t c = 0; c < out_channels_; ++c) {
      double sum = 0;
      for (int64_t n = 0; n < batch_; ++n) {
        const float* plane = dy + (n * out_channels_ + c) * plane_;
        for (int64_t i = 0; i < plane_; ++i) sum += plane[i];
      }
      db[c] = static_cast<float>(sum);
    }
  }

  KernelSpec spec_;
  std::string implementation_;
  bool want_dx_ = false, want_dw_ = false, want_db_ = false;
  int64_t batch_ = 0, out_channels_ = 0, plane_ = 0;
  size_t x_bytes_ = 0;  // X's size in bytes when X and dX are strided views (a strided 1x1 conv), else 0
  // dy_ feeds backward data, and backward weights too when it wants the same layout; else (or without dX)
  // backward weights has its own dy_for_weights_.
  Operand dy_, weights_, dx_, x_, dw_;
  std::optional<Operand> dy_for_weights_;
  std::optional<onednn::DepthwiseWeightGradient> depthwise_dw_;  // dW by our loops (a small depthwise plane)
  memory db_;
  memory::desc data_scratch_desc_, weights_scratch_desc_;
  size_t scratch_bytes_ = 0;
  memory data_scratch_, weights_scratch_;
  dnnl::convolution_backward_data backward_data_;
  dnnl::convolution_backward_weights backward_weights_;
  std::vector<dnnl_exec_arg_t> data_args_, weights_args_;  // the primitives' arguments, over the memories above
};

std::unique_ptr<Kernel> make_onednn_conv_grad(const KernelSpec& spec) {
  // The reference prepare checks sizes and attributes, so both implementations reject the same specs.
  std::unique_ptr<Kernel> reference = onednn::reference_kernel(spec);
  const TensorDesc& dy = spec.inputs[0];
  const TensorDesc& x = spec.inputs[1];
  const size_t spatial = x.sizes.size() - 2;
  const DType dtype = dy.dtype;
  // dB alone is summed here in float32 (sum_bias); in bfloat16 the reference kernel does it.
  const bool bias_alone = spec.outputs.size() > 2 && spec.outputs[2].present() && !spec.outputs[1].present();
  bool supported =
      spatial >= 1 && spatial <= 3 && onednn::takes_dtype(dtype) && !(bias_alone && dtype != DType::Float32);
  for (const auto* list : {&spec.inputs, &spec.outputs}) {
    for (const TensorDesc& d : *list) {
      supported = supported && (!d.present() || (d.dtype == dtype && d.numel() > 0));
    }
  }
  if (!supported) return reference;
  const std::vector<int64_t> kernel(spec.inputs[2].sizes.begin() + 2, spec.inputs[2].sizes.end());
  const reference::WindowGeometry w = reference::read_window_geometry(spec, {x.sizes.begin() + 2, x.sizes.end()},
                                                                      {dy.sizes.begin() + 2, dy.sizes.end()}, kernel);
  try {
    if (std::unique_ptr<Kernel> matrix_products = onednn::make_single_pixel_conv_grad(spec, w)) return matrix_products;
    if (std::unique_ptr<Kernel> tap_products = onednn::make_tap_product_conv_grad(spec, w)) return tap_products;
    return onednn::winograd_or_direct(spec, 1, w, [&](dnnl::algorithm algorithm) -> std::unique_ptr<Kernel> {
      return std::make_unique<OnednnConvGrad>(spec, w, algorithm);
    });
  } catch (const dnnl::error& e) {
    if (e.status == dnnl_unimplemented) return reference;  // a variant oneDNN has no implementation for
    return onednn::checked(spec, "prepare", [&]() -> std::unique_ptr<Kernel> { throw; });
  }
}

}  // namespace

void register_onednn_conv_grad_kernels(KernelRegistry& registry) {
  registry.add({.domain = "ai.onnxtrain",
                .op_type = "ConvGrad",
                .device = DeviceKind::Cpu,
                .dtypes = {DType::Float32, DType::BFloat16},
                .implementation = "onednn",
                .factory = &make_onednn_conv_grad});
  registry.add({.domain = "ai.onnxtrain",
                .op_type = "TapMajorConvGrad",
                .device = DeviceKind::Cpu,
                .dtypes = {DType::Float32},
                .implementation = "onednn",
                .factory = &onednn::make_tap_major_conv_grad});
}

}  // namespace onnxtrain
