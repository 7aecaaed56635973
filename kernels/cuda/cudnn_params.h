// The host-side arithmetic of the cuDNN/cuBLAS kernels (conv.cc, conv_grad.cc, pooling.cc, batch_norm.cc,
// lrn.cc, gemm.cc), in plain C++ with no CUDA include, so the CPU tests (tests/cuda_nn_test.cc) cover it:
// - cuDNN windows: the reference WindowGeometry (kernels/reference/window.h) mapped onto cuDNN's
//   symmetric pads, padded to the 2 spatial dims cuDNN needs at least, or the reason it cannot be;
// - the cuBLAS call of a row-major Gemm and the strided-batched calls of a broadcasting MatMul;
// - BatchNormalization's running statistics from cuDNN's unbiased batch variance (ONNX's rule updates
//   them with the population variance).
//
//   CudnnWindow cw = cudnn_window(w, WindowUse::Conv);
//   if (!cw.problem.empty()) kernel_fail(spec, cw.problem);
//   MatMulPlan plan = plan_matmul(a.sizes, b.sizes);   // plan.calls: one cublasSgemmStridedBatched each
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE
#include "kernels/reference/common.h"
#include "kernels/reference/window.h"

namespace onnxtrain::cuda {

inline bool fits_int(int64_t v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }

// cuDNN's output size of one axis padded by `pad` at both ends: floor((in + 2·pad - dilated) / stride) + 1.
inline int64_t cudnn_output_size(int64_t input, int64_t pad, int64_t kernel, int64_t stride, int64_t dilation) {
  const int64_t span = input + 2 * pad - ((kernel - 1) * dilation + 1);
  if (span < 0) return 0;
  return span / stride + 1;
}

// Which op a window is for: pools take no dilation and, for AveragePool with count_include_pad, must not
// let cuDNN count window elements that lie beyond the node's own end padding.
enum class WindowUse { Conv, MaxPool, AveragePoolExcludePad, AveragePoolIncludePad };

// A window as cuDNN's Nd descriptors take it: at least 2 spatial dims (a 1-D window gets a unit axis).
struct CudnnWindow {
  std::vector<int> kernel, pads, strides, dilations;
  std::string problem;  // empty when cuDNN computes exactly the reference's windows
};

// Maps a forward window onto cuDNN. Every window starts at out·stride - pad_begin, so the result is the
// reference's whenever cuDNN's symmetric padding by pad_begin yields the node's output size; the end
// padding then only decides how many windows there are. Asymmetric pads, auto_pad SAME with an odd
// total and ceil_mode usually change that count and are refused (the problem names the attribute).
inline CudnnWindow cudnn_window(const reference::WindowGeometry& w, WindowUse use) {
  CudnnWindow cw;
  const size_t n = w.spatial();
  if (n < 1 || n > 3) {
    cw.problem = "the cuDNN kernel supports 1 to 3 spatial dims, got " + std::to_string(n);
    return cw;
  }
  for (size_t d = 0; d < n; ++d) {
    const std::string axis = " on spatial axis " + std::to_string(d);
    if (!fits_int(w.input[d]) || !fits_int(w.kernel[d]) || !fits_int(w.strides[d]) || !fits_int(w.dilations[d]) ||
        !fits_int(w.pad_begin[d])) {
      cw.problem = "window sizes" + axis + " do not fit cuDNN's int";
      return cw;
    }
    if (use != WindowUse::Conv && w.dilations[d] != 1) {
      cw.problem = "dilations" + axis + " = " + std::to_string(w.dilations[d]) + ": cuDNN pooling has no dilation";
      return cw;
    }
    const int64_t dilated = (w.kernel[d] - 1) * w.dilations[d] + 1;
    const int64_t produced = cudnn_output_size(w.input[d], w.pad_begin[d], w.kernel[d], w.strides[d], w.dilations[d]);
    if (produced != w.output[d]) {
      cw.problem = "pads" + axis + " (begin " + std::to_string(w.pad_begin[d]) + ", end " +
                   std::to_string(w.pad_end[d]) + ", auto_pad " + w.auto_pad +
                   "): cuDNN pads both ends by the begin pad and would produce " + std::to_string(produced) +
                   " outputs where the node has " + std::to_string(w.output[d]) +
                   " (asymmetric pads, auto_pad SAME with an odd total pad and ceil_mode overhangs are not "
                   "supported by the cuDNN kernel)";
      return cw;
    }
    if (use != WindowUse::Conv) {
      const int64_t last_start = (w.output[d] - 1) * w.strides[d] - w.pad_begin[d];
      if (w.output[d] > 0 && (last_start >= w.input[d] || w.pad_begin[d] >= dilated)) {
        cw.problem = "pads" + axis + ": a window lies wholly in the padding (kernel_shape " +
                     std::to_string(w.kernel[d]) + ", pad " + std::to_string(w.pad_begin[d]) + ")";
        return cw;
      }
      if (use == WindowUse::AveragePoolIncludePad && w.output[d] > 0 &&
          last_start + dilated > w.input[d] + w.pad_end[d]) {
        cw.problem = "count_include_pad=1 with a last window" + axis +
                     " reaching past the end pad (ceil_mode): cuDNN would count the overhang";
        return cw;
      }
    }
    cw.kernel.push_back(static_cast<int>(w.kernel[d]));
    cw.pads.push_back(static_cast<int>(w.pad_begin[d]));
    cw.strides.push_back(static_cast<int>(w.strides[d]));
    cw.dilations.push_back(static_cast<int>(w.dilations[d]));
  }
  if (n == 1) {  // cuDNN's Nd descriptors need 2 spatial dims: a trailing unit axis
    cw.kernel.push_back(1);
    cw.pads.push_back(0);
    cw.strides.push_back(1);
    cw.dilations.push_back(1);
  }
  return cw;
}

// A Conv window that cuDNN computes after the operand it pads is padded explicitly: cuDNN pads each axis
// by the smaller of the node's two pads at both ends, and a zero border of extra_begin/extra_end
// elements (the rest of each pad) is written around the operand first (conv_padding.h). Asymmetric pads
// and auto_pad SAME with an odd total pad take this path; ONNX Runtime's CUDA Conv pads the same way.
struct CudnnConvWindow {
  CudnnWindow window;                           // over the padded operand
  std::vector<int64_t> extra_begin, extra_end;  // per spatial axis of the node; empty: nothing padded
  bool padded() const { return !extra_begin.empty(); }
};

inline CudnnConvWindow cudnn_conv_window(const reference::WindowGeometry& w) {
  CudnnConvWindow c{cudnn_window(w, WindowUse::Conv), {}, {}};
  if (c.window.problem.empty()) return c;
  reference::WindowGeometry symmetric = w;
  std::vector<int64_t> extra_begin(w.spatial()), extra_end(w.spatial());
  for (size_t d = 0; d < w.spatial(); ++d) {
    const int64_t common = std::min(w.pad_begin[d], w.pad_end[d]);
    if (common < 0) return c;  // a negative pad crops: keep the first problem
    extra_begin[d] = w.pad_begin[d] - common;
    extra_end[d] = w.pad_end[d] - common;
    symmetric.input[d] += extra_begin[d] + extra_end[d];
    symmetric.pad_begin[d] = symmetric.pad_end[d] = common;
  }
  CudnnWindow padded = cudnn_window(symmetric, WindowUse::Conv);
  if (!padded.problem.empty()) return c;
  return {std::move(padded), std::move(extra_begin), std::move(extra_end)};
}

// The cuDNN dims of the explicitly padded operand of `dims` (N, C, spatial..., trailing unit dims).
inline std::vector<int> padded_operand_dims(std::vector<int> dims, const CudnnConvWindow& c) {
  for (size_t d = 0; d < c.extra_begin.size(); ++d) dims[2 + d] += static_cast<int>(c.extra_begin[d] + c.extra_end[d]);
  return dims;
}

// (N,C,D1..Dn) sizes as a cuDNN tensor descriptor takes them: ints, rank at least 4 (trailing unit dims).
// nullopt when a size does not fit an int, or when the element count does: the descriptor's strides
// (packed_strides) are ints too, and the outermost one is the count of the inner dims. The count is taken
// with zero sizes as 1, as require_cudnn_dims hands them to cuDNN.
inline std::optional<std::vector<int>> cudnn_dims(const std::vector<int64_t>& sizes, size_t min_rank = 4) {
  std::vector<int> dims;
  int64_t count = 1;
  for (int64_t s : sizes) {
    if (!fits_int(s)) return std::nullopt;
    count *= s == 0 ? 1 : s;  // both factors fit an int: no int64 overflow
    if (!fits_int(count)) return std::nullopt;
    dims.push_back(static_cast<int>(s));
  }
  while (dims.size() < min_rank) dims.push_back(1);
  return dims;
}

// Row-major strides of int dims (cudnnSetTensorNdDescriptor takes them explicitly).
inline std::vector<int> packed_strides(const std::vector<int>& dims) {
  std::vector<int> strides(dims.size(), 1);
  for (size_t i = dims.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * dims[i + 1];
  return strides;
}

// --- cuBLAS (column major) for row-major operands ---

// Row-major Y (m,n) = op(A)·op(B) is column-major Yᵀ (n,m) = op(B)ᵀ·op(A)ᵀ: cuBLAS gets B first.
// transA/transB are the ONNX flags; a row-major (r,c) matrix is a column-major (c,r) one with ld = c.
struct GemmCall {
  bool trans_first = false, trans_second = false;  // cuBLAS transa (on B) and transb (on A)
  int64_t rows = 0, cols = 0, inner = 0;           // cuBLAS m = n, n = m, k = k
  int64_t ld_first = 0, ld_second = 0, ld_out = 0;
};
inline GemmCall gemm_call(int64_t m, int64_t n, int64_t k, bool trans_a, bool trans_b) {
  GemmCall c;
  c.trans_first = trans_b;
  c.trans_second = trans_a;
  c.rows = n;
  c.cols = m;
  c.inner = k;
  c.ld_first = trans_b ? k : n;   // B stored (k,n), or (n,k) with transB
  c.ld_second = trans_a ? m : k;  // A stored (m,k), or (k,m) with transA
  c.ld_out = n;
  return c;
}

// One cublasSgemmStridedBatched of a MatMul: `count` products starting at the given element offsets,
// advancing by the strides (0 for an operand broadcast over that batch run).
struct StridedBatch {
  int64_t a_offset = 0, b_offset = 0, y_offset = 0;
  int64_t count = 0, a_stride = 0, b_stride = 0, y_stride = 0;
};

// MatMul with numpy's rules as a list of strided-batched products of (m,k)·(k,n) matrices. Unit batch
// dims are dropped and neighbouring dims merged while both operands step uniformly across them, so the
// common cases are one call: equal batches, one operand broadcast, or (fold_rows) B shared by all of A's
// contiguous batches, which is then one (batch·m, k)·(k, n) product.
struct MatMulPlan {
  int64_t m = 0, k = 0, n = 0;
  std::vector<int64_t> y_sizes;
  std::vector<StridedBatch> calls;
  bool fold_rows = false;  // calls has one entry with count 1 and m = batch·m
  std::string problem;     // non-empty: the operands do not multiply
};
inline MatMulPlan plan_matmul(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  MatMulPlan p;
  if (a.empty() || b.empty()) {
    p.problem = "operands must have at least one dim";
    return p;
  }
  p.m = a.size() == 1 ? 1 : a[a.size() - 2];
  p.k = a.back();
  p.n = b.size() == 1 ? 1 : b.back();
  const int64_t k_b = b.size() == 1 ? b[0] : b[b.size() - 2];
  if (k_b != p.k) {
    p.problem = "inner dimensions differ";
    return p;
  }
  const std::vector<int64_t> batch_a(a.begin(), a.end() - std::min<size_t>(a.size(), 2));
  const std::vector<int64_t> batch_b(b.begin(), b.end() - std::min<size_t>(b.size(), 2));
  const std::optional<std::vector<int64_t>> batch = reference::broadcast_sizes(batch_a, batch_b);
  if (!batch) {
    p.problem = "batch dimensions do not broadcast";
    return p;
  }
  p.y_sizes = *batch;
  if (a.size() >= 2) p.y_sizes.push_back(p.m);
  if (b.size() >= 2) p.y_sizes.push_back(p.n);
  const std::vector<int64_t> a_strides = reference::broadcast_strides(batch_a, *batch);
  const std::vector<int64_t> b_strides = reference::broadcast_strides(batch_b, *batch);
  // Non-unit batch dims with strides in matrices: (size, a stride, b stride).
  struct Dim {
    int64_t size, a, b;
  };
  std::vector<Dim> dims;
  int64_t total = 1;
  for (size_t i = 0; i < batch->size(); ++i) {
    total *= (*batch)[i];
    if ((*batch)[i] != 1) dims.push_back({(*batch)[i], a_strides[i], b_strides[i]});
  }
  if (total == 0 || p.m == 0 || p.n == 0) return p;  // Y is empty: nothing to compute
  // Merge dim i into dim i+1 while each operand steps across both uniformly (the outer stride is the
  // inner one times the inner size: contiguous, or 0 for both when broadcast).
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (!merged.empty()) {
      Dim& last = merged.back();
      if (last.a == d.a * d.size && last.b == d.b * d.size) {
        last = {last.size * d.size, d.a, d.b};
        continue;
      }
    }
    merged.push_back(d);
  }
  const int64_t a_matrix = p.m * p.k, b_matrix = p.k * p.n, y_matrix = p.m * p.n;
  if (merged.empty()) {
    p.calls.push_back({0, 0, 0, 1, 0, 0, 0});
    return p;
  }
  if (merged.size() == 1 && merged[0].b == 0 && merged[0].a == 1) {  // B shared by contiguous A batches
    p.fold_rows = true;
    p.m *= merged[0].size;
    p.calls.push_back({0, 0, 0, 1, 0, 0, 0});
    return p;
  }
  const Dim inner = merged.back();
  merged.pop_back();
  std::vector<int64_t> index(merged.size(), 0);
  int64_t y_offset = 0;
  for (;;) {
    int64_t a_off = 0, b_off = 0;
    for (size_t i = 0; i < merged.size(); ++i) {
      a_off += index[i] * merged[i].a;
      b_off += index[i] * merged[i].b;
    }
    p.calls.push_back({a_off * a_matrix, b_off * b_matrix, y_offset * y_matrix, inner.size, inner.a * a_matrix,
                       inner.b * b_matrix, y_matrix});
    y_offset += inner.size;
    size_t d = merged.size();
    while (d > 0 && ++index[d - 1] == merged[d - 1].size) index[--d] = 0;
    if (d == 0) break;
  }
  return p;
}

// --- BatchNormalization's running statistics ---

// The population variance of `count` values from their unbiased variance (what cuDNN's running
// variance holds with exponentialAverageFactor 1): ·(count-1)/count; 0 for a single value, whose
// unbiased variance cuDNN leaves undefined.
ONNXTRAIN_HOST_DEVICE inline double population_variance(double unbiased, int64_t count) {
  return count > 1 ? unbiased * static_cast<double>(count - 1) / static_cast<double>(count) : 0.0;
}

// ONNX's running statistic: input·momentum + batch·(1 - momentum).
ONNXTRAIN_HOST_DEVICE inline double running_statistic(double input, double batch, double momentum) {
  return input * momentum + batch * (1.0 - momentum);
}

}  // namespace onnxtrain::cuda
