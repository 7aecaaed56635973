// Reshape (opset 1: `shape` attribute, 5: `shape` input, 14: allowzero) and Flatten. The target shape
// may hold symbols (from Shape → Gather → Concat chains): 0 copies an input dim, -1 takes what is left,
// which Dim arithmetic expresses symbolically: (N,16,7,7) → (-1,784) gives (N,784).
#include <algorithm>

#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using namespace shape_ops;

constexpr int kShapeInputSince = 5;
constexpr int kAllowZeroSince = 14;

// True when `a` elements can never equal `b` elements, whatever the symbols are bound to.
bool counts_differ(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return a.value() != b.value();
  if (a.is_symbolic() && b.is_static()) return b.value() != 0 && b.value() % a.factor() != 0;
  if (a.is_static() && b.is_symbolic()) return counts_differ(b, a);
  if (a.is_symbolic() && b.is_symbolic() && a.symbol_name() == b.symbol_name()) return a.factor() != b.factor();
  return false;
}

// True when `total` elements can never be a whole multiple of `part`.
bool never_divisible(const Dim& total, const Dim& part) {
  if (total.is_static() && part.is_static()) return part.value() != 0 && total.value() % part.value() != 0;
  if (total.is_static() && part.is_symbolic()) return total.value() != 0 && total.value() % part.factor() != 0;
  if (total.is_symbolic() && part.is_symbolic() && total.symbol_name() == part.symbol_name()) {
    return total.factor() % part.factor() != 0;
  }
  return false;
}

void infer_reshape(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  DType dtype = ctx.input_dtype(0);
  std::optional<std::vector<Dim>> target;
  if (ctx.opset() < kShapeInputSince) {
    if (!ctx.node().has_attribute("shape")) fail_op(ctx, "the shape attribute is required");
    target.emplace();
    for (int64_t v : ctx.node().attr_ints("shape")) target->emplace_back(v);
  } else {
    if (!ctx.has_input(1)) fail_op(ctx, "the shape input is required");
    const Shape& shape_shape = ctx.input_shape(1);
    if (shape_shape.rank_known && shape_shape.rank() != 1)
      fail_op(ctx, "shape must be 1-D, got " + shape_shape.to_string());
    target = ctx.input_known(1);
    if (!target) {
      bool rank_follows = shape_shape.rank_known && shape_shape.dims[0].is_static();
      ctx.set_output(0, dtype,
                     rank_follows ? Shape(std::vector<Dim>(shape_shape.dims[0].value())) : Shape::unknown_rank());
      return;
    }
  }
  const bool allow_zero = ctx.opset() >= kAllowZeroSince && ctx.node().attr_int("allowzero", 0) != 0;
  const std::string request = "reshape " + in.to_string() + " to " + dims_to_string(*target);
  std::vector<Dim> out;
  std::optional<size_t> inferred;
  bool has_zero = false;
  for (size_t i = 0; i < target->size(); ++i) {
    const Dim& d = (*target)[i];
    if (!d.is_static()) {
      out.push_back(d);
    } else if (d.value() == -1) {
      if (inferred) fail_op(ctx, "cannot " + request + ": more than one -1");
      inferred = i;
      out.push_back(Dim::unknown());
    } else if (d.value() < -1) {
      fail_op(ctx, "cannot " + request + ": invalid size " + std::to_string(d.value()));
    } else if (d.value() == 0 && !allow_zero) {
      if (in.rank_known && static_cast<int64_t>(i) >= in.rank()) {
        fail_op(ctx, "cannot " + request + ": 0 at position " + std::to_string(i) + " copies an input dim that " +
                         "does not exist (input rank " + std::to_string(in.rank()) + ")");
      }
      out.push_back(in.rank_known ? in.dims[i] : Dim::unknown());
    } else {
      has_zero = has_zero || d.value() == 0;
      out.push_back(d);
    }
  }
  if (allow_zero && has_zero && inferred)
    fail_op(ctx, "cannot " + request + ": with allowzero=1 the shape cannot hold both 0 and -1");
  if (in.rank_known) {
    const Dim total = dims_product(in.dims);
    if (inferred) {
      // Dims the input and the target share cancel first, so (batch, seq) → (-1, seq) gives batch, which
      // Dim arithmetic (one symbol per dim) cannot get from batch·seq / seq.
      std::vector<Dim> remaining = in.dims;
      Dim others(1), other_remaining(1);
      for (size_t i = 0; i < out.size(); ++i) {
        if (i == *inferred) continue;
        others = others * out[i];
        auto same = std::find(remaining.begin(), remaining.end(), out[i]);
        if (out[i].is_symbolic() && same != remaining.end())
          remaining.erase(same);
        else
          other_remaining = other_remaining * out[i];
      }
      if (never_divisible(total, others)) {
        fail_op(ctx, "cannot " + request + ": " + total.to_string() + " elements are not a multiple of " +
                         others.to_string());
      }
      out[*inferred] = total.divide_exact(others);
      if (out[*inferred].is_unknown()) out[*inferred] = dims_product(remaining).divide_exact(other_remaining);
    } else if (counts_differ(total, dims_product(out))) {
      fail_op(ctx, "cannot " + request + ": " + total.to_string() + " elements vs " + dims_product(out).to_string());
    }
  }
  ctx.set_output(0, dtype, Shape(out));
  if (auto known = ctx.input_known(0); known && out.size() <= 1) set_known_output(ctx, 0, dtype, *known);
}

std::vector<Tensor> fold_reshape(const FoldContext& ctx) {
  const Tensor& data = ctx.inputs[0];
  std::vector<int64_t> target = ctx.node.opset < kShapeInputSince ? ctx.node.attr_ints("shape") : ctx.input_ints(1);
  const bool allow_zero = ctx.node.opset >= kAllowZeroSince && ctx.node.attr_int("allowzero", 0) != 0;
  int64_t known_product = 1;
  std::optional<size_t> inferred;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allow_zero) {
      if (static_cast<int64_t>(i) >= data.rank()) fail_fold(ctx, "0 copies a dim the input does not have");
      target[i] = data.sizes()[i];
    }
    if (target[i] == -1)
      inferred = i;
    else
      known_product *= target[i];
  }
  if (inferred) {
    if (known_product == 0 || data.numel() % known_product != 0) fail_fold(ctx, "cannot infer the -1 dim");
    target[*inferred] = data.numel() / known_product;
  }
  if (Shape::of(target).numel() != data.numel()) {
    fail_fold(ctx, "cannot reshape " + ints_to_string(data.sizes()) + " to " + ints_to_string(target));
  }
  return {data.clone().reshaped(target)};
}

// Flatten's split point in [0, rank] (negative since opset 11); nullopt when out of range.
std::optional<int64_t> flatten_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis > rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

void infer_flatten(InferContext& ctx) {
  const Shape& in = ctx.input_shape(0);
  const int64_t axis_attr = ctx.node().attr_int("axis", 1);
  if (!in.rank_known) {
    ctx.set_output(0, ctx.input_dtype(0), Shape({axis_attr == 0 ? Dim(1) : Dim::unknown(), Dim::unknown()}));
    return;
  }
  auto axis = flatten_axis(axis_attr, in.rank());
  if (!axis) {
    fail_op(ctx, "axis " + std::to_string(axis_attr) + " is out of range for rank " + std::to_string(in.rank()) +
                     " (expected " + std::to_string(-in.rank()) + ".." + std::to_string(in.rank()) + ")");
  }
  const auto split = static_cast<size_t>(*axis);
  ctx.set_output(0, ctx.input_dtype(0),
                 Shape({dims_product(in.dims, 0, split), dims_product(in.dims, split, in.dims.size())}));
}

std::vector<Tensor> fold_flatten(const FoldContext& ctx) {
  const Tensor& data = ctx.inputs[0];
  auto axis = flatten_axis(ctx.node.attr_int("axis", 1), data.rank());
  if (!axis) fail_fold(ctx, "axis is out of range for rank " + std::to_string(data.rank()));
  int64_t rows = 1, columns = 1;
  for (int64_t k = 0; k < data.rank(); ++k) (k < *axis ? rows : columns) *= data.sizes()[k];
  return {data.clone().reshaped({rows, columns})};
}

}  // namespace

void register_reshape_ops(OpRegistry& registry) {
  registry.add({.op_type = "Reshape",
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_reshape,
                .cost = no_flops,
                .fold = fold_reshape});
  registry.add({.op_type = "Flatten",
                .input_kinds = {InputKind::Data},
                .infer = infer_flatten,
                .cost = no_flops,
                .fold = fold_flatten});
}

}  // namespace onnxtrain
