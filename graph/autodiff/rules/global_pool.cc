// GlobalAveragePool: dX = dY / (D1·…·Dn) expanded to X's shape. GlobalMaxPool: MaxPool with the whole
// plane as its window, so dX = MaxPoolGrad(dY, X) with kernel_shape = X's spatial sizes: on ties the
// first maximal element gets dY (as PyTorch's max_pool/adaptive_max_pool). Both need static spatial sizes.
#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {
namespace {

std::vector<int64_t> static_spatial_sizes(const GradientContext& ctx) {
  const Shape& x = ctx.shape(ctx.input(0));
  if (!x.rank_known || x.rank() < 3) ctx.fail("needs X (N,C,D1,...) of known rank, got " + x.to_string());
  std::vector<int64_t> sizes;
  for (int64_t d = 2; d < x.rank(); ++d) {
    if (!x.dims[d].is_static()) ctx.fail("needs static spatial sizes, got X " + x.to_string());
    sizes.push_back(x.dims[d].value());
  }
  return sizes;
}

}  // namespace

void global_average_pool_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  int64_t count = 1;
  for (int64_t s : static_spatial_sizes(ctx)) count *= s;
  ValueId x = ctx.input(0);
  ValueId scaled = ctx.emit("Mul", {ctx.output_grad(0), ctx.scalar(1.0 / static_cast<double>(count), ctx.dtype(x))});
  ctx.add_input_grad(0, ctx.emit("Expand", {scaled, ctx.shape_of(x)}));
}

void global_max_pool_gradient(GradientContext& ctx) {
  if (!ctx.needs_grad(0)) return;
  ctx.add_input_grad(0, ctx.emit_training("MaxPoolGrad", {ctx.output_grad(0), ctx.input(0)},
                                          {{"kernel_shape", static_spatial_sizes(ctx)}}));
}

}  // namespace onnxtrain::gradient_rules
