// The pooling cuDNN cannot do, computed directly: windows whose pads cuDNN's symmetric padding cannot
// express (asymmetric pads, odd SAME pads, ceil_mode overhangs), dilations, and MaxPool's Indices output.
// One output (forward) or one input element (backward, a gather over the windows that cover it, so
// deterministic without atomics) per call, with the reference kernels' exact rules (pooling.cc,
// pooling_grad.cc): the first maximum in window order wins, averages divide by the covered input
// elements or, with count_include_pad, by the window elements inside the padded input. Plain C++ with
// ONNXTRAIN_HOST_DEVICE functions: pooling_direct.cu runs them on the GPU, tests/cuda_nn_test.cc on the CPU.
//
//   DirectPool p = direct_pool(w, planes, /*max=*/true, include_pad, column_major);
//   for (o...) direct_pool_output(p, x_plane, o, &y[o], &indices[o]);     // + plane offsets
//   for (i...) dx[i] = direct_pool_grad(p, x_plane, dy_plane, i);
//   if (max_pool2d_in_two_passes(p)) {                  // MaxPool's backward over 2 spatial dims, faster
//     for (o...) winners[o] = max_pool2d_winner(p, x_plane, o);
//     for (i...) dx[i] = max_pool2d_grad(p, winners_plane, dy_plane, i);
//   }
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE
#include "kernels/reference/window.h"

namespace onnxtrain::cuda {

inline constexpr int kDirectPoolMaxDims = 3;

struct DirectPool {
  int spatial = 0;
  long long planes = 0, in_plane = 1, out_plane = 1;
  long long in[kDirectPoolMaxDims] = {}, out[kDirectPoolMaxDims] = {}, kernel[kDirectPoolMaxDims] = {};
  long long stride[kDirectPoolMaxDims] = {}, dilation[kDirectPoolMaxDims] = {};
  long long pad_begin[kDirectPoolMaxDims] = {}, pad_end[kDirectPoolMaxDims] = {};
  bool max = true, include_pad = false, column_major_indices = false;
};

// From the reference geometry; spatial dims beyond kDirectPoolMaxDims are not supported (callers check).
inline DirectPool direct_pool(const reference::WindowGeometry& w, int64_t planes, bool max, bool include_pad,
                              bool column_major_indices) {
  DirectPool p;
  p.spatial = static_cast<int>(w.spatial());
  p.planes = planes;
  p.max = max;
  p.include_pad = include_pad;
  p.column_major_indices = column_major_indices;
  for (int d = 0; d < p.spatial && d < kDirectPoolMaxDims; ++d) {
    p.in[d] = w.input[d];
    p.out[d] = w.output[d];
    p.kernel[d] = w.kernel[d];
    p.stride[d] = w.strides[d];
    p.dilation[d] = w.dilations[d];
    p.pad_begin[d] = w.pad_begin[d];
    p.pad_end[d] = w.pad_end[d];
    p.in_plane *= w.input[d];
    p.out_plane *= w.output[d];
  }
  return p;
}

// Row-major position of flat index `flat` in `sizes` (spatial dims).
ONNXTRAIN_HOST_DEVICE inline void direct_unflatten(long long flat, const long long* sizes, int spatial,
                                                   long long* index) {
  for (int d = spatial - 1; d >= 0; --d) {
    index[d] = flat % sizes[d];
    flat /= sizes[d];
  }
}

// Output `o` (in-plane flat index) of one plane: the max (first in window order) or average over its
// window, and for max the in-plane row-major offset of the winner (-1 when the window holds no input).
ONNXTRAIN_HOST_DEVICE inline float direct_pool_output(const DirectPool& p, const float* x_plane, long long o,
                                                      long long* winner) {
  long long out_pos[kDirectPoolMaxDims] = {}, k[kDirectPoolMaxDims] = {};
  direct_unflatten(o, p.out, p.spatial, out_pos);
  long long window = 1;
  for (int d = 0; d < p.spatial; ++d) window *= p.kernel[d];
  float best = 0.0f;
  long long best_offset = -1, counted = 0;
  double sum = 0.0;
  for (long long e = 0; e < window; ++e) {
    direct_unflatten(e, p.kernel, p.spatial, k);
    long long offset = 0;
    bool inside = true, padded = true;
    for (int d = 0; d < p.spatial; ++d) {
      const long long pos = out_pos[d] * p.stride[d] - p.pad_begin[d] + k[d] * p.dilation[d];
      inside = inside && pos >= 0 && pos < p.in[d];
      padded = padded && pos >= -p.pad_begin[d] && pos < p.in[d] + p.pad_end[d];
      offset = offset * p.in[d] + pos;
    }
    if (p.max) {
      if (inside && (best_offset < 0 || x_plane[offset] > best)) {
        best = x_plane[offset];
        best_offset = offset;
      }
    } else {
      if (inside) sum += static_cast<double>(x_plane[offset]);
      if (p.include_pad ? padded : inside) ++counted;
    }
  }
  if (winner) *winner = best_offset;
  if (p.max) return best_offset < 0 ? -INFINITY : best;
  return counted > 0 ? static_cast<float>(sum / static_cast<double>(counted)) : 0.0f;
}

// MaxPool's Indices value of a winner: n·C·Π(D) + c·Π(D) + its offset in the plane, row or column major.
ONNXTRAIN_HOST_DEVICE inline long long direct_pool_index(const DirectPool& p, long long plane, long long winner) {
  if (winner < 0) return -1;
  long long offset = winner;
  if (p.column_major_indices) {
    long long index[kDirectPoolMaxDims] = {};
    direct_unflatten(winner, p.in, p.spatial, index);
    offset = 0;
    long long stride = 1;
    for (int d = 0; d < p.spatial; ++d) {
      offset += index[d] * stride;
      stride *= p.in[d];
    }
  }
  return plane * p.in_plane + offset;
}

// dX at in-plane element `i` of one plane: the dY of every window that covers it and (max) picks it,
// divided (average) by that window's count. Windows are visited in row-major output order.
ONNXTRAIN_HOST_DEVICE inline float direct_pool_grad(const DirectPool& p, const float* x_plane, const float* dy_plane,
                                                    long long i) {
  long long pos[kDirectPoolMaxDims] = {}, k[kDirectPoolMaxDims] = {}, out_pos[kDirectPoolMaxDims] = {};
  direct_unflatten(i, p.in, p.spatial, pos);
  long long window = 1;
  for (int d = 0; d < p.spatial; ++d) window *= p.kernel[d];
  double sum = 0.0;
  // Each window element k that lands on `pos` names at most one output: o = (pos + pad - k·dilation) / stride.
  for (long long e = 0; e < window; ++e) {
    direct_unflatten(e, p.kernel, p.spatial, k);
    bool covers = true;
    long long o = 0;
    for (int d = 0; d < p.spatial && covers; ++d) {
      const long long shifted = pos[d] + p.pad_begin[d] - k[d] * p.dilation[d];
      covers = shifted >= 0 && shifted % p.stride[d] == 0 && shifted / p.stride[d] < p.out[d];
      out_pos[d] = covers ? shifted / p.stride[d] : 0;
      o = o * p.out[d] + out_pos[d];
    }
    if (!covers) continue;
    long long winner = -1;
    if (p.max) {
      direct_pool_output(p, x_plane, o, &winner);
      if (winner == i) sum += static_cast<double>(dy_plane[o]);
    } else {
      // The forward's divisor of window o, recounted.
      long long counted = 0;
      long long kk[kDirectPoolMaxDims] = {};
      for (long long f = 0; f < window; ++f) {
        direct_unflatten(f, p.kernel, p.spatial, kk);
        bool inside = true, padded = true;
        for (int d = 0; d < p.spatial; ++d) {
          const long long q = out_pos[d] * p.stride[d] - p.pad_begin[d] + kk[d] * p.dilation[d];
          inside = inside && q >= 0 && q < p.in[d];
          padded = padded && q >= -p.pad_begin[d] && q < p.in[d] + p.pad_end[d];
        }
        if (p.include_pad ? padded : inside) ++counted;
      }
      if (counted > 0) sum += static_cast<double>(dy_plane[o]) / static_cast<double>(counted);
    }
  }
  return static_cast<float>(sum);
}

// MaxPool's backward in two passes, for 2 spatial dims and planes under 2^31 elements (32-bit index
// arithmetic). direct_pool_grad finds the maximum of every window that covers an input element again
// (at 3x3 stride 2, some 20 windows' worth of reads and 64-bit divisions per element: ResNet-50's stem took
// 25.7 ms of a 120 ms step at batch 64 on an H200). Here each window's winner is found once (its in-plane
// offset, -1 when the window covers no input), then each input element sums the dY of the windows whose
// winner it is, in direct_pool_grad's order and with its rules: the same dX.
ONNXTRAIN_HOST_DEVICE inline bool max_pool2d_in_two_passes(const DirectPool& p) {
  return p.max && p.spatial == 2 && p.in_plane < (1LL << 31) && p.out_plane < (1LL << 31);
}

// The winner of output `o` (in-plane flat index): the first maximum in window order, as direct_pool_output.
ONNXTRAIN_HOST_DEVICE inline int max_pool2d_winner(const DirectPool& p, const float* x_plane, int o) {
  const int in_h = static_cast<int>(p.in[0]), in_w = static_cast<int>(p.in[1]);
  const int out_w = static_cast<int>(p.out[1]), oh = o / out_w, ow = o % out_w;
  int best = -1;
  float best_value = 0.0f;
  for (int kh = 0; kh < static_cast<int>(p.kernel[0]); ++kh) {
    const int h =
        oh * static_cast<int>(p.stride[0]) - static_cast<int>(p.pad_begin[0]) + kh * static_cast<int>(p.dilation[0]);
    if (h < 0 || h >= in_h) continue;
    for (int kw = 0; kw < static_cast<int>(p.kernel[1]); ++kw) {
      const int w =
          ow * static_cast<int>(p.stride[1]) - static_cast<int>(p.pad_begin[1]) + kw * static_cast<int>(p.dilation[1]);
      if (w < 0 || w >= in_w) continue;
      const int offset = h * in_w + w;
      if (best < 0 || x_plane[offset] > best_value) {
        best = offset;
        best_value = x_plane[offset];
      }
    }
  }
  return best;
}

// dX at in-plane element `i` from the plane's winners: windows visited as in direct_pool_grad.
ONNXTRAIN_HOST_DEVICE inline float max_pool2d_grad(const DirectPool& p, const int* winners_plane, const float* dy_plane,
                                                   int i) {
  const int in_w = static_cast<int>(p.in[1]), h = i / in_w, w = i % in_w;
  const int out_h = static_cast<int>(p.out[0]), out_w = static_cast<int>(p.out[1]);
  const int stride_h = static_cast<int>(p.stride[0]), stride_w = static_cast<int>(p.stride[1]);
  double sum = 0.0;
  for (int kh = 0; kh < static_cast<int>(p.kernel[0]); ++kh) {
    const int shifted_h = h + static_cast<int>(p.pad_begin[0]) - kh * static_cast<int>(p.dilation[0]);
    if (shifted_h < 0 || shifted_h % stride_h != 0 || shifted_h / stride_h >= out_h) continue;
    for (int kw = 0; kw < static_cast<int>(p.kernel[1]); ++kw) {
      const int shifted_w = w + static_cast<int>(p.pad_begin[1]) - kw * static_cast<int>(p.dilation[1]);
      if (shifted_w < 0 || shifted_w % stride_w != 0 || shifted_w / stride_w >= out_w) continue;
      const int o = (shifted_h / stride_h) * out_w + shifted_w / stride_w;
      if (winners_plane[o] == i) sum += static_cast<double>(dy_plane[o]);
    }
  }
  return static_cast<float>(sum);
}

}  // namespace onnxtrain::cuda
