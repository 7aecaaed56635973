// Resize's per-element math over the tables of resize_sampling.h, in plain C++ usable from host and device
// (ONNXTRAIN_HOST_DEVICE): the reference kernels run it on the CPU, the CUDA kernels one thread per
// element, so the CPU tests cover the device's arithmetic. Both directions gather, so no element is
// written twice and the sums need no atomics:
//   resize_value:   y[o] = Σ over the taps' combinations of Π weights · x[taps] (extrapolation_value where
//                   tf_crop_and_resize left the input);
//   resize_gradient: dx[i] = Σ over the outputs o whose taps read i (each axis's reach) of the weight
//                   products of those taps · dy[o], in row-major order of o.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/resize_sampling.h"
#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE

namespace onnxtrain {

inline constexpr int kResizeMaxRank = 8;

// Sizes and table offsets by value (a kernel argument); the tables are pointers next to it.
struct ResizeGeometry {
  int rank = 0;
  int64_t in[kResizeMaxRank] = {}, out[kResizeMaxRank] = {};
  int64_t tap_offset[kResizeMaxRank] = {}, reach_offset[kResizeMaxRank] = {};
};

inline ResizeGeometry resize_geometry(const std::vector<ResizeAxis>& axes, const ResizeTables& tables) {
  ResizeGeometry g;
  g.rank = static_cast<int>(axes.size());
  for (int k = 0; k < g.rank; ++k) {
    g.in[k] = axes[k].in;
    g.out[k] = axes[k].out;
    g.tap_offset[k] = tables.tap_offset[k];
    g.reach_offset[k] = tables.reach_offset[k];
  }
  return g;
}

// a·b rounded as a product: nvcc would otherwise fuse it with the sum it feeds (an FMA), and the device's
// bits would differ from the host's.
ONNXTRAIN_HOST_DEVICE inline double resize_product(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dmul_rn(a, b);
#else
  return a * b;
#endif
}

template <typename T>
ONNXTRAIN_HOST_DEVICE T resize_value(const ResizeGeometry& g, const ResizeTaps* table, const T* x, int64_t flat,
                                     double extrapolation_value) {
  const ResizeTaps* taps[kResizeMaxRank];
  int64_t in_strides[kResizeMaxRank];
  int64_t stride = 1;
  for (int k = g.rank - 1; k >= 0; --k) {
    const int64_t o = flat % g.out[k];
    flat /= g.out[k];
    taps[k] = &table[g.tap_offset[k] + o];
    if (taps[k]->extrapolated) return static_cast<T>(extrapolation_value);
    in_strides[k] = stride;
    stride *= g.in[k];
  }
  int c[kResizeMaxRank] = {};  // the odometer over each axis's taps, the last axis fastest
  double sum = 0.0;
  while (true) {
    double w = 1.0;
    int64_t source = 0;
    for (int k = 0; k < g.rank; ++k) {
      w = resize_product(w, taps[k]->weight[c[k]]);
      source += taps[k]->index[c[k]] * in_strides[k];
    }
    sum += resize_product(w, static_cast<double>(x[source]));
    int k = g.rank - 1;
    while (k >= 0 && ++c[k] == taps[k]->count) c[k--] = 0;
    if (k < 0) break;
  }
  return static_cast<T>(sum);
}

template <typename T>
ONNXTRAIN_HOST_DEVICE T resize_gradient(const ResizeGeometry& g, const ResizeTaps* table, const int64_t* reach,
                                        const T* dy, int64_t flat) {
  int64_t i[kResizeMaxRank], first[kResizeMaxRank], last[kResizeMaxRank], o[kResizeMaxRank];
  for (int k = g.rank - 1; k >= 0; --k) {
    i[k] = flat % g.in[k];
    flat /= g.in[k];
    first[k] = reach[g.reach_offset[k] + 2 * i[k]];
    last[k] = reach[g.reach_offset[k] + 2 * i[k] + 1];
    if (first[k] > last[k]) return T(0);  // no output reads this input position
    o[k] = first[k];
  }
  T sum = T(0);
  while (true) {
    const ResizeTaps* taps[kResizeMaxRank];
    int64_t dy_flat = 0;
    bool extrapolated = false;
    for (int k = 0; k < g.rank; ++k) {
      taps[k] = &table[g.tap_offset[k] + o[k]];
      extrapolated = extrapolated || taps[k]->extrapolated;
      dy_flat = dy_flat * g.out[k] + o[k];
    }
    if (!extrapolated) {
      int c[kResizeMaxRank] = {};
      const double d = static_cast<double>(dy[dy_flat]);
      while (true) {  // every combination of taps that reads element i (clamped taps may repeat one)
        double w = 1.0;
        bool reads_i = true;
        for (int k = 0; k < g.rank && reads_i; ++k) {
          reads_i = taps[k]->index[c[k]] == i[k];
          w = resize_product(w, taps[k]->weight[c[k]]);
        }
        if (reads_i) sum += static_cast<T>(resize_product(w, d));
        int k = g.rank - 1;
        while (k >= 0 && ++c[k] == taps[k]->count) c[k--] = 0;
        if (k < 0) break;
      }
    }
    int k = g.rank - 1;
    while (k >= 0 && ++o[k] > last[k]) {
      o[k] = first[k];
      --k;
    }
    if (k < 0) break;
  }
  return sum;
}

}  // namespace onnxtrain
