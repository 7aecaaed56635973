// Conv on oneDNN's convolution_forward (1-D to 3-D, groups, strides, dilations, explicit and auto pads,
// optional bias). The primitive picks its own layouts (format_tag::any); prepared reorders move the
// caller's plain NC.../OI... buffers in and the result out when the layout differs (none when the chosen
// layout is the plain one). Weights are reordered on every run (they change every training step).
// A 1x1 convolution without pads and with strides reads only every stride-th pixel: its source is a
// strided view of the caller's buffer with the output's spatial sizes, gathered into a dense buffer, and the
// primitive is the same 1x1 convolution with stride 1, so the source reorder moves only the pixels read.
// Everything a run needs (memory objects, argument lists) is built at prepare; a run only sets the data
// handles. The scratchpad is the kernel's own buffer, so one kernel object must not run on two threads at
// once. Other variants use the reference kernel.
#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/reference_fallback.h"
#include "kernels/reference/window.h"

namespace onnxtrain {
namespace {

using dnnl::memory;
using tag = memory::format_tag;

// primitive.execute without the std::unordered_map → vector conversion (an allocation) of the C++ API.
void execute(const dnnl::primitive& primitive, dnnl::stream& stream, const std::vector<dnnl_exec_arg_t>& args) {
  dnnl::error::wrap_c_api(
      dnnl_primitive_execute(primitive.get(), stream.get(), static_cast<int>(args.size()), args.data()),
      "could not execute a primitive");
}

// A tensor the primitive reads or writes: the caller's plain buffer, and when the primitive wants another
// layout, an internal buffer with the reorder between them. A source may instead be a strided view of the
// caller's buffer: it is gathered into a dense buffer of its own first, because oneDNN's reorders from the
// dense buffer into a blocked layout are much faster than from the view.
struct Operand {
  memory user;                     // plain layout; its handle is set on every run (unless `view`)
  std::optional<memory> internal;  // the primitive's layout, when it differs
  std::optional<dnnl::reorder> reorder;
  std::vector<dnnl_exec_arg_t> reorder_args;  // {from, to} of the reorder
  std::optional<memory> view;      // the caller's buffer as a strided view, gathered into `user`
  std::optional<dnnl::reorder> gather;
  std::vector<dnnl_exec_arg_t> gather_args;

  void prepare(const memory::desc& plain, const memory::desc& wanted, bool into_primitive, bool owned = false) {
    dnnl::engine& engine = onednn::cpu_engine();
    user = owned ? memory(plain, engine) : memory(plain, engine, nullptr);
    if (plain == wanted) return;
    internal = memory(wanted, engine);
    reorder = into_primitive ? dnnl::reorder(user, *internal) : dnnl::reorder(*internal, user);
    const memory& from = into_primitive ? user : *internal;
    const memory& to = into_primitive ? *internal : user;
    reorder_args = {{DNNL_ARG_FROM, from.get()}, {DNNL_ARG_TO, to.get()}};
  }
  void prepare_view(const memory::desc& strided, const memory::desc& wanted) {
    prepare(onednn::plain_desc(strided.dims()), wanted, true, /*owned=*/true);
    view = memory(strided, onednn::cpu_engine(), nullptr);
    gather = dnnl::reorder(*view, user);
    gather_args = {{DNNL_ARG_FROM, view->get()}, {DNNL_ARG_TO, user.get()}};
  }
  void run_reorder(dnnl::stream& stream) const {
    if (gather) execute(*gather, stream, gather_args);
    if (reorder) execute(*reorder, stream, reorder_args);
  }
  const memory& primitive_side() const { return internal ? *internal : user; }
  void bind(void* data) { (view ? *view : user).set_data_handle(data); }
};

// Plain row-major strides of `dims`.
memory::dims plain_strides(const memory::dims& dims) {
  memory::dims strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
  return strides;
}

class OnednnConv final : public Kernel {
 public:
  OnednnConv(const KernelSpec& spec, const reference::WindowGeometry& w) : spec_(spec) {
    const TensorDesc& x = spec.inputs[0];
    const TensorDesc& weight = spec.inputs[1];
    const TensorDesc& y = spec.outputs[0];
    const int64_t group = spec.attributes.get_int("group", 1);
    has_bias_ = spec.inputs.size() > 2 && spec.inputs[2].present();
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
        x_view = memory::desc(view_dims, memory::data_type::f32, view_strides);
        std::fill(strides.begin(), strides.end(), 1);
        std::fill(dilations.begin(), dilations.end(), 0);
      }
    }
    const auto f32 = memory::data_type::f32;
    const memory::desc x_any(x_dims, f32, tag::any);
    const memory::desc w_any(onednn::dims_of(w_sizes), f32, tag::any);
    const memory::desc y_any(onednn::dims_of(y.sizes), f32, tag::any);
    const memory::desc bias_md = has_bias_ ? onednn::plain_desc(spec.inputs[2].sizes) : memory::desc();
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                         x_any, w_any, bias_md, y_any, strides, dilations, pad_l, pad_r);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    dnnl::convolution_forward::primitive_desc pd(desc, attr, onednn::cpu_engine());
    if (x_view) src_.prepare_view(*x_view, pd.src_desc());
    else src_.prepare(onednn::plain_desc(x.sizes), pd.src_desc(), true);
    weights_.prepare(onednn::plain_desc(w_sizes), pd.weights_desc(), true);
    dst_.prepare(onednn::plain_desc(y.sizes), pd.dst_desc(), false);
    if (has_bias_) bias_ = memory(bias_md, onednn::cpu_engine(), nullptr);
    scratchpad_ = memory(pd.scratchpad_desc(), onednn::cpu_engine());
    conv_ = dnnl::convolution_forward(pd);
    args_ = {{DNNL_ARG_SRC, src_.primitive_side().get()},
             {DNNL_ARG_WEIGHTS, weights_.primitive_side().get()},
             {DNNL_ARG_DST, dst_.primitive_side().get()},
             {DNNL_ARG_SCRATCHPAD, scratchpad_.get()}};
    if (has_bias_) args_.push_back({DNNL_ARG_BIAS, bias_.get()});
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    onednn::checked(spec_, "run", [&] {
      dnnl::stream& stream = onednn::cpu_stream();
      src_.bind(inputs[0].data);
      weights_.bind(inputs[1].data);
      dst_.bind(outputs[0].data);
      if (has_bias_) bias_.set_data_handle(inputs[2].data);
      src_.run_reorder(stream);
      weights_.run_reorder(stream);
      execute(conv_, stream, args_);
      dst_.run_reorder(stream);
      stream.wait();
    });
  }

 private:
  KernelSpec spec_;
  bool has_bias_ = false;
  Operand src_, weights_, dst_;
  memory bias_, scratchpad_;
  dnnl::convolution_forward conv_;
  std::vector<dnnl_exec_arg_t> args_;  // the primitive's arguments, over the memory objects above
};

std::unique_ptr<Kernel> make_conv(const KernelSpec& spec) {
  // The reference prepare checks sizes and attributes, so both implementations reject the same specs.
  std::unique_ptr<Kernel> reference = onednn::reference_kernel(spec);
  const TensorDesc& x = spec.inputs[0];
  const TensorDesc& y = spec.outputs[0];
  const size_t spatial = x.sizes.size() - 2;
  if (x.dtype != DType::Float32 || spatial < 1 || spatial > 3 || x.numel() == 0 || y.numel() == 0) return reference;
  const std::vector<int64_t> kernel(spec.inputs[1].sizes.begin() + 2, spec.inputs[1].sizes.end());
  const reference::WindowGeometry w = reference::read_window_geometry(
      spec, {x.sizes.begin() + 2, x.sizes.end()}, {y.sizes.begin() + 2, y.sizes.end()}, kernel);
  try {
    return std::make_unique<OnednnConv>(spec, w);
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
                .dtypes = {DType::Float32},
                .implementation = "onednn",
                .factory = &make_conv});
}

}  // namespace onnxtrain
