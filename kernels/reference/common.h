// Shared index and dtype plumbing of the reference kernels: dtype dispatch, strides, numpy broadcasting,
// an N-D index odometer and the kernel error. Header-only and small; op math lives in the family files,
// kernel construction and prepare-time checks in kernel_plumbing.h.
//
//   std::optional<std::vector<int64_t>> out = broadcast_sizes(a.sizes, b.sizes);
//   for_each_broadcast(*out, {broadcast_strides(a.sizes, *out), broadcast_strides(b.sizes, *out)}, fn);
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "graph/error.h"
#include "kernels/kernel.h"

namespace onnxtrain::reference {

// Calls fn(T{}) with the C++ type of `dtype` among float32/float64; false when dtype is not one of them.
template <typename Fn>
bool dispatch_float(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Float32:
      fn(float{});
      return true;
    case DType::Float64:
      fn(double{});
      return true;
    default:
      return false;
  }
}

// float32/float64/int32/int64 (arithmetic that ONNX defines on integers too).
template <typename Fn>
bool dispatch_numeric(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::Int32:
      fn(int32_t{});
      return true;
    case DType::Int64:
      fn(int64_t{});
      return true;
    default:
      return dispatch_float(dtype, fn);
  }
}

// Range's dtypes (opset 11: float32, float64, int16, int32, int64), for the reference and CUDA kernels.
template <typename Fn>
bool dispatch_range(DType dtype, Fn&& fn) {
  if (dtype == DType::Int16) {
    fn(int16_t{});
    return true;
  }
  return dispatch_numeric(dtype, fn);
}

// Calls fn(T{}) with the C++ type of any arithmetic dtype (float32/float64 and the eight integer types).
template <typename Fn>
bool dispatch_arithmetic(DType dtype, Fn&& fn) {
  // clang-format off
  switch (dtype) {
    case DType::Int8: fn(int8_t{}); return true;
    case DType::UInt8: fn(uint8_t{}); return true;
    case DType::Int16: fn(int16_t{}); return true;
    case DType::UInt16: fn(uint16_t{}); return true;
    case DType::UInt32: fn(uint32_t{}); return true;
    case DType::UInt64: fn(uint64_t{}); return true;
    default: return dispatch_numeric(dtype, fn);
  }
  // clang-format on
}

// Any fixed-size element type, by element size (data movement copies bytes).
inline size_t element_bytes(DType dtype) { return dtype_size(dtype); }

inline std::vector<int64_t> row_major_strides(const std::vector<int64_t>& sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * sizes[i + 1];
  return strides;
}

// The product of sizes[from..to).
inline int64_t product_of(const std::vector<int64_t>& sizes, size_t from = 0, size_t to = SIZE_MAX) {
  int64_t p = 1;
  for (size_t i = from; i < sizes.size() && i < to; ++i) p *= sizes[i];
  return p;
}

// Elements before `axis` (the outer count) and after it (the inner block).
inline std::pair<int64_t, int64_t> outer_inner(const std::vector<int64_t>& sizes, int64_t axis) {
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < static_cast<int64_t>(sizes.size()); ++k) {
    if (k < axis) outer *= sizes[k];
    if (k > axis) inner *= sizes[k];
  }
  return {outer, inner};
}

// Steps `index` to the next position of `sizes` in row-major order; false after the last one.
inline bool next_index(std::vector<int64_t>& index, const std::vector<int64_t>& sizes) {
  for (size_t d = index.size(); d-- > 0;) {
    if (++index[d] < sizes[d]) return true;
    index[d] = 0;
  }
  return false;
}

// The numpy broadcast of two size lists (aligned at the last dim); nullopt when they do not broadcast.
inline std::optional<std::vector<int64_t>> broadcast_sizes(const std::vector<int64_t>& a,
                                                           const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t k = 0; k < rank; ++k) {
    const int64_t da = k < rank - a.size() ? 1 : a[k - (rank - a.size())];
    const int64_t db = k < rank - b.size() ? 1 : b[k - (rank - b.size())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[k] = da == 1 ? db : da;
  }
  return out;
}

// Whether `from` broadcasts unidirectionally onto `to` (numpy rules, `to` unchanged).
inline bool broadcasts_onto(const std::vector<int64_t>& from, const std::vector<int64_t>& to) {
  if (from.size() > to.size()) return false;
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[to.size() - from.size() + i]) return false;
  return true;
}

// Strides of `in` (numpy-broadcast to `out`'s rank and sizes) over `out`'s index space: 0 where `in` broadcasts.
inline std::vector<int64_t> broadcast_strides(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  std::vector<int64_t> strides(out.size(), 0);
  const std::vector<int64_t> own = row_major_strides(in);
  const size_t offset = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) strides[offset + i] = in[i] == 1 ? 0 : own[i];
  return strides;
}

// Calls fn(out_index, in_offsets...) for every element of `out`, with each input's element offset.
template <typename Fn>
void for_each_broadcast(const std::vector<int64_t>& out, const std::vector<std::vector<int64_t>>& in_strides, Fn&& fn) {
  const int64_t rank = static_cast<int64_t>(out.size());
  int64_t total = 1;
  for (int64_t s : out) total *= s;
  std::vector<int64_t> index(rank, 0);
  std::vector<int64_t> offsets(in_strides.size(), 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    fn(flat, offsets);
    for (int64_t d = rank - 1; d >= 0; --d) {
      ++index[d];
      for (size_t k = 0; k < in_strides.size(); ++k) offsets[k] += in_strides[k][d];
      if (index[d] < out[d]) break;
      for (size_t k = 0; k < in_strides.size(); ++k) offsets[k] -= in_strides[k][d] * out[d];
      index[d] = 0;
    }
  }
}

// Throws Error naming the op and node of `spec`.
[[noreturn]] inline void kernel_fail(const KernelSpec& spec, const std::string& message) {
  throw Error(spec.op_type + " kernel" + (spec.node_name.empty() ? "" : " for node '" + spec.node_name + "'") + ": " +
              message);
}

}  // namespace onnxtrain::reference
