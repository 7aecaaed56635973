#include "graph/ops/op_helpers.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "graph/ops/data_movement_fold.h"

namespace onnxtrain::op_helpers {

void fail_op(const InferContext& ctx, const std::string& message) { ctx.fail(ctx.node().op_type + ": " + message); }

static std::string input_label(const InferContext& ctx, size_t i) {
  return "input " + std::to_string(i) + " ('" + ctx.input(i).name + "')";
}

void require_numeric(const InferContext& ctx, size_t i) {
  DType t = ctx.input_dtype(i);
  if (t == DType::Bool || t == DType::String || t == DType::Complex64 || t == DType::Complex128) {
    fail_op(ctx, input_label(ctx, i) + " must be a numeric tensor, got " + std::string(dtype_name(t)));
  }
}

void require_floating(const InferContext& ctx, size_t i) {
  if (!is_floating(ctx.input_dtype(i))) {
    fail_op(ctx, input_label(ctx, i) + " must be a floating-point tensor, got " +
                     std::string(dtype_name(ctx.input_dtype(i))));
  }
}

void require_integer(const InferContext& ctx, size_t i) {
  if (!is_integer(ctx.input_dtype(i))) {
    fail_op(ctx,
            input_label(ctx, i) + " must be an integer tensor, got " + std::string(dtype_name(ctx.input_dtype(i))));
  }
}

void require_same_dtype(const InferContext& ctx, size_t i, size_t reference) {
  if (ctx.input_dtype(i) != ctx.input_dtype(reference)) {
    fail_op(ctx, "input " + std::to_string(i) + " has dtype " + std::string(dtype_name(ctx.input_dtype(i))) +
                     ", expected " + std::string(dtype_name(ctx.input_dtype(reference))) + " like input " +
                     std::to_string(reference) + " (inputs must have the same type)");
  }
}

bool is_int_or_bool(DType dtype) { return is_integer(dtype) || dtype == DType::Bool; }

void require_scalar(const InferContext& ctx, size_t input, const std::string& what) {
  const Shape& s = ctx.input_shape(input);
  auto numel = s.numel();
  if (s.rank_known && !(s.rank() == 0 || (numel && *numel == 1))) {
    fail_op(ctx, what + " must be a scalar, got shape " + s.to_string());
  }
}

void require_vector_of(const InferContext& ctx, size_t i, const char* what, const Dim& size,
                       const std::string& size_origin) {
  const Shape& s = ctx.input_shape(i);
  if (!s.rank_known) return;
  bool ok = s.rank() == 1 && !(s.dims[0].is_static() && size.is_static() && s.dims[0].value() != size.value());
  if (!ok) {
    fail_op(ctx, std::string(what) + " has shape " + s.to_string() + " but must be (" + size.to_string() + "), " +
                     size_origin);
  }
}

void require_spatial_input(const InferContext& ctx, const Shape& x) {
  if (x.rank_known && x.rank() < 3) {
    fail_op(ctx, "input must be (N,C,D1,...) with at least one spatial dim, got shape " + x.to_string());
  }
}

void check_scatter_reduction(const InferContext& ctx) {
  const std::string reduction = ctx.node().attr_string("reduction", "none");
  if (reduction == "none") return;
  const bool arithmetic = reduction == "add" || reduction == "mul";
  const bool extremum = reduction == "max" || reduction == "min";
  if (ctx.opset() < 16 || (!arithmetic && !extremum)) {
    fail_op(ctx, "reduction '" + reduction + "' is not defined at opset " + std::to_string(ctx.opset()) +
                     " (none; from 16 add and mul; from 18 max and min)");
  }
  if (extremum && ctx.opset() < 18)
    fail_op(ctx, "reduction '" + reduction + "' needs opset 18, the model has " + std::to_string(ctx.opset()));
  if (ctx.input_dtype(0) == DType::Bool) fail_op(ctx, "reduction '" + reduction + "' is not defined on bool data");
}

bool is_static_value(const Dim& d, int64_t value) { return d.is_static() && d.value() == value; }

std::string dims_to_string(const std::vector<Dim>& dims) { return Shape(dims).to_string(); }

std::string ints_to_string(const std::vector<int64_t>& values) { return Shape::of(values).to_string(); }

int64_t checked_axis(const InferContext& ctx, int64_t axis, int64_t rank) {
  auto a = normalize_axis(axis, rank);
  if (!a) {
    fail_op(ctx, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank) +
                     (rank > 0 ? " (expected " + std::to_string(-rank) + ".." + std::to_string(rank - 1) + ")"
                               : " (a scalar has no axes)"));
  }
  return *a;
}

std::vector<int64_t> checked_axes(const InferContext& ctx, const std::vector<int64_t>& axes, int64_t rank) {
  std::vector<int64_t> normalized;
  std::set<int64_t> seen;
  for (int64_t axis : axes) {
    int64_t a = checked_axis(ctx, axis, rank);
    if (!seen.insert(a).second) {
      fail_op(ctx, "axis " + std::to_string(axis) + " is given twice in " + ints_to_string(axes) +
                       " (axes must not be repeated)");
    }
    normalized.push_back(a);
  }
  return normalized;
}

Shape broadcast_or_fail(const InferContext& ctx, const Shape& a, const Shape& b) {
  auto out = broadcast_shapes(a, b);
  if (!out) fail_op(ctx, "cannot broadcast shapes " + a.to_string() + " and " + b.to_string());
  return *out;
}

bool broadcasts_onto(const Shape& s, const Shape& target) {
  if (s.rank() > target.rank()) return false;
  for (int64_t i = 0; i < s.rank(); ++i) {
    const Dim& sd = s.dims[i];
    const Dim& td = target.dims[i + target.rank() - s.rank()];
    if (sd.is_static() && sd.value() != 1 && td.is_static() && sd.value() != td.value()) return false;
  }
  return true;
}

std::optional<std::vector<std::vector<Dim>>> known_operands(const InferContext& ctx, const Shape& out,
                                                            const std::vector<size_t>& inputs) {
  if (!out.rank_known || out.rank() > 1 || (out.rank() == 1 && !out.dims[0].is_static())) return std::nullopt;
  const size_t n = out.rank() == 0 ? 1 : static_cast<size_t>(out.dims[0].value());
  std::vector<std::vector<Dim>> operands;
  for (size_t i : inputs) {
    auto known = ctx.input_known(i);
    if (!known || (known->size() != 1 && known->size() != n)) return std::nullopt;
    if (known->size() == 1) known->resize(n, known->front());
    operands.push_back(std::move(*known));
  }
  return operands;
}

std::optional<std::vector<Dim>> combine_known(const InferContext& ctx, const Shape& out,
                                              const std::vector<size_t>& inputs,
                                              Dim (*combine)(const Dim&, const Dim&)) {
  if (inputs.empty() || !is_integer(ctx.input_dtype(inputs[0])) || !out.rank_known || out.rank() > 1)
    return std::nullopt;
  if (out.rank() == 1 && !out.dims[0].is_static()) return std::nullopt;
  const size_t length = out.rank() == 0 ? 1 : static_cast<size_t>(out.dims[0].value());
  if (length > kMaxKnownElements) return std::nullopt;
  auto operands = known_operands(ctx, out, inputs);
  if (!operands) return std::nullopt;
  std::vector<Dim> result = (*operands)[0];
  for (size_t k = 1; k < operands->size(); ++k) {
    for (size_t j = 0; j < length; ++j) result[j] = combine(result[j], (*operands)[k][j]);
  }
  return result;
}

Dim dim_max(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return std::max(a.value(), b.value());
  return a == b ? a : Dim::unknown();
}

Dim dim_min(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return std::min(a.value(), b.value());
  return a == b ? a : Dim::unknown();
}

Dim dim_div(const Dim& a, const Dim& b) {
  if (a.is_static() && b.is_static()) return b.value() == 0 ? Dim::unknown() : Dim(a.value() / b.value());
  return a.divide_exact(b);
}

Dim dim_pow(const Dim& a, const Dim& b) {
  if (!a.is_static() || !b.is_static() || b.value() < 0) return is_static_value(b, 1) ? a : Dim::unknown();
  int64_t r = 1;
  for (int64_t i = 0; i < b.value(); ++i) r *= a.value();
  return r;
}

WindowSpec read_window(const InferContext& ctx, size_t spatial, std::vector<Dim> kernel) {
  const Node& node = ctx.node();
  WindowSpec w;
  w.kernel = std::move(kernel);
  auto read = [&](const char* name, std::vector<int64_t> fallback, size_t count, int64_t min_value) {
    std::vector<int64_t> v = node.attr_ints(name, fallback);
    if (v.size() != count) {
      fail_op(ctx, std::string(name) + " has " + std::to_string(v.size()) + " values but the input has " +
                       std::to_string(spatial) + " spatial dims (expected " + std::to_string(count) + ")");
    }
    for (int64_t x : v) {
      if (x < min_value)
        fail_op(ctx, std::string(name) + " must be >= " + std::to_string(min_value) + ", got " + std::to_string(x));
    }
    return v;
  };
  w.strides = read("strides", std::vector<int64_t>(spatial, 1), spatial, 1);
  w.dilations = read("dilations", std::vector<int64_t>(spatial, 1), spatial, 1);
  w.auto_pad = node.attr_string("auto_pad", "NOTSET");
  if (w.auto_pad != "NOTSET" && w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER" && w.auto_pad != "VALID") {
    fail_op(ctx, "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" + w.auto_pad + "'");
  }
  // As in ONNX's own inference, explicit pads take precedence over auto_pad.
  if (node.has_attribute("pads")) w.auto_pad = "NOTSET";
  w.pads = read("pads", std::vector<int64_t>(2 * spatial, 0), 2 * spatial, 0);
  w.ceil_mode = node.attr_int("ceil_mode", 0) != 0;
  if (w.kernel.size() != spatial) {
    fail_op(ctx, "kernel_shape has " + std::to_string(w.kernel.size()) + " values but the input has " +
                     std::to_string(spatial) + " spatial dims");
  }
  for (const Dim& k : w.kernel) {
    if (k.is_static() && k.value() < 1) fail_op(ctx, "kernel sizes must be >= 1, got " + k.to_string());
  }
  return w;
}

Dim window_output_dim(const InferContext& ctx, const Dim& in, size_t axis, const WindowSpec& w) {
  const int64_t stride = w.strides[axis];
  if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
    if (in.is_static()) return (in.value() + stride - 1) / stride;
    return in.divide_exact(stride);
  }
  const Dim& k = w.kernel[axis];
  if (!k.is_static()) return Dim::unknown();
  const int64_t effective = (k.value() - 1) * w.dilations[axis] + 1;
  const bool valid = w.auto_pad == "VALID";
  const int64_t pad_begin = valid ? 0 : w.pads[axis];
  const int64_t pads = valid ? 0 : w.pads[axis] + w.pads[axis + w.kernel.size()];
  if (!in.is_static()) return stride == 1 && pads + 1 == effective ? in : Dim::unknown();
  const int64_t span = in.value() + pads - effective;
  if (span < 0) {
    fail_op(ctx, "the window (kernel " + std::to_string(k.value()) + ", dilated to " + std::to_string(effective) +
                     ") is larger than the padded input (" + std::to_string(in.value() + pads) + ") on spatial axis " +
                     std::to_string(axis));
  }
  const int64_t floor_out = span / stride + 1;
  if (!w.ceil_mode) return floor_out;
  // The extra ceil-mode window must start inside the input or its leading padding (PyTorch, ONNX 1.16+).
  int64_t out = (span + stride - 1) / stride + 1;
  if (out > floor_out && (out - 1) * stride >= in.value() + pad_begin) --out;
  return out;
}

int64_t kernel_volume(const std::vector<Dim>& kernel) {
  int64_t v = 1;
  for (const Dim& k : kernel) {
    if (!k.is_static()) return 0;
    v *= k.value();
  }
  return v;
}

SoftmaxAxes softmax_axes(const Node& node, int64_t rank) {
  const bool coerced = node.opset < 13;
  int64_t axis = node.attr_int("axis", coerced ? 1 : -1);
  axis = normalize_axis(axis, rank).value_or(0);
  return {axis, coerced ? rank - 1 : axis};
}

bool batch_norm_training(const Node& node) {
  if (node.opset >= 14) return node.attr_int("training_mode", 0) != 0;
  return std::count_if(node.outputs.begin() + std::min<size_t>(1, node.outputs.size()), node.outputs.end(),
                       [](ValueId v) { return v.valid(); }) > 0;
}

Shape shape_from_shape_input(const InferContext& ctx, size_t input) {
  if (std::optional<std::vector<Dim>> known = ctx.input_known(input)) return Shape(*known);
  const Shape& s = ctx.input_shape(input);
  if (s.rank_known && s.rank() == 1 && s.dims[0].is_static()) {
    return Shape(std::vector<Dim>(static_cast<size_t>(s.dims[0].value())));
  }
  return Shape::unknown_rank();
}

std::optional<std::vector<Dim>> infer_index_grad_dx(InferContext& ctx, const std::string& forward_data) {
  require_floating(ctx, 0);
  require_integer(ctx, 1);
  if (ctx.input_dtype(2) != DType::Int64 && ctx.input_dtype(2) != DType::Int32) {
    fail_op(ctx, "indices must be int32 or int64, got " + std::string(dtype_name(ctx.input_dtype(2))));
  }
  const DType dtype = ctx.input_dtype(0);
  std::optional<std::vector<Dim>> x = ctx.input_known(1);
  if (!x) {
    ctx.set_output(0, dtype, shape_from_shape_input(ctx, 1));
    return std::nullopt;
  }
  if (x->empty()) fail_op(ctx, "x_shape must have rank >= 1 (" + forward_data + " is not a scalar)");
  ctx.set_output(0, dtype, Shape(*x));
  return x;
}

const Shape& infer_norm_grad_dx(InferContext& ctx, bool scale_like_x) {
  require_floating(ctx, 0);
  require_same_dtype(ctx, 1, 0);
  if (scale_like_x) require_same_dtype(ctx, 2, 0);
  ctx.set_output(0, ctx.input_dtype(1), ctx.input_shape(1));
  return ctx.input_shape(1);
}

void set_scale_bias_grads(InferContext& ctx, DType dtype, const Shape& shape) {
  ctx.set_output(1, dtype, shape);
  ctx.set_output(2, dtype, shape);
}

void fail_fold(const FoldContext& ctx, const std::string& message) {
  const Node& n = ctx.node;
  throw Error(n.op_type + ": " + message).at_node(n.name, n.op_type, n.domain, n.opset);
}

std::vector<Tensor> broadcast_inputs(const FoldContext& ctx) {
  std::vector<int64_t> sizes;
  for (const Tensor& t : ctx.inputs) {
    if (t.empty()) continue;
    auto s = broadcast_sizes(sizes, t.sizes());
    if (!s) {
      fail_fold(ctx,
                "input shapes " + ints_to_string(sizes) + " and " + ints_to_string(t.sizes()) + " cannot broadcast");
    }
    sizes = *s;
  }
  std::vector<Tensor> expanded;
  for (const Tensor& t : ctx.inputs)
    if (!t.empty()) expanded.push_back(broadcast_to(t, sizes));
  return expanded;
}

OpCost matrix_product_cost(const CostContext& ctx, const Dim& k, bool bias) {
  const std::optional<int64_t> inner = k.evaluate({});
  if (!inner) return {};
  const double outputs = static_cast<double>(ctx.output_numel(0));
  const double product = 2 * outputs * static_cast<double>(*inner), added = bias ? outputs : 0;
  return {product + added, 2 * product + added};
}

std::vector<int64_t> transpose_perm(const Node& node, int64_t rank) {
  if (node.has_attribute("perm")) return node.attr_ints("perm");
  std::vector<int64_t> reversed(static_cast<size_t>(rank));
  std::iota(reversed.rbegin(), reversed.rend(), int64_t{0});
  return reversed;
}

}  // namespace onnxtrain::op_helpers
