// What the elementwise, reduction, cast and softmax reference kernels share beyond kernel_plumbing.h:
// bool elements as bytes and a broadcast of two inputs that fails naming both.
//
//   const std::vector<int64_t> out = broadcast_sizes_or_fail(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
//   require_output(spec, 0, DType::Bool, out);
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/reference/element_convert.h"
#include "kernels/reference/kernel_plumbing.h"

namespace onnxtrain::reference {

// Bool elements are bytes; any non-zero byte is true.
inline bool read_bool(const TensorView& v, int64_t i) { return static_cast<const uint8_t*>(v.data)[i] != 0; }
inline void write_bool(const TensorView& v, int64_t i, bool b) { static_cast<uint8_t*>(v.data)[i] = b ? 1 : 0; }

// Numpy broadcast of two size lists, or fails naming both.
inline std::vector<int64_t> broadcast_sizes_or_fail(const KernelSpec& spec, const std::vector<int64_t>& a,
                                                    const std::vector<int64_t>& b) {
  std::optional<std::vector<int64_t>> out = broadcast_sizes(a, b);
  if (!out) kernel_fail(spec, "sizes " + sizes_to_string(a) + " and " + sizes_to_string(b) + " do not broadcast");
  return *out;
}

}  // namespace onnxtrain::reference
