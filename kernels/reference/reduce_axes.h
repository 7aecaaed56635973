// The prepare-time reading of Reduce* and ArgMax/ArgMin nodes that the reference and "cpu" reductions
// share: where the axes come from (an attribute before opset 13 for ReduceSum, 18 for the others; an
// optional 1-D int64 input from then), keepdims/noop_with_empty_axes, the dims the axes reduce, and
// ArgMax/ArgMin's one axis. The "cuda" reductions read them the same way.
//
//   const ReduceAxes ra = read_reduce_axes(spec, kArithmeticDTypes);
//   if (ra.at_run) require_reduce_output_rank(spec, ra);
//   else plan = plan_reduce(spec, spec.inputs[0].sizes, ra.axes, ra.keepdims, ra.noop);
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/common.h"
#include "kernels/reference/kernel_plumbing.h"

namespace onnxtrain::reference {

struct ReduceAxes {
  DType dtype = DType::Float32;  // of input 0, one of the allowed dtypes
  bool keepdims = true;
  bool noop = false;          // noop_with_empty_axes (only where the axes are an input)
  bool at_run = false;        // the axes are a non-empty input, known only when the kernel runs
  std::vector<int64_t> axes;  // the attribute's axes (empty where they are an input)
};

inline ReduceAxes read_reduce_axes(const KernelSpec& spec, const std::vector<DType>& dtypes) {
  const int axes_input_since = spec.op_type == "ReduceSum" ? 13 : 18;
  const bool axes_as_input = spec.opset >= axes_input_since;
  if (!axes_as_input && has_input(spec, 1)) {
    kernel_fail(spec, "axes is an attribute before opset " + std::to_string(axes_input_since) + ", not an input");
  }
  require_input_count(spec, 1, 2);
  ReduceAxes ra;
  ra.dtype = require_dtype_in(spec, 0, dtypes);
  ra.keepdims = spec.attributes.get_int("keepdims", 1) != 0;
  ra.noop = axes_as_input && spec.attributes.get_int("noop_with_empty_axes", 0) != 0;
  if (!axes_as_input) {
    ra.axes = spec.attributes.get_ints("axes");
  } else {
    if (spec.attributes.has("axes")) {
      kernel_fail(spec, "axes is an input from opset " + std::to_string(axes_input_since) + ", not an attribute");
    }
    if (has_input(spec, 1)) {
      require_dtype_in(spec, 1, {DType::Int64});
      if (spec.inputs[1].sizes.size() != 1) kernel_fail(spec, "axes must be a 1-D tensor");
      ra.at_run = spec.inputs[1].numel() > 0;
    }
  }
  return ra;
}

// Where the axes come at run time, what prepare can check of output 0: its dtype and rank.
inline void require_reduce_output_rank(const KernelSpec& spec, const ReduceAxes& ra) {
  const std::vector<int64_t>& in_sizes = spec.inputs[0].sizes;
  const size_t count = static_cast<size_t>(spec.inputs[1].numel());
  const size_t out_rank = ra.keepdims ? in_sizes.size() : in_sizes.size() - std::min(count, in_sizes.size());
  if (spec.outputs.empty() || spec.outputs[0].dtype != ra.dtype || spec.outputs[0].sizes.size() != out_rank) {
    kernel_fail(spec, "output 0 must be " + std::string(dtype_name(ra.dtype)) + " of rank " + std::to_string(out_rank));
  }
}

// Which of the `rank` dims the (attribute or run-time) `axes` reduce: every dim when `axes` is empty (the
// caller handles noop_with_empty_axes first); fails on an axis out of range or repeated.
inline std::vector<bool> reduced_dims(const KernelSpec& spec, int64_t rank, const std::vector<int64_t>& axes) {
  std::vector<bool> reduced(static_cast<size_t>(rank), axes.empty());
  for (int64_t axis : axes) {
    const int64_t a = normalized_axis(spec, axis, rank);
    if (reduced[a]) kernel_fail(spec, "axis " + std::to_string(axis) + " is repeated");
    reduced[a] = true;
  }
  return reduced;
}

// ArgMax/ArgMin: input 0 seen as (outer, n, inner) around `axis`; output 0 (int64) checked.
struct ArgReduceAxis {
  DType dtype = DType::Float32;
  int64_t axis = 0;
  bool select_last = false;  // ties pick the last index (select_last_index=1)
  int64_t outer = 1, n = 0, inner = 1;
};

inline ArgReduceAxis read_arg_reduce(const KernelSpec& spec, const std::vector<DType>& dtypes) {
  require_input_count(spec, 1, 1);
  ArgReduceAxis a;
  a.dtype = require_dtype_in(spec, 0, dtypes);
  const std::vector<int64_t>& sizes = spec.inputs[0].sizes;
  const auto rank = static_cast<int64_t>(sizes.size());
  if (rank == 0) kernel_fail(spec, "input must have at least one dim");
  a.axis = normalized_axis(spec, spec.attributes.get_int("axis", 0), rank);
  const int64_t select_last = spec.attributes.get_int("select_last_index", 0);
  if (select_last != 0 && select_last != 1) kernel_fail(spec, "select_last_index must be 0 or 1");
  a.select_last = select_last != 0;
  std::vector<int64_t> out_sizes = sizes;
  if (spec.attributes.get_int("keepdims", 1) != 0) {
    out_sizes[a.axis] = 1;
  } else {
    out_sizes.erase(out_sizes.begin() + a.axis);
  }
  require_output(spec, 0, DType::Int64, out_sizes);
  a.outer = product_of(sizes, 0, a.axis);
  a.inner = product_of(sizes, a.axis + 1);
  a.n = sizes[a.axis];
  return a;
}

}  // namespace onnxtrain::reference
