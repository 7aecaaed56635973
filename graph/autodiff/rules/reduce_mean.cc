// ReduceMean: y = sum(x) / n over the reduced axes, so dx = dy / n broadcast back to x's shape (n = the
// number of input elements per output element; Size(x) / Size(y) when the reduced dims are not static).
#include "graph/autodiff/rules/reduce_common.h"
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {

void reduce_mean_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ValueId dy = ctx.output_grad(0);
  if (is_identity_reduction(ctx)) return ctx.add_input_grad(0, dy);
  const Shape& x = ctx.shape(ctx.input(0));
  const DType dtype = ctx.dtype(dy);
  bool known = true;
  double count = 1;
  for (int64_t a : reduced_axes(ctx)) {
    if (!x.dims[a].is_static())
      known = false;
    else
      count *= static_cast<double>(x.dims[a].value());
  }
  ValueId n;
  if (known) {
    n = ctx.scalar(count, dtype);
  } else {
    ValueId sizes = ctx.emit("Div", {ctx.emit("Size", {ctx.input(0)}), ctx.emit("Size", {ctx.output(0)})});
    n = ctx.emit("CastLike", {sizes, dy});
  }
  ctx.add_input_grad(0, broadcast_to_input(ctx, ctx.emit("Div", {dy, n})));
}

}  // namespace onnxtrain::gradient_rules
