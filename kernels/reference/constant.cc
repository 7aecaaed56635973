// Constant (value / value_float(s) / value_int(s) attributes; strings and sparse values unsupported),
// ConstantOfShape (opset 9: a one-element `value` tensor, float32 0 by default, filled to a shape input)
// and Range (opset 11: start, limit, delta scalars; int16/int32/int64/float32/float64).
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

// The tensor a Constant node's attributes hold; fails (at prepare) for what onnxtrain cannot hold.
Tensor constant_value(const KernelSpec& spec) {
  const Attributes& attrs = spec.attributes;
  static const char* kKeys[] = {"value",      "value_float",  "value_floats",  "value_int",
                                "value_ints", "value_string", "value_strings", "sparse_value"};
  int given = 0;
  for (const char* key : kKeys) given += attrs.has(key);
  if (given != 1) kernel_fail(spec, "exactly one value attribute is required, got " + std::to_string(given));
  if (attrs.has("sparse_value")) kernel_fail(spec, "sparse constants (sparse_value) are not supported");
  if (attrs.has("value_string") || attrs.has("value_strings")) kernel_fail(spec, "string constants are not supported");
  if (attrs.has("value")) {
    const Tensor* t = attrs.get_tensor("value");
    if (!t) kernel_fail(spec, "the value attribute is not a tensor onnxtrain can read");
    return *t;
  }
  if (attrs.has("value_float")) {
    Tensor t(DType::Float32, {});
    t.data<float>()[0] = static_cast<float>(attrs.get_float("value_float", 0));
    return t;
  }
  if (attrs.has("value_floats")) {
    const std::vector<double> values = attrs.get_floats("value_floats");
    Tensor t(DType::Float32, {static_cast<int64_t>(values.size())});
    for (size_t i = 0; i < values.size(); ++i) t.data<float>()[i] = static_cast<float>(values[i]);
    return t;
  }
  if (attrs.has("value_int")) return Tensor::scalar_int64(attrs.get_int("value_int", 0));
  return Tensor::vector_int64(attrs.get_ints("value_ints"));
}

class ConstantKernel : public DataMovementKernel {
 public:
  explicit ConstantKernel(const KernelSpec& spec) : DataMovementKernel(spec), value_(constant_value(spec)) {
    require_output_dtype(spec, 0, value_.dtype());
  }

  void run(Stream&, std::span<const TensorView>, std::span<const TensorView> outputs) override {
    require_output_sizes(outputs[0], value_.sizes());
    copy_elements(TensorView::of(value_), 0, outputs[0], 0, value_.numel());
  }

 private:
  Tensor value_;
};

class ConstantOfShapeKernel : public DataMovementKernel {
 public:
  explicit ConstantOfShapeKernel(const KernelSpec& spec) : DataMovementKernel(spec), value_(DType::Float32, {1}) {
    require_inputs(spec, 1);
    require_index_input(spec, 0, "shape");
    if (spec.attributes.has("value")) {
      const Tensor* t = spec.attributes.get_tensor("value");
      if (!t || t->numel() != 1) fail("the value attribute must be a tensor with one element");
      value_ = *t;
    }
    require_output_dtype(spec, 0, value_.dtype());
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const std::vector<int64_t> shape = read_int_values(inputs[0]);
    for (int64_t s : shape)
      if (s < 0) fail("shape " + sizes_to_string(shape) + " has a negative size");
    require_output_sizes(outputs[0], shape);
    const TensorView value = TensorView::of(value_);
    for (int64_t i = 0; i < outputs[0].numel(); ++i) copy_elements(value, 0, outputs[0], i, 1);
  }

 private:
  Tensor value_;
};

class RangeKernel : public DataMovementKernel {
 public:
  explicit RangeKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 3);
    static const char* kNames[] = {"start", "limit", "delta"};
    for (size_t i = 0; i < 3; ++i) {
      if (spec.inputs[i].dtype != spec.inputs[0].dtype)
        fail(std::string(kNames[i]) + " has dtype " + std::string(dtype_name(spec.inputs[i].dtype)) + ", start has " +
             std::string(dtype_name(spec.inputs[0].dtype)));
      if (spec.inputs[i].numel() != 1)
        fail(std::string(kNames[i]) + " must be a scalar, got sizes " + sizes_to_string(spec.inputs[i].sizes));
    }
    require_output_dtype(spec, 0, spec.inputs[0].dtype);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const bool known = dispatch_range(inputs[0].dtype, [&](auto zero) { fill<decltype(zero)>(inputs, outputs[0]); });
    if (!known) fail("unsupported dtype " + std::string(dtype_name(inputs[0].dtype)));
  }

 private:
  // out[i] = start + i * delta for max(ceil((limit - start) / delta), 0) elements.
  template <typename T>
  void fill(std::span<const TensorView> inputs, const TensorView& out) const {
    const T start = inputs[0].as<T>()[0], limit = inputs[1].as<T>()[0], delta = inputs[2].as<T>()[0];
    if (delta == T{0}) fail("delta must be non-zero");
    int64_t count = 0;
    if constexpr (std::is_floating_point_v<T>) {
      count = std::max<int64_t>(static_cast<int64_t>(std::ceil((double{limit} - start) / delta)), 0);
    } else {  // exact integer ceil division, in 128 bits: limit - start spans up to 2^64 for int64
      const __int128 distance = static_cast<__int128>(limit) - start, step = delta;
      count = static_cast<int64_t>(step > 0 ? (distance > 0 ? (distance + step - 1) / step : 0)
                                            : (distance < 0 ? (distance + step + 1) / step : 0));
    }
    require_output_sizes(out, {count});
    for (int64_t i = 0; i < count; ++i) {
      if constexpr (std::is_floating_point_v<T>)
        out.as<T>()[i] = static_cast<T>(static_cast<double>(start) + static_cast<double>(i) * delta);
      else
        out.as<T>()[i] = static_cast<T>(static_cast<__int128>(start) + static_cast<__int128>(i) * delta);
    }
  }
};

}  // namespace

void register_reference_constant_kernels(KernelRegistry& registry) {
  // Constant has no input: it is looked up by its output's dtype. ConstantOfShape by its int64 shape.
  registry.add(reference_entry("Constant", kFixedSizeDTypes, make_kernel<ConstantKernel>));
  registry.add(reference_entry("ConstantOfShape", {DType::Int64}, make_kernel<ConstantOfShapeKernel>));
  registry.add(reference_entry("Range", {DType::Float32, DType::Float64, DType::Int16, DType::Int32, DType::Int64},
                               make_kernel<RangeKernel>));
}

}  // namespace onnxtrain
