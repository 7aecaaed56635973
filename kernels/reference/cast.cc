// Reference kernels for Cast (`to`: a type name at opset 1, an ONNX type code from 6) and CastLike (the
// dtype of a second input), between float32/float64/float16/bfloat16, the integer types and bool.
// float → integer truncates toward zero like static_cast (NaN → 0, out-of-range saturates); → float16
// rounds to nearest even; → bfloat16 truncates (ONNX 1.12's reference); → bool is `v != 0`.
#include <type_traits>

#include "kernels/reference/element_convert.h"
#include "kernels/reference/elementwise_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

// The value of a stored element as a C++ arithmetic value.
template <typename S>
S plain(S v) {
  return v;
}
float plain(HalfBits v) { return half_bits_to_float(v.bits); }
float plain(BFloat16Bits v) { return bfloat16_bits_to_float(v.bits); }
bool plain(BoolByte v) { return v.byte != 0; }

template <typename D, typename V>
D convert(V v) {
  if constexpr (std::is_same_v<D, HalfBits>) {
    return {double_to_half_bits(static_cast<double>(v))};
  } else if constexpr (std::is_same_v<D, BFloat16Bits>) {
    return {float_to_bfloat16_bits(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<D, BoolByte>) {
    return {static_cast<uint8_t>(v != V(0) ? 1 : 0)};
  } else if constexpr (std::is_integral_v<D> && std::is_floating_point_v<V>) {
    return float_to_integer<D>(static_cast<double>(v));
  } else {
    return static_cast<D>(v);
  }
}

std::unique_ptr<Kernel> make_cast_to(const KernelSpec& spec, DType to) {
  const DType from = require_dtype_in(spec, 0, kFixedSizeDTypes);
  if (std::find(kFixedSizeDTypes.begin(), kFixedSizeDTypes.end(), to) == kFixedSizeDTypes.end()) {
    kernel_fail(spec, "cast to " + std::string(dtype_name(to)) + " is not supported");
  }
  require_output(spec, 0, to, spec.inputs[0].sizes);
  return make_closure_kernel([from, to](auto inputs, auto outputs) {
    dispatch_cast_storage(from, [&](auto source_zero) {
      using S = decltype(source_zero);
      dispatch_cast_storage(to, [&](auto target_zero) {
        using D = decltype(target_zero);
        const S* x = inputs[0].template as<S>();
        D* y = outputs[0].template as<D>();
        for (int64_t i = 0; i < outputs[0].numel(); ++i) y[i] = convert<D>(plain(x[i]));
      });
    });
  });
}

// `to` as a type name (opset 1) or an ONNX TensorProto code.
DType cast_target(const KernelSpec& spec) {
  static const std::pair<const char*, DType> kNames[] = {
      {"FLOAT", DType::Float32}, {"DOUBLE", DType::Float64}, {"FLOAT16", DType::Float16}, {"BFLOAT16", DType::BFloat16},
      {"INT8", DType::Int8},     {"UINT8", DType::UInt8},    {"INT16", DType::Int16},     {"UINT16", DType::UInt16},
      {"INT32", DType::Int32},   {"UINT32", DType::UInt32},  {"INT64", DType::Int64},     {"UINT64", DType::UInt64},
      {"BOOL", DType::Bool},     {"STRING", DType::String}};
  const auto it = spec.attributes.find("to");
  if (it == spec.attributes.end()) kernel_fail(spec, "the 'to' attribute is required");
  if (const auto* code = std::get_if<int64_t>(&it->second)) {
    const DType to = dtype_from_onnx_code(*code);
    if (to == DType::Undefined)
      kernel_fail(spec, "'to' = " + std::to_string(*code) + " is no tensor type onnxtrain knows");
    return to;
  }
  if (const auto* name = std::get_if<std::string>(&it->second)) {
    for (const auto& [type_name, dtype] : kNames)
      if (*name == type_name) return dtype;
    kernel_fail(spec, "'to' = '" + *name + "' is no tensor type onnxtrain knows");
  }
  kernel_fail(spec, "the 'to' attribute must be a type code or name");
}

std::unique_ptr<Kernel> make_cast(const KernelSpec& spec) {
  require_input_count(spec, 1, 1);
  return make_cast_to(spec, cast_target(spec));
}

std::unique_ptr<Kernel> make_cast_like(const KernelSpec& spec) {
  require_input_count(spec, 2, 2);
  if (!has_input(spec, 1)) kernel_fail(spec, "target_type is required");
  return make_cast_to(spec, spec.inputs[1].dtype);
}

}  // namespace

void register_reference_cast_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Cast", kFixedSizeDTypes, &make_cast));
  registry.add(reference_entry("CastLike", kFixedSizeDTypes, &make_cast_like));
}

}  // namespace onnxtrain
