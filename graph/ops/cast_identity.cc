// Cast (opset 1: `to` as a type name; 6+: an ONNX TensorProto type code), CastLike (15: the type of a
// second input) and Identity. Int → int casts keep known values (shape vectors cast to int32 and back).
#include <iterator>

#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "graph/ops/ops.h"
#include "graph/ops/shape_rules.h"

namespace onnxtrain {

namespace {

using namespace op_helpers;
using namespace shape_ops;

constexpr const char* kOnnxTypeNames[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",       "UINT16",  "INT16",
                                          "INT32",     "INT64",  "STRING",    "BOOL",       "FLOAT16", "DOUBLE",
                                          "UINT32",    "UINT64", "COMPLEX64", "COMPLEX128", "BFLOAT16"};

// The `to` attribute of Cast as a DType; Undefined when absent or not a type onnxtrain knows.
DType cast_target(const Node& node) {
  constexpr int64_t count = std::size(kOnnxTypeNames);
  if (node.has_attribute("to")) {
    int64_t code = node.attr_int("to", 0);
    std::string name = node.attr_string("to", "");
    for (int64_t i = 0; i < count && !name.empty(); ++i)
      if (name == kOnnxTypeNames[i]) code = i;
    return dtype_from_onnx_code(code);
  }
  return DType::Undefined;
}

bool is_numeric(DType dtype) { return is_floating(dtype) || is_int_or_bool(dtype); }

// Known values after an int → int cast: static values convert exactly as the tensor would.
std::vector<Dim> cast_known(const std::vector<Dim>& values, DType to) {
  std::vector<Dim> out;
  for (const Dim& d : values) {
    if (d.is_static())
      out.emplace_back(read_as_int64(tensor_from_int64(to, {1}, {d.value()}), 0));
    else
      out.push_back(to == DType::Bool ? Dim::unknown() : d);  // a symbol may be 0
  }
  return out;
}

void infer_cast_to(InferContext& ctx, DType to) {
  DType from = ctx.input_dtype(0);
  if (!is_numeric(from) || !is_numeric(to)) {
    fail_op(ctx, "cast from " + std::string(dtype_name(from)) + " to " + std::string(dtype_name(to)) +
                     " is not supported (only numeric and bool tensors)");
  }
  ctx.set_output(0, to, ctx.input_shape(0));
  auto known = ctx.input_known(0);
  if (known && is_int_or_bool(from) && is_int_or_bool(to)) set_known_output(ctx, 0, to, cast_known(*known, to));
}

void infer_cast(InferContext& ctx) {
  DType to = cast_target(ctx.node());
  if (to == DType::Undefined) {
    fail_op(ctx, ctx.node().has_attribute("to") ? "the 'to' attribute names no tensor type onnxtrain knows"
                                                : "the 'to' attribute is required");
  }
  infer_cast_to(ctx, to);
}

std::vector<Tensor> fold_cast(const FoldContext& ctx) { return {cast_tensor(ctx.inputs[0], cast_target(ctx.node))}; }

void infer_cast_like(InferContext& ctx) { infer_cast_to(ctx, ctx.input_dtype(1)); }

std::vector<Tensor> fold_cast_like(const FoldContext& ctx) {
  return {cast_tensor(ctx.inputs[0], ctx.inputs[1].dtype())};
}

void infer_identity(InferContext& ctx) {
  DType dtype = ctx.input_dtype(0);
  ctx.set_output(0, dtype, ctx.input_shape(0));
  if (auto known = ctx.input_known(0)) set_known_output(ctx, 0, dtype, *known);
}

std::vector<Tensor> fold_identity(const FoldContext& ctx) { return {ctx.inputs[0].clone()}; }

}  // namespace

void register_cast_identity_ops(OpRegistry& registry) {
  registry.add(
      {.op_type = "Cast", .input_kinds = {InputKind::Data}, .infer = infer_cast, .cost = no_flops, .fold = fold_cast});
  registry.add({.op_type = "CastLike",
                .min_inputs = 2,
                .max_inputs = 2,
                .input_kinds = {InputKind::Data, InputKind::NonDifferentiable},
                .infer = infer_cast_like,
                .cost = no_flops,
                .fold = fold_cast_like,
                .type_only_inputs = {1}});
  registry.add({.op_type = "Identity",
                .input_kinds = {InputKind::Data},
                .infer = infer_identity,
                .cost = no_flops,
                .fold = fold_identity});
}

}  // namespace onnxtrain
