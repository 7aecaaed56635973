// Shared pieces of the math op schemas in graph/ops/ (elementwise, conv, pooling, normalisation,
// reductions, losses): input checks with messages that name shapes, broadcasting, sliding-window
// geometry, shape arithmetic on `known` values, and constant evaluation over host tensors.
//
// Cost conventions (FLOPs; a multiply-add is 2): elementwise ops 1 per output element forward and 1–2
// backward; Conv/Gemm/MatMul 2·MACs forward and twice that backward (data + weight gradients), plus one
// per output element for a bias both ways; pools one per window element per output, both ways;
// normalisations ~5 per element forward and ~8 backward; softmax ~5 forward, ~4 backward; reductions
// the input numel; losses ~4 per score element forward, ~2 backward.
//
// Folding: a schema's `fold` returns one tensor per output, or an empty vector when it declines (float16
// and bfloat16 tensors, which it does not evaluate); the node then stays in the graph.
//
//   Shape y = broadcast_or_fail(ctx, ctx.input_shape(0), ctx.input_shape(1));
//   WindowSpec w = read_window(ctx, /*spatial=*/2, kernel);
//   Dim h_out = window_output_dim(ctx, x.dims[2], 0, w);
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "graph/op_schema.h"

namespace onnxtrain::op_helpers {

// --- inference checks; each throws Error at the node, the message starting with the op type ---
[[noreturn]] void fail(const InferContext& ctx, const std::string& message);
void require_numeric(const InferContext& ctx, size_t input);   // not bool, string or complex
void require_floating(const InferContext& ctx, size_t input);  // float16/bfloat16/float32/float64
void require_integer(const InferContext& ctx, size_t input);
void require_same_dtype(const InferContext& ctx, size_t input, size_t reference);
Shape broadcast_or_fail(const InferContext& ctx, const Shape& a, const Shape& b);
// `axis` normalised against `rank`; fails naming the input shape when out of range.
int64_t axis_or_fail(const InferContext& ctx, int64_t axis, const Shape& shape, const char* what = "axis");
// A 1-D input whose length must be `size` (a per-channel scale, bias, mean, ...).
void require_vector_of(const InferContext& ctx, size_t input, const char* what, const Dim& size,
                       const std::string& size_origin);
bool is_static_value(const Dim& d, int64_t value);

// --- shape arithmetic: element values of small 0-D/1-D int outputs ---
// Combines the known values of `inputs` elementwise with numpy broadcasting into the known values of an
// output of shape `out`; nullopt when an input is not known or the output is not a small static vector.
std::optional<std::vector<Dim>> combine_known(const InferContext& ctx, const Shape& out,
                                              const std::vector<size_t>& inputs, Dim (*combine)(const Dim&, const Dim&));
// Dim arithmetic that stays static where both are static (max/min/pow/truncating division).
Dim dim_max(const Dim& a, const Dim& b);
Dim dim_min(const Dim& a, const Dim& b);
Dim dim_div(const Dim& a, const Dim& b);
Dim dim_pow(const Dim& a, const Dim& b);

// --- sliding windows (Conv, ConvTranspose, pools) ---
struct WindowSpec {
  std::vector<Dim> kernel;  // per spatial axis; unknown when the weight's dims are unknown
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

// --- constant folding over host tensors ---
[[noreturn]] void fold_fail(const FoldContext& ctx, const std::string& message);
// Numpy broadcast of static sizes (inference has already checked they broadcast).
std::vector<int64_t> broadcast_sizes(const std::vector<int64_t>& a, const std::vector<int64_t>& b);
// For each element of a tensor of sizes `out`, the index of the element of `in` it reads.
std::vector<int64_t> broadcast_source_index(const std::vector<int64_t>& in, const std::vector<int64_t>& out);

// Calls fn(T{}) with the C++ type of `dtype` when folding evaluates it (float32, float64 and every
// integer type; not float16/bfloat16, bool or strings).
template <typename Fn>
bool visit_fold_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32: fn(float{}); return true;
    case DType::Float64: fn(double{}); return true;
    case DType::Int8: fn(int8_t{}); return true;
    case DType::Int16: fn(int16_t{}); return true;
    case DType::Int32: fn(int32_t{}); return true;
    case DType::Int64: fn(int64_t{}); return true;
    case DType::UInt8: fn(uint8_t{}); return true;
    case DType::UInt16: fn(uint16_t{}); return true;
    case DType::UInt32: fn(uint32_t{}); return true;
    case DType::UInt64: fn(uint64_t{}); return true;
    default: return false;
  }
}

template <typename T>
std::vector<T> elements_as(const Tensor& t) {
  std::vector<T> out;
  out.reserve(static_cast<size_t>(t.numel()));
  if (is_floating(t.dtype())) {
    for (double v : t.to_double()) out.push_back(static_cast<T>(v));
  } else {
    for (int64_t v : t.to_int64()) out.push_back(static_cast<T>(v));
  }
  return out;
}

template <typename T>
Tensor tensor_from(DType dtype, std::vector<int64_t> sizes, const std::vector<T>& values) {
  Tensor t(dtype, std::move(sizes));
  auto data = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) data[i] = values[i];
  return t;
}

}  // namespace onnxtrain::op_helpers
