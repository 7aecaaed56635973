// How every reference kernel family builds and registers its kernels: a kernel made of one closure, the
// KernelEntry of the "reference" implementation, the dtype lists the families register, and the
// prepare-time checks of presence, dtype and sizes that fail naming the op and node (kernel_fail).
//
//   std::unique_ptr<Kernel> make_neg(const KernelSpec& spec) {
//     const DType dtype = require_dtype_in(spec, 0, kSignedDTypes);
//     require_output(spec, 0, dtype, spec.inputs[0].sizes);
//     return make_closure_kernel([dtype](auto inputs, auto outputs) { ... });
//   }
//   registry.add(reference_entry("Neg", kSignedDTypes, &make_neg));
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/reference/common.h"

namespace onnxtrain::reference {

// A kernel whose run() calls fn(inputs, outputs), or fn(stream, inputs, outputs) when the closure takes
// the stream (Dropout reads its run index).
template <typename Fn>
class ClosureKernel final : public Kernel {
 public:
  explicit ClosureKernel(Fn fn) : fn_(std::move(fn)) {}
  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    if constexpr (std::is_invocable_v<Fn&, Stream&, std::span<const TensorView>, std::span<const TensorView>>) {
      fn_(stream, inputs, outputs);
    } else {
      fn_(inputs, outputs);
    }
  }

 private:
  Fn fn_;
};

template <typename Fn>
std::unique_ptr<Kernel> make_closure_kernel(Fn fn) {
  return std::make_unique<ClosureKernel<Fn>>(std::move(fn));
}

// A CPU entry of the "reference" implementation in the default domain.
inline KernelEntry reference_entry(std::string op_type, std::vector<DType> dtypes, KernelFactory factory) {
  return {.domain = "",
          .op_type = std::move(op_type),
          .device = DeviceKind::Cpu,
          .dtypes = std::move(dtypes),
          .implementation = "reference",
          .factory = factory};
}

// A CPU "reference" entry of one of onnxtrain's backward ops (domain kTrainingDomain, "ai.onnxtrain").
inline KernelEntry reference_training_entry(std::string op_type, std::vector<DType> dtypes, KernelFactory factory) {
  KernelEntry entry = reference_entry(std::move(op_type), std::move(dtypes), factory);
  entry.domain = "ai.onnxtrain";
  return entry;
}

// --- dtype lists (KernelEntry::dtypes and prepare checks) ---
inline const std::vector<DType> kFloatDTypes = {DType::Float32, DType::Float64};
inline const std::vector<DType> kSignedDTypes = {DType::Float32, DType::Float64, DType::Int8,
                                                 DType::Int16,   DType::Int32,   DType::Int64};
inline const std::vector<DType> kArithmeticDTypes = {DType::Float32, DType::Float64, DType::Int8,  DType::UInt8,
                                                     DType::Int16,   DType::UInt16,  DType::Int32, DType::UInt32,
                                                     DType::Int64,   DType::UInt64};
// Every fixed-size dtype: what Cast converts between and data movement copies.
inline const std::vector<DType> kFixedSizeDTypes = {
    DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int8,   DType::UInt8, DType::Int16,
    DType::UInt16,  DType::Int32,   DType::UInt32,  DType::Int64,    DType::UInt64, DType::Bool};

inline std::vector<DType> with_bool(std::vector<DType> dtypes) {
  dtypes.push_back(DType::Bool);
  return dtypes;
}

inline std::string sizes_to_string(const std::vector<int64_t>& sizes) {
  std::string s = "(";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? "," : "") + std::to_string(sizes[i]);
  return s + ")";
}

// --- prepare-time checks; each fails with kernel_fail ---
inline bool has_input(const KernelSpec& spec, size_t i) { return i < spec.inputs.size() && spec.inputs[i].present(); }
inline bool has_output(const KernelSpec& spec, size_t i) {
  return i < spec.outputs.size() && spec.outputs[i].present();
}

// Fails unless input `i` is present; `what` ("W", "scale"), when given, is named in the message.
inline const TensorDesc& require_input(const KernelSpec& spec, size_t i, const std::string& what = "") {
  if (!has_input(spec, i))
    kernel_fail(spec, "input " + std::to_string(i) + (what.empty() ? "" : " (" + what + ")") + " is required");
  return spec.inputs[i];
}

inline const TensorDesc& require_output(const KernelSpec& spec, size_t i, const std::string& what = "") {
  if (!has_output(spec, i))
    kernel_fail(spec, "output " + std::to_string(i) + (what.empty() ? "" : " (" + what + ")") + " is required");
  return spec.outputs[i];
}

// Inputs 0..count-1 must be present.
inline void require_inputs(const KernelSpec& spec, size_t count) {
  for (size_t i = 0; i < count; ++i) require_input(spec, i);
}

inline void require_input_count(const KernelSpec& spec, size_t min, size_t max) {
  if (spec.inputs.size() < min || spec.inputs.size() > max) {
    kernel_fail(spec, "takes " + std::to_string(min) + (min == max ? "" : ".." + std::to_string(max)) +
                          (max == 1 ? " input" : " inputs") + ", got " + std::to_string(spec.inputs.size()));
  }
}

// The dtype of input `i`, which must be present and one of `allowed`.
inline DType require_dtype_in(const KernelSpec& spec, size_t i, const std::vector<DType>& allowed) {
  const DType dtype = require_input(spec, i).dtype;
  if (std::find(allowed.begin(), allowed.end(), dtype) == allowed.end()) {
    std::string names;
    for (DType d : allowed) names += (names.empty() ? "" : ", ") + std::string(dtype_name(d));
    kernel_fail(spec, "input " + std::to_string(i) + " has dtype " + std::string(dtype_name(dtype)) +
                          ", the reference kernel supports " + names);
  }
  return dtype;
}

inline void require_same_dtype(const KernelSpec& spec, size_t i, size_t reference) {
  if (spec.inputs[i].dtype != spec.inputs[reference].dtype) {
    kernel_fail(spec, "input " + std::to_string(i) + " has dtype " + std::string(dtype_name(spec.inputs[i].dtype)) +
                          ", expected " + std::string(dtype_name(spec.inputs[reference].dtype)) + " like input " +
                          std::to_string(reference));
  }
}

// Output `i` must be present with this dtype.
inline void require_output_dtype(const KernelSpec& spec, size_t i, DType dtype) {
  const TensorDesc& out = require_output(spec, i);
  if (out.dtype != dtype) {
    kernel_fail(spec, "output " + std::to_string(i) + " has dtype " + std::string(dtype_name(out.dtype)) +
                          ", expected " + std::string(dtype_name(dtype)));
  }
}

// Output `i` must be declared with this dtype and these sizes (the caller allocates it so).
inline void require_output(const KernelSpec& spec, size_t i, DType dtype, const std::vector<int64_t>& sizes) {
  const TensorDesc& out = require_output(spec, i);
  if (out.dtype != dtype || out.sizes != sizes) {
    kernel_fail(spec, "output " + std::to_string(i) + " is declared " + std::string(dtype_name(out.dtype)) +
                          sizes_to_string(out.sizes) + ", the op computes " + std::string(dtype_name(dtype)) +
                          sizes_to_string(sizes));
  }
}

// Normalises an axis into [0, rank); nullopt when out of range.
inline std::optional<int64_t> normalized_axis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

// Normalises an axis into [0, rank) or fails.
inline int64_t normalized_axis(const KernelSpec& spec, int64_t axis, int64_t rank) {
  const std::optional<int64_t> normalized = normalized_axis(axis, rank);
  if (!normalized) {
    kernel_fail(spec, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return *normalized;
}

}  // namespace onnxtrain::reference
