// What the data-movement reference kernels (Shape, Gather, Reshape, Concat, Slice, Transpose, Expand,
// Pad, ...) share beyond kernel_plumbing.h: a kernel class that keeps its spec, index-input checks and
// byte copies. They move elements of any fixed-size dtype as bytes, so one loop serves
// float16, int8 and bool alike. Offsets and strides are counted in elements.
//
//   // a transpose of a (2,3) input: read it with strides (1,3) into a (3,2) output
//   copy_strided(in, /*base=*/0, {1, 3}, out);
//   std::vector<int64_t> starts = read_int_values(inputs[1]);   // int32 or int64 index/shape input
#pragma once

#include <cstdint>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include "kernels/reference/kernel_plumbing.h"

namespace onnxtrain::reference {

// Calls fn(W{}) with the unsigned integer type W of `bytes` (1, 2, 4 or 8), the word that moves one
// element; false for other sizes. Shared with the "cpu" and "cuda" data-movement kernels.
template <typename Fn>
bool dispatch_element_size(size_t bytes, Fn&& fn) {
  switch (bytes) {
    case 1:
      fn(uint8_t{});
      return true;
    case 2:
      fn(uint16_t{});
      return true;
    case 4:
      fn(uint32_t{});
      return true;
    case 8:
      fn(uint64_t{});
      return true;
    default:
      return false;
  }
}

// Transpose's `perm` attribute, or the reversed dims of input 0 where it is absent (not yet validated).
inline std::vector<int64_t> transpose_perm(const KernelSpec& spec) {
  if (spec.attributes.has("perm")) return spec.attributes.get_ints("perm");
  std::vector<int64_t> perm(spec.inputs[0].sizes.size());
  std::iota(perm.rbegin(), perm.rend(), 0);
  return perm;
}

// A KernelFactory for a kernel class whose constructor validates the spec.
template <typename K>
std::unique_ptr<Kernel> make_kernel(const KernelSpec& spec) {
  return std::make_unique<K>(spec);
}

// A kernel that keeps its spec, so run() can name the op and node when the data is bad.
class DataMovementKernel : public Kernel {
 protected:
  explicit DataMovementKernel(const KernelSpec& spec) : spec_(spec) {}
  [[noreturn]] void fail(const std::string& message) const { kernel_fail(spec_, message); }
  // Fails when the sizes the op computes from its run-time inputs differ from the allocated output's.
  void require_output_sizes(const TensorView& out, const std::vector<int64_t>& computed, size_t index = 0) const;
  // Fails unless a backward op's x_shape input (GatherGrad, PadGrad, SliceGrad) holds dX's allocated sizes.
  void require_x_shape(const TensorView& x_shape, const TensorView& dx) const;

  KernelSpec spec_;
};

inline void DataMovementKernel::require_output_sizes(const TensorView& out, const std::vector<int64_t>& computed,
                                                     size_t index) const {
  if (out.sizes != computed) {
    fail("output " + std::to_string(index) + " has sizes " + sizes_to_string(out.sizes) + " but the inputs give " +
         sizes_to_string(computed));
  }
}

// The view of optional input `i`, or nullptr when it is omitted.
inline const TensorView* optional_input(std::span<const TensorView> inputs, size_t i) {
  return i < inputs.size() && inputs[i].present() ? &inputs[i] : nullptr;
}

// An index/shape input (starts, axes, pads, shape, repeats, indices, ...): int32 or int64.
inline void require_index_input(const KernelSpec& spec, size_t i, const std::string& what) {
  DType dtype = spec.inputs[i].dtype;
  if (dtype != DType::Int32 && dtype != DType::Int64)
    kernel_fail(spec, what + " must be int32 or int64, got " + std::string(dtype_name(dtype)));
}

// Prepare-time checks of a backward op (dY, x_shape, ...) -> dX whose dX sizes are x_shape (GatherGrad,
// PadGrad, SliceGrad): the first `required` inputs present, dY float32/float64, every present input
// from 1 on int32/int64 (`names` names them, from dY on), dX of dY's dtype. Returns dY's dtype.
inline DType require_shape_grad_inputs(const KernelSpec& spec, size_t required, const std::vector<std::string>& names) {
  require_inputs(spec, required);
  const DType dtype = require_dtype_in(spec, 0, kFloatDTypes);
  for (size_t i = 1; i < names.size(); ++i)
    if (has_input(spec, i)) require_index_input(spec, i, names[i]);
  require_output(spec, 0, dtype, require_output(spec, 0).sizes);
  return dtype;
}

// --- run-time helpers ---
inline std::byte* bytes_of(const TensorView& view) { return static_cast<std::byte*>(view.data); }

// The elements of an int32 or int64 view, widened.
inline std::vector<int64_t> read_int_values(const TensorView& view) {
  const int64_t n = view.numel();
  std::vector<int64_t> values(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    values[i] = view.dtype == DType::Int32 ? int64_t{view.as<int32_t>()[i]} : view.as<int64_t>()[i];
  return values;
}

inline void DataMovementKernel::require_x_shape(const TensorView& x_shape, const TensorView& dx) const {
  if (const std::vector<int64_t> values = read_int_values(x_shape); values != dx.sizes) {
    fail("x_shape " + sizes_to_string(values) + " differs from the output's sizes " + sizes_to_string(dx.sizes));
  }
}

inline void copy_elements(const TensorView& src, int64_t src_offset, const TensorView& dst, int64_t dst_offset,
                          int64_t count) {
  if (count <= 0) return;
  const size_t element = element_bytes(src.dtype);
  std::memcpy(bytes_of(dst) + dst_offset * element, bytes_of(src) + src_offset * element, count * element);
}

// dst[i_0..i_k] = src[base + sum_k i_k * src_strides[k]] over dst's sizes (a stride 0 broadcasts, a
// negative one walks backwards).
inline void copy_strided(const TensorView& src, int64_t base, const std::vector<int64_t>& src_strides,
                         const TensorView& dst) {
  const size_t element = element_bytes(src.dtype);
  const std::byte* from = bytes_of(src);
  std::byte* to = bytes_of(dst);
  for_each_broadcast(dst.sizes, {src_strides}, [&](int64_t flat, const std::vector<int64_t>& offsets) {
    std::memcpy(to + flat * element, from + (base + offsets[0]) * element, element);
  });
}

}  // namespace onnxtrain::reference
