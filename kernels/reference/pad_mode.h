// Pad's modes and the input element each padded position reads, shared by the Pad kernel (pad.cc) and the
// PadGrad kernel (pad_grad.cc), which adds each dY element into the x element Pad copied it from.
//
//   PadMode mode = read_pad_mode(spec);
//   for_each_pad_source(in_sizes, padded_sizes, begins, mode, [&](int64_t flat, int64_t source) {
//     ...  // source: the flat input index position `flat` reads, -1 for the constant
//   });
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/pad_index.h"
#include "kernels/reference/kernel_plumbing.h"

namespace onnxtrain::reference {

using onnxtrain::pad_source_index;
using onnxtrain::PadMode;

// Pad's `mode` attribute (default constant); fails on an unknown name.
inline PadMode read_pad_mode(const KernelSpec& spec) {
  const std::string mode = spec.attributes.get_string("mode", "constant");
  if (mode == "constant") return PadMode::Constant;
  if (mode == "reflect") return PadMode::Reflect;
  if (mode == "edge") return PadMode::Edge;
  if (mode == "wrap") return PadMode::Wrap;
  kernel_fail(spec, "unknown mode '" + mode + "' (expected constant, reflect, edge or wrap)");
}

// Calls visit(flat, source) for every position of the padded tensor (sizes `padded`) in row-major order,
// with `source` the flat index of the input element (input sizes `in`) it reads, or -1 for the constant.
// begins[k] is the begin pad of axis k (negative crops).
template <typename Visit>
void for_each_pad_source(const std::vector<int64_t>& in, const std::vector<int64_t>& padded,
                         const std::vector<int64_t>& begins, PadMode mode, Visit&& visit) {
  const auto rank = static_cast<int64_t>(in.size());
  const std::vector<int64_t> in_strides = row_major_strides(in);
  const int64_t total = product_of(padded);
  std::vector<int64_t> index(rank, 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t source = 0;
    for (int64_t k = 0; k < rank && source >= 0; ++k) {
      const int64_t i = pad_source_index(index[k] - begins[k], in[k], mode);
      source = i < 0 ? -1 : source + i * in_strides[k];
    }
    visit(flat, source);
    next_index(index, padded);
  }
}

}  // namespace onnxtrain::reference
