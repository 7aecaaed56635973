// Rules shared by the shape and data-movement op schemas (graph/ops/shape_*.cc, gather.cc, ...): errors
// that name the op, axis checks, Dim products, "known" values of small int tensors, and int lists that
// older opsets give as an attribute and newer ones as an input.
//
//   int64_t axis = checked_axis(ctx, ctx.node().attr_int("axis", 0), rank);  // fails at the node
//   IntList axes = read_int_list(ctx, "axes", 1, /*input_since=*/13);        // Squeeze-11 vs -13
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/op_schema.h"

// Helpers live in their own namespace so other op families can define their own without clashes.
namespace onnxtrain::shape_ops {

// Known element values are kept for small tensors only (the shape vectors exporters compute).
inline constexpr size_t kMaxKnownElements = 64;

// Throws Error at the node with "<Op>: <message>".
[[noreturn]] void fail_op(const InferContext& ctx, const std::string& message);
[[noreturn]] void fail_fold(const FoldContext& ctx, const std::string& message);

// "(N,-1,3)" for dims or int values.
std::string dims_to_string(const std::vector<Dim>& dims);
std::string ints_to_string(const std::vector<int64_t>& values);

// Product of dims[begin, end) with Dim arithmetic (unknown where it cannot be expressed).
Dim dims_product(const std::vector<Dim>& dims, size_t begin, size_t end);
inline Dim dims_product(const std::vector<Dim>& dims) { return dims_product(dims, 0, dims.size()); }

// Normalises an axis into [0, rank) or fails: "<Op>: axis 4 is out of range for rank 4 (expected -4..3)".
int64_t checked_axis(const InferContext& ctx, int64_t axis, int64_t rank, const std::string& what = "axis");
// Normalises every axis and fails on repeats.
std::vector<int64_t> checked_axes(const InferContext& ctx, const std::vector<int64_t>& axes, int64_t rank);

// Numpy broadcast of two input shapes or fails naming both.
Shape broadcast_or_fail(const InferContext& ctx, const Shape& a, const Shape& b);
// Fails unless input `i` has the dtype of input 0 ("inputs must have the same type").
void require_same_dtype(const InferContext& ctx, size_t i, size_t reference = 0);
bool is_int_or_bool(DType dtype);

// Sets known values of output `i` when its dtype is an integer or bool and the vector is small.
void set_known_output(InferContext& ctx, size_t i, DType dtype, std::vector<Dim> values);
// Static values of known dims; nullopt when any is symbolic or unknown.
std::optional<std::vector<int64_t>> static_values(const std::vector<Dim>& dims);

// An int list that opsets before `input_since` give as attribute `name`, later ones as input `input`.
struct IntList {
  bool given = false;                          // attribute present or input connected
  std::optional<std::vector<int64_t>> values;  // nullopt: a non-constant input
  std::optional<int64_t> count;                // element count when known (values, or a 1-D static input shape)
};
IntList read_int_list(const InferContext& ctx, const std::string& name, size_t input, int input_since);
// The same list at fold time (inputs are constants); nullopt when not given.
std::optional<std::vector<int64_t>> fold_int_list(const FoldContext& ctx, const std::string& name, size_t input,
                                                  int input_since);

// Costs: data movement is free; comparisons and Where cost one op per output element, none backward.
OpCost no_flops(const CostContext& ctx);
OpCost one_flop_per_output_no_backward(const CostContext& ctx);

}  // namespace onnxtrain::shape_ops
