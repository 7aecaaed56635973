// What the op schemas in graph/ops/ share, math and shape ops alike: input checks with messages that
// name the op and the shapes, axis checks, broadcasting, "known" element values of small int tensors,
// sliding-window geometry, per-element costs, and the fold-time error. The tensor loops that constant
// folding runs live beside this in graph/ops/data_movement_fold.h (same namespace).
//
// Cost conventions (FLOPs; a multiply-add is 2): elementwise ops 1 per output element forward and 1–2
// backward; Conv/Gemm/MatMul 2·MACs forward and twice that backward (data + weight gradients), plus one
// per output element for a bias both ways; pools one per window element per output, both ways;
// normalisations ~5 per element forward and ~8 backward; softmax ~5 forward, ~4 backward; reductions
// the input numel; losses ~4 per score element forward, ~2 backward; data movement is free.
//
// Folding: a schema's `fold` returns one tensor per output, or an empty vector when it declines (float16
// and bfloat16 tensors, which the math folds do not evaluate); the node then stays in the graph.
//
//   Shape y = broadcast_or_fail(ctx, ctx.input_shape(0), ctx.input_shape(1));
//   int64_t axis = checked_axis(ctx, ctx.node().attr_int("axis", 0), x.rank());  // fails at the node
//   WindowSpec w = read_window(ctx, /*spatial=*/2, kernel);
//   Dim h_out = window_output_dim(ctx, x.dims[2], 0, w);
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/op_schema.h"

namespace onnxtrain::op_helpers {

// --- inference checks; each throws Error at the node, the message starting with "<Op>: " ---
[[noreturn]] void fail_op(const InferContext& ctx, const std::string& message);
void require_numeric(const InferContext& ctx, size_t input);   // not bool, string or complex
void require_floating(const InferContext& ctx, size_t input);  // float16/bfloat16/float32/float64
void require_integer(const InferContext& ctx, size_t input);
// Fails unless input `i` has the dtype of input `reference` ("inputs must have the same type").
void require_same_dtype(const InferContext& ctx, size_t i, size_t reference = 0);
bool is_int_or_bool(DType dtype);
// A scalar or a one-element tensor (Clip's min/max, Dropout's ratio); `what` names it in the message.
void require_scalar(const InferContext& ctx, size_t input, const std::string& what);
// A 1-D input whose length must be `size` (a per-channel scale, bias, mean, ...).
void require_vector_of(const InferContext& ctx, size_t input, const char* what, const Dim& size,
                       const std::string& size_origin);
// X (N,C,D1,...) of Conv, pools and the normalisations: fails when its rank is known and below 3.
void require_spatial_input(const InferContext& ctx, const Shape& x);
bool is_static_value(const Dim& d, int64_t value);
// ScatterElements' and ScatterND's `reduction`: none; add and mul from opset 16; max and min from 18; not
// over bool data.
void check_scatter_reduction(const InferContext& ctx);

// "(N,-1,3)" for dims or int values.
std::string dims_to_string(const std::vector<Dim>& dims);
std::string ints_to_string(const std::vector<int64_t>& values);

// Normalises an axis into [0, rank) or fails: "<Op>: axis 4 is out of range for rank 4 (expected -4..3)".
int64_t checked_axis(const InferContext& ctx, int64_t axis, int64_t rank);
// Normalises every axis and fails on repeats.
std::vector<int64_t> checked_axes(const InferContext& ctx, const std::vector<int64_t>& axes, int64_t rank);

// A Transpose node's perm for an input of `rank`: its attribute, or all axes reversed when absent.
std::vector<int64_t> transpose_perm(const Node& node, int64_t rank);

// Numpy broadcast of two input shapes or fails naming both.
Shape broadcast_or_fail(const InferContext& ctx, const Shape& a, const Shape& b);
// Whether `s` broadcasts unidirectionally onto `target` (rank known): no more dims, and each of its
// trailing-aligned dims is 1 or equal where both are static (Gemm's C, LayerNormalization's Scale and B).
bool broadcasts_onto(const Shape& s, const Shape& target);

// --- known values: element values of small 0-D/1-D int tensors (the shape vectors exporters compute) ---
inline constexpr size_t kMaxKnownElements = 64;
// The known values of `inputs`, each stretched to the output's length under 0-D/1-D broadcasting;
// nullopt when the output `out` is not a static 0-D/1-D shape or an input is not known.
std::optional<std::vector<std::vector<Dim>>> known_operands(const InferContext& ctx, const Shape& out,
                                                            const std::vector<size_t>& inputs);
// Combines the known values of int `inputs` elementwise into the known values of an output of shape
// `out`; nullopt when an input is not known or the output is not a small static vector.
std::optional<std::vector<Dim>> combine_known(const InferContext& ctx, const Shape& out,
                                              const std::vector<size_t>& inputs,
                                              Dim (*combine)(const Dim&, const Dim&));
// Dim arithmetic that stays static where both are static (max/min/pow/truncating division).
Dim dim_max(const Dim& a, const Dim& b);
Dim dim_min(const Dim& a, const Dim& b);
Dim dim_div(const Dim& a, const Dim& b);
Dim dim_pow(const Dim& a, const Dim& b);

// --- sliding windows (Conv, ConvTranspose, pools) ---
struct WindowSpec {
  std::vector<Dim> kernel;                        // per spatial axis; unknown when the weight's dims are unknown
  std::vector<int64_t> strides, dilations, pads;  // pads: all begins, then all ends
  std::string auto_pad = "NOTSET";                // NOTSET, SAME_UPPER, SAME_LOWER, VALID
  bool ceil_mode = false;
};
// Reads strides, dilations, pads, auto_pad and ceil_mode for `spatial` axes and validates them.
WindowSpec read_window(const InferContext& ctx, size_t spatial, std::vector<Dim> kernel);
// Output size of one spatial axis (Conv and pools); fails when the window does not fit.
Dim window_output_dim(const InferContext& ctx, const Dim& in, size_t axis, const WindowSpec& w);
// Product of the static kernel sizes; 0 when one is unknown.
int64_t kernel_volume(const std::vector<Dim>& kernel);

// --- semantics that kernels and gradient rules share with inference ---
// Softmax/LogSoftmax normalise over dims [first, rank): before opset 13 the input is coerced to 2-D at
// `axis` (default 1), so every dim from `axis` on; from 13 only `axis` (default -1), so last == first.
struct SoftmaxAxes {
  int64_t first = 0;
  int64_t last = 0;  // inclusive
};
SoftmaxAxes softmax_axes(const Node& node, int64_t rank);  // the axis must be valid for `rank`
// BatchNormalization uses batch statistics: training_mode=1 from opset 14, more than one output before.
bool batch_norm_training(const Node& node);

// --- backward ops (ai.onnxtrain) ---
// dX's shape from a 1-D int "x_shape" input (GatherGrad, PadGrad, SliceGrad, AveragePoolGrad,
// NegativeLogLikelihoodLossGrad): its known values; else rank = its static length with unknown dims;
// else unknown rank.
Shape shape_from_shape_input(const InferContext& ctx, size_t input);
// What the index grads (dY, x_shape, indices) -> dX of GatherGrad, GatherElementsGrad and GatherNDGrad
// check in common: dY floating, x_shape integer, indices int32/int64. Sets dX (output 0) to x_shape's
// shape and returns its known values, at least one (`forward_data` says whose data is never a scalar:
// "Gather's data"); nullopt when they are not known.
std::optional<std::vector<Dim>> infer_index_grad_dx(InferContext& ctx, const std::string& forward_data);
// What the normalisation grads (dY, X, Scale, ...) -> dX, dScale, dBias of BatchNormalizationGrad,
// InstanceNormalizationGrad and LayerNormalizationGrad check in common: dY floating, X (input 1) of its
// dtype, and Scale (input 2) too when `scale_like_x`. Sets dX (output 0) to X; returns X's shape.
//   const Shape& x = infer_norm_grad_dx(ctx, /*scale_like_x=*/true);
//   set_scale_bias_grads(ctx, ctx.input_dtype(2), ctx.input_shape(2));
const Shape& infer_norm_grad_dx(InferContext& ctx, bool scale_like_x);
// Sets dScale and dBias (outputs 1 and 2) to `shape` of `dtype`.
void set_scale_bias_grads(InferContext& ctx, DType dtype, const Shape& shape);

// --- costs: a fixed number of FLOPs per element of input 0 or of output 0, forward and backward ---
template <int Forward, int Backward>
OpCost flops_per_input_element(const CostContext& ctx) {
  const double n = static_cast<double>(ctx.input_numel(0));
  return {Forward * n, Backward * n};
}
template <int Forward, int Backward>
OpCost flops_per_output_element(const CostContext& ctx) {
  const double n = static_cast<double>(ctx.output_numel(0));
  return {Forward * n, Backward * n};
}

// A matrix product's: 2·K FLOPs per output element forward, twice that backward, plus one each way per
// output element for an added bias; nothing when K is unknown.
OpCost matrix_product_cost(const CostContext& ctx, const Dim& k, bool bias = false);
// ScatterElements and ScatterND: data movement, plus one FLOP per update element a reduction combines.
inline OpCost scatter_cost(const CostContext& ctx) {
  if (ctx.node.attr_string("reduction", "none") == "none") return {};
  return {static_cast<double>(ctx.input_numel(2)), 0};
}

// --- constant folding ---
// Throws Error at the node with "<Op>: <message>".
[[noreturn]] void fail_fold(const FoldContext& ctx, const std::string& message);
// The present inputs numpy-broadcast to their common sizes (omitted optional inputs left out); fails
// naming the sizes when they cannot broadcast.
std::vector<Tensor> broadcast_inputs(const FoldContext& ctx);

}  // namespace onnxtrain::op_helpers
