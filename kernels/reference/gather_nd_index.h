// What GatherND and GatherNDGrad share (the reference kernels, and the CUDA kernels' prepare-time checks):
// data viewed as (batches, rows, inner) and the indices as (batches, count, k). The first batch_dims axes
// are the batches; each index row holds k coordinates into the next k data axes, naming one of the `rows`
// slices of `inner` elements of its batch.
//
//   const GatherNDLayout l = gather_nd_layout(spec, data_sizes, index_sizes);  // prepare; fails naming the op
//   const std::vector<int64_t> rows = gather_nd_rows(spec, l, indices);          // run; one per index row
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/reference/copy.h"

namespace onnxtrain::reference {

struct GatherNDLayout {
  int64_t batch_dims = 0, k = 1;
  int64_t batches = 1, rows = 1, inner = 1, count = 1;
  std::vector<int64_t> dims;       // the k indexed data axes
  std::vector<int64_t> out_sizes;  // indices[:-1] + data[batch_dims + k:]
};

// Validates data and indices sizes against the `batch_dims` attribute and returns the layout.
inline GatherNDLayout gather_nd_layout(const KernelSpec& spec, const std::vector<int64_t>& data,
                                       const std::vector<int64_t>& indices) {
  GatherNDLayout l;
  l.batch_dims = spec.attributes.get_int("batch_dims", 0);
  const auto r = static_cast<int64_t>(data.size()), q = static_cast<int64_t>(indices.size());
  if (r == 0 || q == 0) kernel_fail(spec, "data and indices must have rank >= 1");
  if (l.batch_dims < 0 || l.batch_dims >= std::min(r, q)) {
    kernel_fail(spec, "batch_dims " + std::to_string(l.batch_dims) + " must be 0.." +
                          std::to_string(std::min(r, q) - 1) + " for data " + sizes_to_string(data) + " and indices " +
                          sizes_to_string(indices));
  }
  const int64_t b = l.batch_dims;
  for (int64_t d = 0; d < b; ++d) {
    if (data[d] != indices[d]) {
      kernel_fail(spec, "batch axis " + std::to_string(d) + " differs: data " + sizes_to_string(data) + ", indices " +
                            sizes_to_string(indices));
    }
  }
  l.k = indices.back();
  if (l.k < 1 || l.k > r - b) {
    kernel_fail(spec, "the last axis of indices " + sizes_to_string(indices) + " must be 1.." + std::to_string(r - b) +
                          " for data " + sizes_to_string(data));
  }
  l.batches = product_of(data, 0, b);
  l.rows = product_of(data, b, b + l.k);
  l.inner = product_of(data, b + l.k);
  l.count = product_of(indices, b, q - 1);
  l.dims.assign(data.begin() + b, data.begin() + b + l.k);
  l.out_sizes.assign(indices.begin(), indices.end() - 1);
  l.out_sizes.insert(l.out_sizes.end(), data.begin() + b + l.k, data.end());
  return l;
}

// The slice each index row names within its batch (row-major over `dims`; negative coordinates count
// from the end), batches * count of them. A coordinate outside [-dim, dim) fails naming it.
inline std::vector<int64_t> gather_nd_rows(const KernelSpec& spec, const GatherNDLayout& l, const TensorView& indices) {
  const std::vector<int64_t> values = read_int_values(indices);
  std::vector<int64_t> rows(values.size() / static_cast<size_t>(l.k));
  for (size_t row = 0; row < rows.size(); ++row) {
    int64_t flat = 0;
    for (int64_t c = 0; c < l.k; ++c) {
      const int64_t v = values[row * l.k + c], n = l.dims[c];
      if (v < -n || v >= n) {
        kernel_fail(spec, "index " + std::to_string(v) + " (index row " + std::to_string(row) + ", coordinate " +
                              std::to_string(c) + ") is out of range for data axis " +
                              std::to_string(l.batch_dims + c) + " of size " + std::to_string(n));
      }
      flat = flat * n + (v < 0 ? v + n : v);
    }
    rows[row] = flat;
  }
  return rows;
}

}  // namespace onnxtrain::reference
