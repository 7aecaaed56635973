// Clip: y = min(max(x, lo), hi). dx = dy where lo <= x <= hi, else 0 (PyTorch: the gradient passes at the
// bounds). lo/hi are the optional scalar inputs 1 and 2 (opset 11+) or the min/max attributes before;
// they are never differentiated. Constant bounds make one ActivationGrad (activation "Clip").
#include <limits>
#include <optional>
#include <string>

#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {
namespace {

// The value of a bound that is a one-element constant (not a trained parameter), or nullopt.
std::optional<double> constant_bound(const GradientContext& ctx, ValueId bound) {
  if (!bound.valid()) return std::nullopt;
  const Value& v = ctx.value(bound);
  if (!v.data || v.role == ValueRole::Parameter || v.data->numel() != 1) return std::nullopt;
  return v.data->to_double().at(0);
}

}  // namespace

void clip_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId x = ctx.input(0);
  const DType type = ctx.dtype(x);
  ValueId lo, hi;
  if (ctx.node().opset >= 11) {
    if (ctx.has_input(1)) lo = ctx.input(1);
    if (ctx.has_input(2)) hi = ctx.input(2);
  } else {
    if (ctx.node().has_attribute("min")) lo = ctx.scalar(ctx.node().attr_float("min", 0), type);
    if (ctx.node().has_attribute("max")) hi = ctx.scalar(ctx.node().attr_float("max", 0), type);
  }
  ValueId dy = ctx.output_grad(0);
  if (!lo.valid() && !hi.valid()) {
    ctx.add_input_grad(0, dy);
    return;
  }
  // Constant bounds (ReLU6's 0 and 6): one fused ActivationGrad instead of four elementwise ops, where dY
  // has x's shape (a 0-D x under (1)-shaped bounds broadcasts).
  const std::optional<double> lo_value = constant_bound(ctx, lo), hi_value = constant_bound(ctx, hi);
  if ((!lo.valid() || lo_value) && (!hi.valid() || hi_value) && ctx.shape(x).rank_known &&
      ctx.shape(ctx.output(0)).rank_known && ctx.shape(ctx.output(0)).rank() == ctx.shape(x).rank()) {
    const double infinity = std::numeric_limits<double>::infinity();
    ctx.add_input_grad(0, ctx.emit_training("ActivationGrad", {dy, x},
                                            {{"activation", std::string("Clip")},
                                             {"alpha", lo_value.value_or(-infinity)},
                                             {"beta", hi_value.value_or(infinity)}}));
    return;
  }
  ValueId inside;
  if (lo.valid()) inside = ctx.emit("GreaterOrEqual", {x, lo});
  if (hi.valid()) {
    ValueId below_hi = ctx.emit("LessOrEqual", {x, hi});
    inside = inside.valid() ? ctx.emit("And", {inside, below_hi}) : below_hi;
  }
  // A 0-D x with a (1)-shaped bound broadcasts to (1): summed back to x's shape.
  ctx.add_broadcast_input_grad(0, ctx.emit("Where", {inside, dy, ctx.scalar(0, type)}));
}

}  // namespace onnxtrain::gradient_rules
