// What the conv, matmul, pooling, normalisation and loss reference kernels share beyond kernel_plumbing.h:
// float32/float64 dtype checks and dispatch to a kernel built from a closure over precomputed geometry,
// optional run-time views, per-channel vectors widened to double, and what an op's forward and backward
// kernels share (normalisation statistics and layouts, LRN geometry), and the prepare-time checks of the
// normalisations and softmaxes that the reference and CUDA kernels share (check_layer_norm, ...).
// Accumulation in these kernels is always in double, so the float32 and float64 kernels differ only in
// the rounding of their inputs and outputs.
//
//   const DType dtype = require_same_float_dtype(spec, {0, 1, 2});
//   return make_float_kernel(spec, dtype, [&](auto zero) {
//     using T = decltype(zero);
//     return make_closure_kernel([geometry](auto inputs, auto outputs) { gemm<T>(geometry, inputs, outputs); });
//   });
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/reference/kernel_plumbing.h"

namespace onnxtrain::reference {

inline bool is_float32_or_64(DType dtype) { return dtype == DType::Float32 || dtype == DType::Float64; }

// Fails unless `dtype` is float32 or float64.
inline void require_float_dtype(const KernelSpec& spec, DType dtype) {
  if (!is_float32_or_64(dtype)) {
    kernel_fail(spec, "the reference kernel supports float32 and float64, got " + std::string(dtype_name(dtype)));
  }
}

// Calls make(T{}) with T the C++ type of float32/float64 `dtype` and returns its kernel; fails otherwise.
template <typename Make>
std::unique_ptr<Kernel> make_float_kernel(const KernelSpec& spec, DType dtype, Make&& make) {
  std::unique_ptr<Kernel> kernel;
  require_float_dtype(spec, dtype);
  dispatch_float(dtype, [&](auto zero) { kernel = make(zero); });
  return kernel;
}

inline bool has_view(std::span<const TensorView> views, size_t i) {
  return i < views.size() && views[i].data != nullptr;
}

// Fails naming the first of the listed inputs that is present and whose dtype is not `dtype`, input
// inputs[0]'s.
inline void require_inputs_share_dtype(const KernelSpec& spec, std::initializer_list<size_t> inputs, DType dtype) {
  for (size_t i : inputs) {
    if (has_input(spec, i) && spec.inputs[i].dtype != dtype) {
      kernel_fail(spec, "input " + std::to_string(i) + " is " + std::string(dtype_name(spec.inputs[i].dtype)) +
                            " but input " + std::to_string(*inputs.begin()) + " is " + std::string(dtype_name(dtype)) +
                            " (the reference kernel needs one dtype)");
    }
  }
}

// The dtype of input `inputs[0]` (float32 or float64); every other listed input that is present must share
// it. Fails naming the first that differs.
inline DType require_same_float_dtype(const KernelSpec& spec, std::initializer_list<size_t> inputs) {
  const DType dtype = require_input(spec, *inputs.begin(), "data").dtype;
  require_float_dtype(spec, dtype);
  require_inputs_share_dtype(spec, inputs, dtype);
  return dtype;
}

// The elements of a float32/float64 view widened to double (per-channel vectors whose dtype may differ
// from X's, as BatchNormalization's may from opset 15).
inline std::vector<double> to_doubles(const TensorView& v) {
  std::vector<double> values(static_cast<size_t>(v.numel()));
  dispatch_float(v.dtype, [&](auto zero) {
    using T = decltype(zero);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<double>(v.as<const T>()[i]);
  });
  return values;
}

// Stores `values` into a float32/float64 view of the same numel.
inline void store_doubles(const TensorView& v, const std::vector<double>& values) {
  dispatch_float(v.dtype, [&](auto zero) {
    using T = decltype(zero);
    for (size_t i = 0; i < values.size(); ++i) v.as<T>()[i] = static_cast<T>(values[i]);
  });
}

// --- what forward and backward kernels of one op share ---

// Mean and 1/sqrt(population variance + epsilon) of x[0..count), in double and two passes: the
// statistics of InstanceNormalization's planes and LayerNormalization's rows, forward and backward.
struct Moments {
  double mean = 0, inv_std = 0;
};
template <typename T>
Moments moments_of(const T* x, int64_t count, double epsilon) {
  double sum = 0;
  for (int64_t i = 0; i < count; ++i) sum += static_cast<double>(x[i]);
  const double mean = sum / static_cast<double>(count);
  double squares = 0;
  for (int64_t i = 0; i < count; ++i) squares += std::pow(static_cast<double>(x[i]) - mean, 2);
  return {mean, 1.0 / std::sqrt(squares / static_cast<double>(count) + epsilon)};
}

// BatchNormalization and its grad: X viewed as (batch, features, inner), features the channels or, with
// opset 7's spatial=0, every non-batch element. momentum is the forward's.
struct BatchNormGeometry {
  int64_t batch = 0, features = 0, inner = 0;
  double epsilon = 1e-5, momentum = 0.9;
  bool training = false;
  bool relu = false;  // a fused Relu (graph/autodiff/batch_norm_relu.h): Y = max(BN(X), 0)
};

// Fails unless each of the first names.size() inputs is present and float32/float64 (BatchNormalization's
// scale, B, mean and var may differ from X's dtype from opset 15); `names` names them in the message.
template <size_t N>
void require_float_inputs(const KernelSpec& spec, const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i) {
    const DType dtype = require_input(spec, i, names[i]).dtype;
    if (!is_float32_or_64(dtype)) {
      kernel_fail(spec, std::string(names[i]) + " must be float32 or float64 in the reference kernel, got " +
                            std::string(dtype_name(dtype)));
    }
  }
}

// The batch mean and population variance of feature `f` (training mode), in double and two passes.
struct BatchMoments {
  double mean = 0, var = 0;
};
template <typename T>
BatchMoments batch_moments(const T* x, const BatchNormGeometry& g, int64_t f) {
  auto at = [&](int64_t n, int64_t i) { return (n * g.features + f) * g.inner + i; };
  const double count = static_cast<double>(g.batch * g.inner);
  double sum = 0;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t i = 0; i < g.inner; ++i) sum += static_cast<double>(x[at(n, i)]);
  const double mean = sum / count;
  double squares = 0;
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t i = 0; i < g.inner; ++i) squares += std::pow(static_cast<double>(x[at(n, i)]) - mean, 2);
  return {mean, squares / count};
}

// X (N,C,D1..Dn) of InstanceNormalization and its grad as (batch, channels, plane); fails naming X's sizes
// unless it has a spatial dim.
struct PlaneGeometry {
  int64_t batch = 0, channels = 0, plane = 0;
  double epsilon = 1e-5;
};
inline PlaneGeometry read_plane_geometry(const KernelSpec& spec, const std::vector<int64_t>& x) {
  if (x.size() < 3)
    kernel_fail(spec, "X must be (N,C,D1,...) with at least one spatial dim, got " + sizes_to_string(x));
  return {x[0], x[1], product_of(x, 2), spec.attributes.get_float("epsilon", 1e-5)};
}

// Offsets into a tensor of `sizes` broadcast onto `normalized`, one per element of `normalized`
// (LayerNormalization's Scale and B); fails naming `what` unless it broadcasts.
inline std::vector<int64_t> broadcast_offsets(const KernelSpec& spec, const std::string& what,
                                              const std::vector<int64_t>& sizes,
                                              const std::vector<int64_t>& normalized) {
  if (!broadcasts_onto(sizes, normalized)) {
    kernel_fail(spec, what + " " + sizes_to_string(sizes) + " does not broadcast onto the normalized dims " +
                          sizes_to_string(normalized));
  }
  std::vector<int64_t> offsets;
  for_each_broadcast(normalized, {broadcast_strides(sizes, normalized)},
                     [&](int64_t, const std::vector<int64_t>& in) { offsets.push_back(in[0]); });
  return offsets;
}

// X of LayerNormalization and its grad as (outer, inner) rows split before the (normalised) `axis`, with
// `normalized` X's dims from `axis` on and Scale's offset for each element of a row; fails unless Scale
// (sizes `scale`) broadcasts onto the normalised dims. The forward adds B's offsets.
struct LayerNormGeometry {
  int64_t outer = 0, inner = 0;
  double epsilon = 1e-5;
  std::vector<int64_t> normalized;
  std::vector<int64_t> scale_offsets, bias_offsets;  // per element of a row; bias_offsets empty without B
};
inline LayerNormGeometry read_layer_norm_geometry(const KernelSpec& spec, const std::vector<int64_t>& x, int64_t axis,
                                                  const std::vector<int64_t>& scale) {
  LayerNormGeometry g;
  g.normalized.assign(x.begin() + axis, x.end());
  g.outer = product_of(x, 0, static_cast<size_t>(axis));
  g.inner = product_of(g.normalized);
  g.epsilon = spec.attributes.get_float("epsilon", 1e-5);
  g.scale_offsets = broadcast_offsets(spec, "Scale", scale, g.normalized);
  return g;
}

// --- prepare-time checks that every device's kernels of an op share (reference, "cuda") ---

// What such a check returns: the kernel's float dtype and the geometry it runs over.
template <typename Geometry>
struct Checked {
  DType dtype = DType::Float32;
  Geometry geometry;
};

// InstanceNormalization(X, scale, B) -> Y: X (N,C,D1..Dn), scale and B one value per channel, Y like X.
inline Checked<PlaneGeometry> check_instance_norm(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0, 1, 2});
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  const PlaneGeometry g = read_plane_geometry(spec, x);
  const std::vector<int64_t> per_channel{x[1]};
  if (require_input(spec, 1, "scale").sizes != per_channel || require_input(spec, 2, "B").sizes != per_channel) {
    kernel_fail(spec, "scale " + sizes_to_string(spec.inputs[1].sizes) + " and B " +
                          sizes_to_string(spec.inputs[2].sizes) + " must have one value per channel of X " +
                          sizes_to_string(x));
  }
  if (require_output(spec, 0, "Y").sizes != x) kernel_fail(spec, "Y must have X's shape " + sizes_to_string(x));
  return {dtype, g};
}

// InstanceNormalizationGrad(dY, X, scale) -> dX?, dScale?, dBias?: dY and dX like X, the others per channel.
inline Checked<PlaneGeometry> check_instance_norm_grad(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0, 1, 2});
  const std::vector<int64_t>& x = require_input(spec, 1, "X").sizes;
  const PlaneGeometry g = read_plane_geometry(spec, x);
  if (spec.inputs[0].sizes != x) kernel_fail(spec, "dY must have X's shape " + sizes_to_string(x));
  const std::vector<int64_t> per_channel{x[1]};
  if (require_input(spec, 2, "scale").sizes != per_channel) {
    kernel_fail(spec, "scale " + sizes_to_string(spec.inputs[2].sizes) + " must have one value per channel of X " +
                          sizes_to_string(x));
  }
  if (has_output(spec, 0)) require_output(spec, 0, dtype, x);
  for (size_t i = 1; i < 3; ++i) {
    if (has_output(spec, i)) require_output(spec, i, dtype, per_channel);
  }
  return {dtype, g};
}

// LayerNormalization(X, Scale, B?) -> Y, Mean?, InvStdDev?, with B's offsets when B is given. Mean and
// InvStdDev have X's dims before `axis` and 1s after, float32 or float64 whatever X is (stash_type);
// `kernel` ("the reference kernel") is named in the message when they are not.
inline Checked<LayerNormGeometry> check_layer_norm(const KernelSpec& spec, const std::string& kernel) {
  const DType dtype = require_same_float_dtype(spec, {0, 1, 2});
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  const int64_t rank = static_cast<int64_t>(x.size());
  int64_t axis = spec.attributes.get_int("axis", -1);
  if (axis < -rank || axis >= rank) {
    kernel_fail(spec, "axis " + std::to_string(axis) + " is out of range for X " + sizes_to_string(x));
  }
  if (axis < 0) axis += rank;
  if (require_output(spec, 0, "Y").sizes != x) kernel_fail(spec, "Y must have X's shape " + sizes_to_string(x));
  LayerNormGeometry g = read_layer_norm_geometry(spec, x, axis, require_input(spec, 1, "Scale").sizes);
  if (has_input(spec, 2)) g.bias_offsets = broadcast_offsets(spec, "B", spec.inputs[2].sizes, g.normalized);
  std::vector<int64_t> stats = x;
  for (size_t i = static_cast<size_t>(axis); i < stats.size(); ++i) stats[i] = 1;
  for (size_t i = 1; i < 3; ++i) {
    if (!has_output(spec, i)) continue;
    if (!is_float32_or_64(spec.outputs[i].dtype)) {
      kernel_fail(spec, kernel + " stashes Mean and InvStdDev as float32 or float64, got " +
                            std::string(dtype_name(spec.outputs[i].dtype)) + " (stash_type)");
    }
    if (spec.outputs[i].sizes != stats) {
      kernel_fail(spec, "output " + std::to_string(i) + " is " + sizes_to_string(spec.outputs[i].sizes) +
                            ", expected " + sizes_to_string(stats));
    }
  }
  return {dtype, std::move(g)};
}

// LayerNormalizationGrad(dY, X, Scale) -> dX?, dScale?, dBias?: dY and dX like X, the others shaped like
// the normalised dims.
inline Checked<LayerNormGeometry> check_layer_norm_grad(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0, 1, 2});
  const std::vector<int64_t>& x = require_input(spec, 1, "X").sizes;
  if (spec.inputs[0].sizes != x) kernel_fail(spec, "dY must have X's shape " + sizes_to_string(x));
  const int64_t axis = normalized_axis(spec, spec.attributes.get_int("axis", -1), static_cast<int64_t>(x.size()));
  LayerNormGeometry g = read_layer_norm_geometry(spec, x, axis, require_input(spec, 2, "Scale").sizes);
  if (has_output(spec, 0)) require_output(spec, 0, dtype, x);
  for (size_t i = 1; i < 3; ++i) {
    if (has_output(spec, i)) require_output(spec, i, dtype, g.normalized);
  }
  return {dtype, std::move(g)};
}

// Softmax, LogSoftmax and their grads: the tensor as (outer, n, inner), normalised over n for each
// (outer, inner) pair.
struct SoftmaxGeometry {
  int64_t outer = 1, n = 1, inner = 1;
};

// Softmax and LogSoftmax(input) -> output: before opset 13 the input is coerced to 2-D at `axis` (default
// 1) and normalised over every dim from `axis` on; from 13 over `axis` alone (default -1).
inline Checked<SoftmaxGeometry> check_softmax(const KernelSpec& spec) {
  require_input_count(spec, 1, 1);
  const DType dtype = require_dtype_in(spec, 0, kFloatDTypes);
  const std::vector<int64_t>& sizes = spec.inputs[0].sizes;
  const auto rank = static_cast<int64_t>(sizes.size());
  if (rank == 0) kernel_fail(spec, "input must have at least one dim, got a scalar");
  require_output(spec, 0, dtype, sizes);
  const bool coerce_to_2d = spec.opset < 13;
  const int64_t axis = normalized_axis(spec, spec.attributes.get_int("axis", coerce_to_2d ? 1 : -1), rank);
  SoftmaxGeometry g;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) {
      g.outer *= sizes[d];
    } else if (d == axis || coerce_to_2d) {
      g.n *= sizes[d];
    } else {
      g.inner *= sizes[d];
    }
  }
  return {dtype, g};
}

// SoftmaxGrad and LogSoftmaxGrad(dY, Y) -> dX over `axis` (default -1), dY and dX shaped like Y.
inline Checked<SoftmaxGeometry> check_softmax_grad(const KernelSpec& spec) {
  require_input_count(spec, 2, 2);
  const DType dtype = require_same_float_dtype(spec, {0, 1});
  const std::vector<int64_t>& sizes = spec.inputs[1].sizes;
  if (spec.inputs[0].sizes != sizes) {
    kernel_fail(spec, "dY " + sizes_to_string(spec.inputs[0].sizes) + " must have Y's shape " + sizes_to_string(sizes));
  }
  const auto rank = static_cast<int64_t>(sizes.size());
  if (rank == 0) kernel_fail(spec, "Y must have at least one dim, got a scalar");
  require_output(spec, 0, dtype, sizes);
  const int64_t axis = normalized_axis(spec, spec.attributes.get_int("axis", -1), rank);
  return {dtype, {product_of(sizes, 0, axis), sizes[axis], product_of(sizes, axis + 1)}};
}

// LRN across channels (lrn.cc, lrn_grad.cc): X (N,C,D1..Dn) as (batch, channels, plane) and the
// attributes; the window of channel c is c - before() .. c + after(), clipped to the channels that exist.
struct LrnGeometry {
  int64_t batch = 0, channels = 0, plane = 0, size = 1;
  double alpha = 1e-4, beta = 0.75, bias = 1.0;
  int64_t before() const { return (size - 1) / 2; }      // floor((size-1)/2)
  int64_t after() const { return size - 1 - before(); }  // ceil((size-1)/2)
};
inline LrnGeometry read_lrn_geometry(const KernelSpec& spec, const std::vector<int64_t>& x) {
  if (x.size() < 3)
    kernel_fail(spec, "X must be (N,C,D1,...) with at least one spatial dim, got " + sizes_to_string(x));
  if (!spec.attributes.has("size")) kernel_fail(spec, "the size attribute is required");
  LrnGeometry g;
  g.batch = x[0];
  g.channels = x[1];
  g.plane = product_of(x, 2);
  g.size = spec.attributes.get_int("size", 1);
  if (g.size < 1) kernel_fail(spec, "size must be >= 1, got " + std::to_string(g.size));
  g.alpha = spec.attributes.get_float("alpha", 1e-4);
  g.beta = spec.attributes.get_float("beta", 0.75);
  g.bias = spec.attributes.get_float("bias", 1.0);
  return g;
}

}  // namespace onnxtrain::reference
