// Mod (opset 10, 13: adds bfloat16): the elementwise remainder of A by B with numpy broadcasting, both of
// one numeric type; attribute fmod 0 (default, integers only: the divisor's sign) or 1 (the dividend's,
// as C's fmod; ONNX requires it for floating-point inputs). TorchScript exports of torchvision's
// VisionTransformer compute attention shapes with Mod on int64 constants, so it folds constants too.
// No gradient rule: a Mod on trained values is refused when the training graph is built.
#include <string>

#include "graph/onnx_mod.h"
#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"

namespace onnxtrain {
namespace {

using namespace op_helpers;

bool fmod_attribute(const Node& node) { return node.attr_int("fmod", 0) != 0; }

// Known values (shape arithmetic) where both are known sizes: for non-negative operands both modes agree.
Dim dim_mod(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static() && a.value() >= 0 && b.value() > 0) return a.value() % b.value();
  return Dim::unknown();
}

void infer_mod(InferContext& ctx) {
  require_numeric(ctx, 0);
  require_numeric(ctx, 1);
  require_same_dtype(ctx, 1, 0);
  const std::string bad = onnx_mod_fmod_error(ctx.node().attr_int("fmod", 0), is_floating(ctx.input_dtype(0)));
  if (!bad.empty()) fail_op(ctx, bad);
  Shape out = broadcast_or_fail(ctx, ctx.input_shape(0), ctx.input_shape(1));
  auto known = combine_known(ctx, out, {0, 1}, &dim_mod);
  ctx.set_output(0, ctx.input_dtype(0), out);
  if (known) ctx.set_output_known(0, std::move(*known));
}

std::vector<Tensor> fold_mod(const FoldContext& ctx) {
  const std::vector<Tensor> in = broadcast_inputs(ctx);  // both at the output sizes
  const bool fmod = fmod_attribute(ctx.node);
  std::vector<Tensor> result;
  visit_fold_type(in[0].dtype(), [&](auto zero) {  // declines float16/bfloat16: the node stays
    using T = decltype(zero);
    const auto a = elements_as<T>(in[0]), b = elements_as<T>(in[1]);
    std::vector<T> out(a.size());
    for (size_t i = 0; i < out.size(); ++i) {
      if (std::is_integral_v<T> && b[i] == 0) fail_fold(ctx, "integer modulo by zero");
      out[i] = onnx_mod(a[i], b[i], fmod);
    }
    result.push_back(tensor_from(in[0].dtype(), in[0].sizes(), out));
  });
  return result;
}

}  // namespace

void register_mod_op(OpRegistry& registry) {
  registry.add({.op_type = "Mod",
                .min_inputs = 2,
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::Data},
                .infer = infer_mod,
                .cost = &flops_per_output_element<1, 1>,
                .fold = fold_mod});
}

}  // namespace onnxtrain
