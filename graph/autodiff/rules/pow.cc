// Pow: y = a^b (numpy broadcasting). da = dy * b * a^(b-1), zero where b == 0; db = dy * y * log(a), zero
// where a == 0 and b >= 0 (PyTorch's masks: no 0 * inf there). Each is summed down to its input's shape;
// an integer exponent is cast to the base's type and never differentiated.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

namespace {

// Whether `v` is a constant tensor without a zero element (the mask on b == 0 can be left out).
bool constant_without_zeros(const GradientContext& ctx, ValueId v) {
  const Value& value = ctx.value(v);
  if (!value.data || (value.role != ValueRole::Constant && value.role != ValueRole::Buffer)) return false;
  for (double x : value.data->to_double())
    if (x == 0) return false;
  return true;
}

}  // namespace

void pow_gradient(GradientContext& ctx) {
  ValueId dy = ctx.output_grad(0);
  ValueId a = ctx.input(0);
  ValueId b = ctx.input(1);
  const DType type = ctx.dtype(a);
  ValueId zero = ctx.scalar(0, type);
  if (ctx.needs_grad(0)) {
    const bool mask = !constant_without_zeros(ctx, b);
    ValueId bf = ctx.dtype(b) == type ? b : ctx.emit("CastLike", {b, a});
    ValueId slope = ctx.emit("Mul", {bf, ctx.emit("Pow", {a, ctx.emit("Sub", {bf, ctx.scalar(1, type)})})});
    ValueId da = ctx.emit("Mul", {dy, slope});
    if (mask) da = ctx.emit("Where", {ctx.emit("Equal", {bf, zero}), zero, da});
    ctx.add_broadcast_input_grad(0, da);
  }
  if (ctx.needs_grad(1)) {
    ValueId db = ctx.emit("Mul", {dy, ctx.emit("Mul", {ctx.output(0), ctx.emit("Log", {a})})});
    ValueId base_zero = ctx.emit("And", {ctx.emit("Equal", {a, zero}), ctx.emit("GreaterOrEqual", {b, zero})});
    ctx.add_broadcast_input_grad(1, ctx.emit("Where", {base_zero, zero, db}));
  }
}

}  // namespace onnxtrain::gradient_rules
