// ConvTranspose: Y[n,o,i·s - pb + k·d] += X[n,c,i]·W[c,o,k] (+ B). It is the data gradient of a Conv, so
// dX = Conv(dY, W) with the same strides, dilations, group and leading pads; dW is the weight gradient of
// that Conv with the roles of input and upstream gradient swapped, ConvGrad(dY=X, X=dY, W); dB = dY summed
// over all but the channel axis. The trailing pads of the Conv absorb output_padding (and output_shape).
#include <algorithm>

#include "graph/autodiff/rules/rules.h"

namespace onnxtrain::gradient_rules {
namespace {

int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0)) ? 1 : 0); }

// Conv attributes whose window maps dY (Y's sizes) back onto X's sizes: the leading pads the forward used
// (explicit, or resolved from auto_pad/output_shape as kernels/reference/conv_transpose.cc does), trailing
// pads chosen so that the Conv's output has exactly X's spatial sizes.
Attributes backward_conv_attributes(const GradientContext& ctx) {
  const Node& node = ctx.node();
  const Shape& x = ctx.shape(ctx.input(0));
  const Shape& w = ctx.shape(ctx.input(1));
  const Shape& y = ctx.shape(ctx.output(0));
  if (!x.rank_known || !w.rank_known || !y.rank_known || x.rank() < 3) {
    ctx.fail("needs the ranks of X, W and Y, got " + x.to_string() + ", " + w.to_string() + ", " + y.to_string());
  }
  const size_t n = static_cast<size_t>(x.rank() - 2);
  const std::vector<int64_t> strides = node.attr_ints("strides", std::vector<int64_t>(n, 1));
  const std::vector<int64_t> dilations = node.attr_ints("dilations", std::vector<int64_t>(n, 1));
  const std::vector<int64_t> output_padding = node.attr_ints("output_padding", std::vector<int64_t>(n, 0));
  const std::vector<int64_t> given_pads = node.attr_ints("pads", std::vector<int64_t>(2 * n, 0));
  std::string auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (node.has_attribute("pads")) auto_pad = "NOTSET";
  const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
  std::vector<int64_t> pads(2 * n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Dim& in = x.dims[i + 2];
    const Dim& out = y.dims[i + 2];
    const Dim& k = w.dims[i + 2];
    if (!in.is_static() || !out.is_static() || !k.is_static()) {
      ctx.fail("needs static spatial sizes, got X " + x.to_string() + ", W " + w.to_string() + ", Y " + y.to_string());
    }
    const int64_t s = strides[i];
    const int64_t dilated = (k.value() - 1) * dilations[i] + 1;
    int64_t begin = auto_pad == "VALID" ? 0 : given_pads[i];
    if (same || node.has_attribute("output_shape")) {
      const int64_t total = s * (in.value() - 1) + output_padding[i] + dilated - out.value();
      begin = auto_pad == "SAME_UPPER" ? floor_div(total, 2) : total - floor_div(total, 2);
    }
    // Conv output = floor((out + begin + end - dilated) / s) + 1 must be X's size `in`.
    const int64_t end = s * (in.value() - 1) + dilated - out.value() - begin;
    if (begin < 0 || end < -(s - 1)) {
      ctx.fail("the output on spatial axis " + std::to_string(i) + " (size " + std::to_string(out.value()) +
               ") extends beyond what the input reaches (output_padding or output_shape larger than the stride, or "
               "negative pads); this gradient is not supported");
    }
    pads[i] = begin;
    pads[i + n] = std::max<int64_t>(0, end);
  }
  Attributes attrs{
      {"strides", strides}, {"dilations", dilations}, {"pads", pads}, {"group", node.attr_int("group", 1)}};
  if (node.has_attribute("kernel_shape")) attrs["kernel_shape"] = node.attr_ints("kernel_shape");
  return attrs;
}

}  // namespace

void conv_transpose_gradient(GradientContext& ctx) {
  const bool dx = ctx.needs_grad(0), dw = ctx.needs_grad(1), db = ctx.needs_grad(2);
  if (!dx && !dw && !db) return;
  ValueId dy = ctx.output_grad(0);
  if (dx || dw) {
    const Attributes attrs = backward_conv_attributes(ctx);
    if (dx) ctx.add_input_grad(0, ctx.emit("Conv", {dy, ctx.input(1)}, attrs));
    if (dw) {
      ctx.add_input_grad(
          1, ctx.emit("ConvGrad", {ctx.input(0), dy, ctx.input(1)}, attrs, {false, true}, kTrainingDomain)[1]);
    }
  }
  if (db) {
    const Shape& s = ctx.shape(dy);
    if (!s.rank_known) ctx.fail("needs the rank of the output to sum the bias gradient");
    std::vector<int64_t> axes{0};
    for (int64_t a = 2; a < s.rank(); ++a) axes.push_back(a);
    ctx.add_input_grad(2, ctx.emit("ReduceSum", {dy, ctx.int64s(axes)}, {{"keepdims", int64_t{0}}}));
  }
}

}  // namespace onnxtrain::gradient_rules
