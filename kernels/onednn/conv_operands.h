// The memory side of oneDNN's convolution-like forward primitives (convolution_forward for Conv,
// deconvolution_forward for the "cpu" ConvTranspose): each of X, W and Y is the caller's plain buffer plus,
// when the primitive picked another layout, an internal buffer and a prepared reorder; the bias is used as
// given. The internal buffers and the scratchpad are placed in the running thread's ScratchArena for the
// run (kernels/scratch_arena.h), so they cost memory only while the kernel runs. Everything else is built
// at prepare; a run only sets data handles, reorders and executes.
//
//   dnnl::primitive_attr attr = onednn::user_scratchpad();
//   dnnl::convolution_forward::primitive_desc pd(desc, attr, onednn::cpu_engine());
//   io_.src.prepare(onednn::plain_desc(x.sizes), pd.src_desc(), true);   // or prepare_view for a strided X
//   io_.prepare(pd, w_plain, onednn::plain_desc(y.sizes), bias_md);
//   conv_ = dnnl::convolution_forward(pd);
//   ... run: onednn::checked(spec_, "run", [&] { io_.run(conv_, inputs, outputs); });
#pragma once

#include <optional>
#include <span>
#include <vector>

#include "kernels/onednn/onednn_common.h"
#include "kernels/scratch_arena.h"

namespace onnxtrain::onednn {

// primitive.execute without the std::unordered_map → vector conversion (an allocation) of the C++ API.
inline void execute(const dnnl::primitive& primitive, dnnl::stream& stream, const std::vector<dnnl_exec_arg_t>& args) {
  dnnl::error::wrap_c_api(
      dnnl_primitive_execute(primitive.get(), stream.get(), static_cast<int>(args.size()), args.data()),
      "could not execute a primitive");
}

// A primitive attribute with a user-managed scratchpad.
inline dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

// A tensor the primitive reads or writes: the caller's plain buffer, and when the primitive wants another
// layout, an internal buffer with the reorder between them. A source may instead be a strided view of the
// caller's buffer: it is gathered into a dense buffer of its own first, because oneDNN's reorders from the
// dense buffer into a blocked layout are much faster than from the view. The buffers the operand owns
// (`internal`, and `user` behind a view) have no memory until place() puts them in a run's lease.
struct Operand {
  dnnl::memory user;                     // plain layout; its handle is set on every run (unless `view`)
  std::optional<dnnl::memory> internal;  // the primitive's layout, when it differs
  std::optional<dnnl::reorder> reorder;
  std::vector<dnnl_exec_arg_t> reorder_args;  // {from, to} of the reorder
  std::optional<dnnl::memory> view;           // the caller's buffer as a strided view, gathered into `user`
  std::optional<dnnl::reorder> gather;
  std::vector<dnnl_exec_arg_t> gather_args;

  void prepare(const dnnl::memory::desc& plain, const dnnl::memory::desc& wanted, bool into_primitive,
               bool owned = false) {
    dnnl::engine& engine = cpu_engine();
    user = dnnl::memory(plain, engine, nullptr);
    owns_user = owned;
    if (plain == wanted) return;
    internal = dnnl::memory(wanted, engine, nullptr);
    reorder = into_primitive ? dnnl::reorder(user, *internal) : dnnl::reorder(*internal, user);
    const dnnl::memory& from = into_primitive ? user : *internal;
    const dnnl::memory& to = into_primitive ? *internal : user;
    reorder_args = {{DNNL_ARG_FROM, from.get()}, {DNNL_ARG_TO, to.get()}};
  }
  void prepare_view(const dnnl::memory::desc& strided, const dnnl::memory::desc& wanted) {
    prepare(plain_desc(strided.dims()), wanted, true, /*owned=*/true);
    view = dnnl::memory(strided, cpu_engine(), nullptr);
    gather = dnnl::reorder(*view, user);
    gather_args = {{DNNL_ARG_FROM, view->get()}, {DNNL_ARG_TO, user.get()}};
  }
  void run_reorder(dnnl::stream& stream) const {
    if (gather) execute(*gather, stream, gather_args);
    if (reorder) execute(*reorder, stream, reorder_args);
  }
  const dnnl::memory& primitive_side() const { return internal ? *internal : user; }
  void bind(void* data) { (view ? *view : user).set_data_handle(data); }
  // Gives the buffers the operand owns their memory for one run.
  void place(ScratchArena::Lease& lease) {
    if (owns_user) user.set_data_handle(lease.take(user.get_desc().get_size()));
    if (internal) internal->set_data_handle(lease.take(internal->get_desc().get_size()));
  }

 private:
  bool owns_user = false;
};

// X, W, Y, the optional bias (input 2) and the scratchpad of a convolution-like primitive, and its argument list.
struct ConvOperands {
  Operand src, weights, dst;
  bool has_bias = false;
  dnnl::memory bias, scratchpad;
  std::vector<dnnl_exec_arg_t> args;

  // Prepares W, Y, bias and scratchpad for `pd` (src must be prepared already); `bias` is an empty desc
  // where there is none.
  template <typename PrimitiveDesc>
  void prepare(const PrimitiveDesc& pd, const dnnl::memory::desc& weights_plain, const dnnl::memory::desc& dst_plain,
               const dnnl::memory::desc& bias_desc) {
    weights.prepare(weights_plain, pd.weights_desc(), true);
    dst.prepare(dst_plain, pd.dst_desc(), false);
    has_bias = !bias_desc.is_zero();
    if (has_bias) bias = dnnl::memory(bias_desc, cpu_engine(), nullptr);
    scratchpad = dnnl::memory(pd.scratchpad_desc(), cpu_engine(), nullptr);
    args = {{DNNL_ARG_SRC, src.primitive_side().get()},
            {DNNL_ARG_WEIGHTS, weights.primitive_side().get()},
            {DNNL_ARG_DST, dst.primitive_side().get()},
            {DNNL_ARG_SCRATCHPAD, scratchpad.get()}};
    if (has_bias) args.push_back({DNNL_ARG_BIAS, bias.get()});
  }

  // Binds inputs (X, W[, B]) and output Y, reorders in, executes `primitive`, reorders out and waits.
  void run(const dnnl::primitive& primitive, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
    dnnl::stream& stream = cpu_stream();
    ScratchArena::Lease lease;
    for (Operand* o : {&src, &weights, &dst}) o->place(lease);
    scratchpad.set_data_handle(lease.take(scratchpad.get_desc().get_size()));
    src.bind(inputs[0].data);
    weights.bind(inputs[1].data);
    dst.bind(outputs[0].data);
    if (has_bias) bias.set_data_handle(inputs[2].data);
    src.run_reorder(stream);
    weights.run_reorder(stream);
    execute(primitive, stream, args);
    dst.run_reorder(stream);
    stream.wait();
  }
};

}  // namespace onnxtrain::onednn
