// Conv: Y = conv(X, W) + B. One ConvGrad node (onnxtrain's fused backward op) gives dX (dY convolved back
// through W), dW (X correlated with dY) and dB (dY summed over all but the channel axis), only those needed.
// It gets the forward attributes with auto_pad resolved to explicit pads where X's sizes are static.
#include <algorithm>

#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {
namespace {

// The node's attributes with auto_pad SAME_UPPER/SAME_LOWER/VALID turned into explicit pads, as
// graph/ops/op_helpers.h read_window and the kernels resolve them (explicit pads win over auto_pad). Left
// as they are when a spatial size is not static: the kernels resolve auto_pad from their fixed sizes.
Attributes with_explicit_pads(const GradientContext& ctx) {
  Attributes attrs = ctx.node().attributes;
  const std::string auto_pad = attrs.get_string("auto_pad", "NOTSET");
  if (auto_pad == "NOTSET" || attrs.has("pads")) {
    attrs.erase("auto_pad");
    return attrs;
  }
  const Shape& x = ctx.shape(ctx.input(0));
  const Shape& w = ctx.shape(ctx.input(1));
  if (!x.rank_known || !w.rank_known || x.rank() < 3) return attrs;
  const size_t n = static_cast<size_t>(x.rank() - 2);
  const std::vector<int64_t> strides = attrs.get_ints("strides", std::vector<int64_t>(n, 1));
  const std::vector<int64_t> dilations = attrs.get_ints("dilations", std::vector<int64_t>(n, 1));
  std::vector<int64_t> pads(2 * n, 0);
  if (auto_pad != "VALID") {
    for (size_t i = 0; i < n; ++i) {
      const Dim& in = x.dims[i + 2];
      const Dim& k = w.dims[i + 2];
      if (!in.is_static() || !k.is_static()) return attrs;
      const int64_t out = (in.value() + strides[i] - 1) / strides[i];
      const int64_t dilated = (k.value() - 1) * dilations[i] + 1;
      const int64_t total = std::max<int64_t>(0, (out - 1) * strides[i] + dilated - in.value());
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + n] = total - pads[i];
    }
  }
  attrs.erase("auto_pad");
  attrs["pads"] = pads;
  return attrs;
}

}  // namespace

void conv_gradient(GradientContext& ctx) {
  const bool dx = ctx.needs_grad(0), dw = ctx.needs_grad(1), db = ctx.needs_grad(2);
  if (!dx && !dw && !db) return;
  std::vector<ValueId> grads = ctx.emit("ConvGrad", {ctx.output_grad(0), ctx.input(0), ctx.input(1)},
                                        with_explicit_pads(ctx), {dx, dw, db}, kTrainingDomain);
  if (dx) ctx.add_input_grad(0, grads[0]);
  if (dw) ctx.add_input_grad(1, grads[1]);
  if (db) ctx.add_input_grad(2, grads[2]);
}

}  // namespace onnxtrain::gradient_rules
