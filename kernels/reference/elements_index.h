// What GatherElements, GatherElementsGrad and ScatterElements share (the reference kernels, and the CUDA
// kernels' prepare-time checks): data and indices of one rank r >= 1, indices no longer than data off
// `axis`, and the walk that maps each index position to the data element it names.
//
//   const int64_t axis = elements_axis(spec, data_sizes, index_sizes);   // prepare; fails naming the op
//   for_each_element_target(spec, data_sizes, indices, axis, [&](int64_t j, int64_t offset) { ... });
//   const ScatterReduction r = scatter_reduction(spec);                   // ScatterElements' reduction
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/copy.h"

namespace onnxtrain::reference {

// The normalised `axis` attribute; fails unless data and indices have one rank >= 1 and the indices are
// no longer than the data along every other axis (there an index position's coordinate addresses the
// data directly).
inline int64_t elements_axis(const KernelSpec& spec, const std::vector<int64_t>& data,
                             const std::vector<int64_t>& indices) {
  const auto rank = static_cast<int64_t>(data.size());
  if (rank == 0) kernel_fail(spec, "data must have rank >= 1, got a scalar");
  if (indices.size() != data.size()) {
    kernel_fail(spec, "indices " + sizes_to_string(indices) + " must have the rank of data " + sizes_to_string(data));
  }
  const int64_t axis = normalized_axis(spec, spec.attributes.get_int("axis", 0), rank);
  for (int64_t k = 0; k < rank; ++k) {
    if (k != axis && indices[k] > data[k]) {
      kernel_fail(spec, "indices " + sizes_to_string(indices) + " are longer than data " + sizes_to_string(data) +
                            " along axis " + std::to_string(k) + ", which is not axis " + std::to_string(axis));
    }
  }
  return axis;
}

// Calls fn(j, offset) for every index position j of `indices` in row-major order, where offset is the
// flat offset in data (sizes `data`) of j's coordinates with the one along `axis` replaced by the index
// (negative ones count from the end). Every index is checked first, also when there is nothing to visit:
// one outside [-n, n) fails naming it and its position.
template <typename Fn>
void for_each_element_target(const KernelSpec& spec, const std::vector<int64_t>& data, const TensorView& indices,
                             int64_t axis, Fn&& fn) {
  const std::vector<int64_t> values = read_int_values(indices);
  const int64_t n = data[axis];
  for (size_t j = 0; j < values.size(); ++j) {
    if (values[j] < -n || values[j] >= n) {
      kernel_fail(spec, "index " + std::to_string(values[j]) + " (position " + std::to_string(j) +
                            ") is out of range for axis " + std::to_string(axis) + " of size " + std::to_string(n) +
                            " (data shape " + sizes_to_string(data) + ")");
    }
  }
  const std::vector<int64_t> strides = row_major_strides(data);
  std::vector<int64_t> coord(data.size(), 0);
  for (size_t j = 0; j < values.size(); ++j, next_index(coord, indices.sizes)) {
    int64_t offset = 0;
    for (size_t k = 0; k < data.size(); ++k) {
      const int64_t c = static_cast<int64_t>(k) == axis ? (values[j] < 0 ? values[j] + n : values[j]) : coord[k];
      offset += c * strides[k];
    }
    fn(static_cast<int64_t>(j), offset);
  }
}

// ScatterElements' `reduction`: none writes the update, the others combine it with the element there.
enum class ScatterReduction { None, Add, Mul, Max, Min };

// An element combined with an update under reduction `r` (the update itself for None).
template <typename T>
T scatter_combine(ScatterReduction r, T a, T b) {
  switch (r) {
    case ScatterReduction::Add:
      return static_cast<T>(a + b);
    case ScatterReduction::Mul:
      return static_cast<T>(a * b);
    case ScatterReduction::Max:
      return std::max(a, b);
    case ScatterReduction::Min:
      return std::min(a, b);
    case ScatterReduction::None:
      break;
  }
  return b;
}

// The reduction attribute; fails on an unknown one, and on a combining one over data that is not
// arithmetic (float32/float64 and the integer types: kArithmeticDTypes).
inline ScatterReduction scatter_reduction(const KernelSpec& spec) {
  const std::string name = spec.attributes.get_string("reduction", "none");
  ScatterReduction r = ScatterReduction::None;
  if (name == "add")
    r = ScatterReduction::Add;
  else if (name == "mul")
    r = ScatterReduction::Mul;
  else if (name == "max")
    r = ScatterReduction::Max;
  else if (name == "min")
    r = ScatterReduction::Min;
  else if (name != "none")
    kernel_fail(spec, "unknown reduction '" + name + "' (none, add, mul, max, min)");
  const DType dtype = spec.inputs[0].dtype;
  if (r != ScatterReduction::None &&
      std::find(kArithmeticDTypes.begin(), kArithmeticDTypes.end(), dtype) == kArithmeticDTypes.end()) {
    kernel_fail(spec, "reduction '" + name + "' is not supported on " + std::string(dtype_name(dtype)) + " data");
  }
  return r;
}

}  // namespace onnxtrain::reference
