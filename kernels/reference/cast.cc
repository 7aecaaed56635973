// Reference kernels for Cast (`to`: a type name at opset 1, an ONNX type code from 6) and CastLike (the
// dtype of a second input), between float32/float64/float16/bfloat16, the integer types and bool.
// float → integer truncates toward zero like static_cast (NaN → 0, out-of-range saturates); → float16
// and → bfloat16 round to nearest even, once (PyTorch's and CUDA's conversions); → bool is `v != 0`.
#include <type_traits>

#include "kernels/reference/cast_target.h"
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
    return {double_to_bfloat16_bits(static_cast<double>(v))};
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
