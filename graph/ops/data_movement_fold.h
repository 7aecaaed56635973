// Host-tensor loops behind constant folding, for every op family: strided and broadcast copies (byte-wise,
// any dtype), element access with conversion (Cast, comparisons, Range), and typed views of whole tensors
// for the arithmetic folds. Shares the op_helpers namespace with graph/ops/op_helpers.h.
//
//   Tensor t = strided_copy(src, {3, 2}, 0, {1, 3});   // transpose of a (2,3) tensor
//   Tensor b = broadcast_to(scalar, {4});              // expand
//   visit_fold_type(t.dtype(), [&](auto zero) { auto v = elements_as<decltype(zero)>(t); ... });
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "graph/tensor.h"

namespace onnxtrain::op_helpers {

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& sizes);
// Element strides that read a tensor of sizes `in` at each index of a broadcast of it to `out_rank` dims:
// leading dims added, 0 on dims of size 1.
std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, size_t out_rank);

// Calls fn(i, offset) for the i-th multi-index of `sizes` in row-major order, where offset is
// base + sum_k index_k * strides[k] (element strides; 0 broadcasts, negative reverses).
template <typename Fn>
void for_each_strided(const std::vector<int64_t>& sizes, int64_t base, const std::vector<int64_t>& strides, Fn&& fn) {
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  const size_t rank = sizes.size();
  std::vector<int64_t> index(rank, 0);
  int64_t offset = base;
  for (int64_t linear = 0; linear < n; ++linear) {
    fn(linear, offset);
    for (size_t k = rank; k-- > 0;) {  // odometer increment
      if (++index[k] < sizes[k]) {
        offset += strides[k];
        break;
      }
      offset -= strides[k] * (sizes[k] - 1);
      index[k] = 0;
    }
  }
}

// out[i_0..i_k] = src[base + sum_k i_k * src_strides[k]].
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

// Cast semantics of ONNX (C conversions; float → float16/bfloat16 rounds to nearest even).
// Fails on String and complex dtypes.
Tensor cast_tensor(const Tensor& src, DType to);

// A tensor of `dtype` with the given int values (converted).
Tensor tensor_from_int64(DType dtype, const std::vector<int64_t>& sizes, const std::vector<int64_t>& values);

// --- typed views for the arithmetic folds ---
// Calls fn(T{}) with the C++ type of `dtype` when the arithmetic folds evaluate it (float32, float64 and
// every integer type; not float16/bfloat16, bool or strings).
template <typename Fn>
bool visit_fold_type(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32:
      fn(float{});
      return true;
    case DType::Float64:
      fn(double{});
      return true;
    case DType::Int8:
      fn(int8_t{});
      return true;
    case DType::Int16:
      fn(int16_t{});
      return true;
    case DType::Int32:
      fn(int32_t{});
      return true;
    case DType::Int64:
      fn(int64_t{});
      return true;
    case DType::UInt8:
      fn(uint8_t{});
      return true;
    case DType::UInt16:
      fn(uint16_t{});
      return true;
    case DType::UInt32:
      fn(uint32_t{});
      return true;
    case DType::UInt64:
      fn(uint64_t{});
      return true;
    default:
      return false;
  }
}

// Every element of `t` converted to T (floats through double, integers through int64).
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

// A tensor of `dtype`, whose C++ type is T, holding `values`.
template <typename T>
Tensor tensor_from(DType dtype, std::vector<int64_t> sizes, const std::vector<T>& values) {
  Tensor t(dtype, std::move(sizes));
  auto data = t.data<T>();
  for (size_t i = 0; i < values.size(); ++i) data[i] = values[i];
  return t;
}

}  // namespace onnxtrain::op_helpers
