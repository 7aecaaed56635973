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
#include <span>
#include <string>
#include <vector>

#include "kernels/reference/kernel_plumbing.h"

namespace onnxtrain::reference {

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
