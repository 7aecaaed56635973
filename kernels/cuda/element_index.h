// Index math of the CUDA GatherElements, GatherElementsGrad, ScatterElements, GatherND and GatherNDGrad
// kernels, in plain C++ usable from host and device like strided_index.h, so tests/cuda_data_movement_test.cc
// checks it on the CPU against the reference kernels. The layouts and prepare-time checks are the
// reference's (kernels/reference/elements_index.h, gather_nd_index.h).
//
// The backward and scatter sides are written as gathers: each output element scans the few index
// positions that can name it, in increasing order, and folds in what they carry. One thread owns each
// output element, so there are no atomics, repeated indices combine in the reference's order and the
// results are deterministic and equal the reference's bit for bit.
//
//   ElementsGeometry g = elements_geometry(data_sizes, index_sizes, axis);          // host
//   int64_t src = gather_elements_source(flat, g, indices, is_int64);              // -1: out of range
//   T v = scatter_elements_fold(flat, g, indices, is_int64, data[flat], updates, op, &bad);
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/cuda/strided_index.h"

namespace onnxtrain::cuda_index {

// --- GatherElements, GatherElementsGrad, ScatterElements: data and indices of one rank, axis `axis` ---

struct ElementsGeometry {
  int rank = 0, axis = 0;
  int64_t n = 0;  // data's size along the axis (the range of the indices)
  int64_t m = 0;  // the indices' size along the axis (how many positions may name one element)
  int64_t data_sizes[kMaxRank] = {}, data_strides[kMaxRank] = {};
  int64_t index_sizes[kMaxRank] = {}, index_strides[kMaxRank] = {};
};

// Host: the geometry of data and indices of rank <= kMaxRank (the kernels check it at prepare).
inline ElementsGeometry elements_geometry(const std::vector<int64_t>& data, const std::vector<int64_t>& indices,
                                          int64_t axis) {
  ElementsGeometry g;
  g.rank = static_cast<int>(data.size());
  g.axis = static_cast<int>(axis);
  g.n = data[axis];
  g.m = indices[axis];
  int64_t data_stride = 1, index_stride = 1;
  for (int k = g.rank - 1; k >= 0; --k) {
    g.data_sizes[k] = data[k];
    g.index_sizes[k] = indices[k];
    g.data_strides[k] = data_stride;
    g.index_strides[k] = index_stride;
    data_stride *= data[k];
    index_stride *= indices[k];
  }
  return g;
}

// The data element that index position `flat` (row-major over the indices) names: its coordinates with
// the one along the axis replaced by the index; -1 when the index is outside [-n, n).
ONNXTRAIN_HOST_DEVICE inline int64_t gather_elements_source(int64_t flat, const ElementsGeometry& g,
                                                            const void* indices, bool indices_int64) {
  const int64_t v = gather_row(read_index(indices, indices_int64, flat), g.n);
  if (v < 0) return -1;
  int64_t offset = 0;
  for (int k = g.rank - 1; k >= 0; --k) {
    const int64_t c = flat % g.index_sizes[k];
    flat /= g.index_sizes[k];
    offset += (k == g.axis ? v : c) * g.data_strides[k];
  }
  return offset;
}

// For data element `flat`: the index position of its coordinates with the one along the axis set to 0
// (the positions that may name the element are base + j * index_strides[axis], j < m), and its
// coordinate along the axis in *along; -1 when a coordinate off the axis lies beyond the indices, so
// that no position names the element.
ONNXTRAIN_HOST_DEVICE inline int64_t elements_index_base(int64_t flat, const ElementsGeometry& g, int64_t* along) {
  int64_t base = 0;
  for (int k = g.rank - 1; k >= 0; --k) {
    const int64_t c = flat % g.data_sizes[k];
    flat /= g.data_sizes[k];
    if (k == g.axis) {
      *along = c;
    } else if (c >= g.index_sizes[k]) {
      return -1;
    } else {
      base += c * g.index_strides[k];
    }
  }
  return base;
}

// Data element `flat` after the positions naming it were applied in increasing order: value =
// op(value, source[position]) from `value`, source indexed like the indices (ScatterElements' updates,
// GatherElementsGrad's dY). Sets *bad when an index it scanned is out of range; only the element at
// coordinate 0 along the axis reports, so each index is reported by one thread.
template <typename T, typename Op>
ONNXTRAIN_HOST_DEVICE T scatter_elements_fold(int64_t flat, const ElementsGeometry& g, const void* indices,
                                              bool indices_int64, T value, const T* source, Op op, bool* bad) {
  int64_t along = 0;
  const int64_t base = elements_index_base(flat, g, &along);
  if (base < 0) return value;
  const int64_t step = g.index_strides[g.axis];
  for (int64_t j = 0; j < g.m; ++j) {
    const int64_t position = base + j * step;
    const int64_t named = gather_row(read_index(indices, indices_int64, position), g.n);
    if (named < 0 && along == 0) *bad = true;
    if (named == along) value = op(value, source[position]);
  }
  return value;
}

// --- GatherND, GatherNDGrad: data (batches, rows, inner), indices (batches, count, k) ---

struct GatherNDGeometry {
  int64_t rows = 1, inner = 1, count = 0;
  int k = 1;
  int64_t dims[kMaxRank] = {};  // the k indexed data axes
};

// The slice within its batch that index row `j` (over all batches: batch * count + local) names, row-major
// over the k indexed axes; -1 when a coordinate is outside [-dim, dim).
ONNXTRAIN_HOST_DEVICE inline int64_t gather_nd_row(int64_t j, const GatherNDGeometry& g, const void* indices,
                                                   bool indices_int64) {
  int64_t row = 0;
  for (int c = 0; c < g.k; ++c) {
    const int64_t v = gather_row(read_index(indices, indices_int64, j * g.k + c), g.dims[c]);
    if (v < 0) return -1;
    row = row * g.dims[c] + v;
  }
  return row;
}

// The data element that output position `flat` reads, or -1 when its index row is out of range.
ONNXTRAIN_HOST_DEVICE inline int64_t gather_nd_source(int64_t flat, const GatherNDGeometry& g, const void* indices,
                                                      bool indices_int64) {
  const int64_t j = flat / g.inner;
  const int64_t row = gather_nd_row(j, g, indices, indices_int64);
  return row < 0 ? -1 : ((j / g.count) * g.rows + row) * g.inner + flat % g.inner;
}

}  // namespace onnxtrain::cuda_index
