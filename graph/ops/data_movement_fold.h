// Constant-folding kernels of the shape and data-movement ops: plain loops over host Tensors. Pure data
// movement copies elements byte-wise (any dtype); element conversions serve Cast and the comparisons.
//
//   Tensor t = strided_copy(src, {3, 2}, 0, {1, 3});   // transpose of a (2,3) tensor
//   Tensor b = broadcast_to(scalar, {4});              // expand
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "graph/tensor.h"

namespace onnxtrain::shape_ops {

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& sizes);

// out[i_0..i_k] = src[base + sum_k i_k * src_strides[k]] (element strides; 0 broadcasts, negative reverses).
Tensor strided_copy(const Tensor& src, const std::vector<int64_t>& out_sizes, int64_t base,
                    const std::vector<int64_t>& src_strides);
// Numpy broadcast of src to out_sizes (src rank <= out rank, every src dim 1 or equal).
Tensor broadcast_to(const Tensor& src, const std::vector<int64_t>& out_sizes);
// Static numpy broadcast of two size lists; nullopt when they cannot broadcast.
std::optional<std::vector<int64_t>> broadcast_sizes(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

// Calls fn(index) for every multi-index of `sizes` in row-major order.
void for_each_index(const std::vector<int64_t>& sizes, const std::function<void(const std::vector<int64_t>&)>& fn);
// Copies one element (dtype_size bytes) between tensors of the same dtype.
void copy_element(const Tensor& src, int64_t src_index, Tensor& dst, int64_t dst_index);

// Element access with conversion, for every numeric dtype including float16, bfloat16 and bool.
double read_as_double(const Tensor& t, int64_t i);
int64_t read_as_int64(const Tensor& t, int64_t i);  // floats truncate toward zero
void write_from_double(Tensor& t, int64_t i, double v);
void write_from_int64(Tensor& t, int64_t i, int64_t v);

// Cast semantics of ONNX (C conversions; float → bfloat16 truncates as ONNX 1.12's reference does).
// Fails on String and complex dtypes.
Tensor cast_tensor(const Tensor& src, DType to);

// A tensor of `dtype` with the given int values (converted).
Tensor tensor_from_int64(DType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& values);

}  // namespace onnxtrain::shape_ops
