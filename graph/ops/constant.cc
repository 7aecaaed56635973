// Constant (value, value_float(s), value_int(s); string and sparse values are unsupported),
// ConstantOfShape (opset 9: fill a shape given as an input) and Range (opset 11). A Range over a symbolic
// limit (Range(0, Gather(Shape(x), 1), 1) in transformer exports) keeps the symbol as its length.
#include <cmath>
#include <limits>

#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using namespace shape_ops;

// The tensor of a Constant node, or an empty tensor with `error` set.
Tensor constant_tensor(const Node& node, std::string& error) {
  static const char* kKeys[] = {"value",      "value_float",  "value_floats",  "value_int",
                                "value_ints", "value_string", "value_strings", "sparse_value"};
  int given = 0;
  for (const char* key : kKeys) given += node.has_attribute(key);
  if (given != 1) {
    error = "exactly one value attribute is required, got " + std::to_string(given);
    return {};
  }
  if (node.has_attribute("sparse_value")) {
    error = "sparse constants (sparse_value) are not supported";
  } else if (node.has_attribute("value_string") || node.has_attribute("value_strings")) {
    error = "string constants are not supported";
  } else if (node.has_attribute("value")) {
    if (const Tensor* t = node.attr_tensor("value")) return t->clone();
    error = "the value attribute is not a tensor onnxtrain can read";
  } else if (node.has_attribute("value_float") || node.has_attribute("value_floats")) {
    bool scalar = node.has_attribute("value_float");
    std::vector<double> values =
        scalar ? std::vector<double>{node.attr_float("value_float", 0)} : node.attr_floats("value_floats");
    Tensor t(DType::Float32,
             scalar ? std::vector<int64_t>{} : std::vector<int64_t>{static_cast<int64_t>(values.size())});
    for (size_t i = 0; i < values.size(); ++i) write_from_double(t, static_cast<int64_t>(i), values[i]);
    return t;
  } else if (node.has_attribute("value_int")) {
    return Tensor::scalar_int64(node.attr_int("value_int", 0));
  } else {
    return Tensor::vector_int64(node.attr_ints("value_ints"));
  }
  return {};
}

void set_known_from_tensor(InferContext& ctx, size_t i, const Tensor& t) {
  if (!is_int_or_bool(t.dtype()) || t.rank() > 1 || t.numel() > static_cast<int64_t>(kMaxKnownElements)) return;
  std::vector<Dim> values;
  for (int64_t v : t.to_int64()) values.emplace_back(v);
  set_known_output(ctx, i, t.dtype(), values);
}

void infer_constant(InferContext& ctx) {
  std::string error;
  Tensor t = constant_tensor(ctx.node(), error);
  if (!error.empty()) fail_op(ctx, error);
  ctx.set_output(0, t.dtype(), Shape::of(t.sizes()));
  set_known_from_tensor(ctx, 0, t);
}

std::vector<Tensor> fold_constant(const FoldContext& ctx) {
  std::string error;
  Tensor t = constant_tensor(ctx.node, error);
  if (!error.empty()) fail_fold(ctx, error);
  return {t};
}

// ConstantOfShape's fill value: a one-element tensor, float32 0 by default.
Tensor fill_value(const Node& node) {
  if (const Tensor* t = node.attr_tensor("value")) return *t;
  return Tensor(DType::Float32, {1});
}

void infer_constant_of_shape(InferContext& ctx) {
  const Node& node = ctx.node();
  if (node.has_attribute("value") && (!node.attr_tensor("value") || node.attr_tensor("value")->numel() != 1)) {
    fail_op(ctx, "the value attribute must be a tensor with one element");
  }
  Tensor value = fill_value(node);
  const Shape& shape_shape = ctx.input_shape(0);
  if (shape_shape.rank_known && shape_shape.rank() != 1)
    fail_op(ctx, "the shape input must be 1-D, got " + shape_shape.to_string());
  auto target = ctx.input_known(0);
  if (!target) {
    bool rank_follows = shape_shape.rank_known && shape_shape.dims[0].is_static();
    ctx.set_output(0, value.dtype(),
                   rank_follows ? Shape(std::vector<Dim>(shape_shape.dims[0].value())) : Shape::unknown_rank());
    return;
  }
  for (const Dim& d : *target)
    if (d.is_static() && d.value() < 0) fail_op(ctx, "shape " + dims_to_string(*target) + " has a negative size");
  ctx.set_output(0, value.dtype(), Shape(*target));
  if (target->size() <= 1 && is_int_or_bool(value.dtype())) {
    auto count = static_values(*target);
    if (count && (count->empty() || (*count)[0] <= static_cast<int64_t>(kMaxKnownElements))) {
      set_known_output(ctx, 0, value.dtype(),
                       std::vector<Dim>(count->empty() ? 1 : (*count)[0], Dim(value.to_int64()[0])));
    }
  }
}

std::vector<Tensor> fold_constant_of_shape(const FoldContext& ctx) {
  Tensor value = fill_value(ctx.node);
  std::vector<int64_t> sizes = ctx.input_ints(0);
  for (int64_t s : sizes)
    if (s < 0) fail_fold(ctx, "shape " + ints_to_string(sizes) + " has a negative size");
  Tensor out(value.dtype(), sizes);
  for (int64_t i = 0; i < out.numel(); ++i) copy_element(value, 0, out, i);
  return {out};
}

// Element count of Range: max(ceil((limit - start) / delta), 0).
// Lengths beyond int64 (start and limit at opposite ends of the type) are clamped to its maximum, which
// no allocation can meet, so the caller fails on the size instead of wrapping around to a small one.
int64_t range_length_int(int64_t start, int64_t limit, int64_t delta) {
  __int128 distance = static_cast<__int128>(limit) - start, length = 0;
  if (delta > 0 && distance > 0) length = (distance + delta - 1) / delta;
  if (delta < 0 && distance < 0) length = (distance + delta + 1) / delta;
  return static_cast<int64_t>(std::min<__int128>(length, std::numeric_limits<int64_t>::max()));
}

int64_t range_length_float(double start, double limit, double delta) {
  double length = std::ceil((limit - start) / delta);
  if (!(length > 0)) return 0;  // NaN included
  return length >= 0x1p63 ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(length);
}

// Element i of an integer Range: start + i·delta, which lies between start and limit and so fits int64,
// though i·delta alone may not (a fuzzer's start -2^63, limit 2^63 - 1, delta 4.6e18: 3·delta overflowed).
int64_t range_element(int64_t start, int64_t i, int64_t delta) {
  return static_cast<int64_t>(static_cast<__int128>(start) + static_cast<__int128>(i) * delta);
}

void infer_range(InferContext& ctx) {
  DType dtype = ctx.input_dtype(0);
  static const char* kNames[] = {"start", "limit", "delta"};
  for (size_t i = 0; i < 3; ++i) {
    require_same_dtype(ctx, i);
    const Shape& s = ctx.input_shape(i);
    if (s.rank_known && !(s.rank() == 0 || (s.rank() == 1 && s.dims[0] == Dim(1)))) {
      fail_op(ctx, std::string(kNames[i]) + " must be a scalar, got shape " + s.to_string());
    }
  }
  if (!is_integer(dtype) && !is_floating(dtype))
    fail_op(ctx, "inputs must be numbers, got " + std::string(dtype_name(dtype)));
  Dim length;
  if (is_floating(dtype)) {
    const Tensor *start = ctx.input_constant(0), *limit = ctx.input_constant(1), *delta = ctx.input_constant(2);
    if (start && limit && delta) {
      if (read_as_double(*delta, 0) == 0) fail_op(ctx, "delta must be non-zero");
      length = range_length_float(read_as_double(*start, 0), read_as_double(*limit, 0), read_as_double(*delta, 0));
    }
  } else {
    auto start = ctx.input_known(0), limit = ctx.input_known(1), delta = ctx.input_known(2);
    if (start && limit && delta && start->size() == 1 && limit->size() == 1 && delta->size() == 1) {
      const Dim &s = (*start)[0], &l = (*limit)[0], &d = (*delta)[0];
      if (d == Dim(0)) fail_op(ctx, "delta must be non-zero");
      if (s.is_static() && l.is_static() && d.is_static()) {
        length = range_length_int(s.value(), l.value(), d.value());
        if (length.value() <= static_cast<int64_t>(kMaxKnownElements)) {
          std::vector<Dim> values;
          for (int64_t i = 0; i < length.value(); ++i) values.emplace_back(range_element(s.value(), i, d.value()));
          set_known_output(ctx, 0, dtype, values);
        }
      } else if (d == Dim(1)) {
        length = l - s;  // a symbolic length; Dim arithmetic leaves it unknown where it cannot say
      }
    }
  }
  ctx.set_output(0, dtype, Shape({length}));
}

std::vector<Tensor> fold_range(const FoldContext& ctx) {
  const Tensor &start = ctx.inputs[0], &limit = ctx.inputs[1], &delta = ctx.inputs[2];
  DType dtype = start.dtype();
  if (is_floating(dtype)) {
    double s = read_as_double(start, 0), d = read_as_double(delta, 0);
    if (d == 0) fail_fold(ctx, "delta must be non-zero");
    Tensor out(dtype, {range_length_float(s, read_as_double(limit, 0), d)});
    for (int64_t i = 0; i < out.numel(); ++i) write_from_double(out, i, s + static_cast<double>(i) * d);
    return {out};
  }
  int64_t s = read_as_int64(start, 0), d = read_as_int64(delta, 0);
  if (d == 0) fail_fold(ctx, "delta must be non-zero");
  Tensor out(dtype, {range_length_int(s, read_as_int64(limit, 0), d)});
  for (int64_t i = 0; i < out.numel(); ++i) write_from_int64(out, i, range_element(s, i, d));
  return {out};
}

}  // namespace

void register_constant_ops(OpRegistry& registry) {
  registry.add({.op_type = "Constant",
                .min_inputs = 0,
                .max_inputs = 0,
                .infer = infer_constant,
                .cost = no_flops,
                .fold = fold_constant});
  registry.add({.op_type = "ConstantOfShape",
                .input_kinds = {InputKind::NonDifferentiable},
                .infer = infer_constant_of_shape,
                .cost = no_flops,
                .fold = fold_constant_of_shape});
  registry.add({.op_type = "Range",
                .min_inputs = 3,
                .max_inputs = 3,
                .input_kinds = {InputKind::NonDifferentiable},
                .infer = infer_range,
                .cost = no_flops,
                .fold = fold_range});
}

}  // namespace onnxtrain
