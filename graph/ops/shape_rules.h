// What only the shape and data-movement op schemas (graph/ops/shape_size.cc, gather.cc, ...) need: Dim
// products, known values of their outputs, and int lists that older opsets give as an attribute and newer
// ones as an input. The checks and fold loops they share with the math ops are in op_helpers.h and
// data_movement_fold.h (namespace op_helpers).
//
//   IntList axes = read_int_list(ctx, "axes", 1, /*input_since=*/13);  // Squeeze-11 vs -13
//   set_known_output(ctx, 0, DType::Int64, dims);                      // Shape(x) carries x's dims
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/op_schema.h"

namespace onnxtrain::shape_ops {

// Product of dims[begin, end) with Dim arithmetic (unknown where it cannot be expressed).
Dim dims_product(const std::vector<Dim>& dims, size_t begin, size_t end);
inline Dim dims_product(const std::vector<Dim>& dims) { return dims_product(dims, 0, dims.size()); }

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

// Data movement costs no FLOPs.
OpCost no_flops(const CostContext& ctx);

}  // namespace onnxtrain::shape_ops
