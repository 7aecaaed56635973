// Reference kernels for Add, Sub, Mul, Div, Mod, Pow (two inputs) and Min, Max, Sum, Mean (one or more):
// numpy broadcasting over float32/float64 and the integer types. Integer arithmetic wraps (computed in
// uint64, never signed overflow); integer Div truncates toward zero and rejects division by zero; Mod's
// math is graph/onnx_mod.h's (the constant folder's too), fmod 0 or 1, an integer divisor of 0 an error
// at run time; Pow's exponent may have its own type (opset 12+).
#include <cmath>
#include <string>
#include <type_traits>

#include "graph/fused_activation.h"
#include "graph/onnx_mod.h"
#include "kernels/elementwise_functors.h"
#include "kernels/reference/elementwise_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename T>
T wrap(uint64_t v) {
  return static_cast<T>(v);  // modular since C++20
}

// The math is kernels/elementwise_functors.h's (shared with the CUDA kernels); Div adds the check the
// functor cannot make.
template <template <typename> class Functor>
struct ArithmeticOp {
  template <typename T>
  static T apply(const KernelSpec&, T a, T b) {
    return Functor<T>{}(a, b);
  }
};
using AddOp = ArithmeticOp<elementwise::Add>;
// Add with a fused Relu (graph/autodiff/add_relu.h): Relu(a + b), as the two reference kernels compute it.
struct AddReluOp {
  template <typename T>
  static T apply(const KernelSpec&, T a, T b) {
    return elementwise::Relu<T>{}(elementwise::Add<T>{}(a, b));
  }
};
using SubOp = ArithmeticOp<elementwise::Sub>;
using MulOp = ArithmeticOp<elementwise::Mul>;

struct DivOp {
  template <typename T>
  static T apply(const KernelSpec& spec, T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if (b == 0) kernel_fail(spec, "integer division by zero");
    }
    return elementwise::Div<T>{}(a, b);
  }
};

struct ModOp {
  bool fmod = false;
  template <typename T>
  T apply(const KernelSpec& spec, T a, T b) const {
    if (std::is_integral_v<T> && b == 0) kernel_fail(spec, "integer modulo by zero");
    return onnx_mod(a, b, fmod);
  }
};

// Add/Sub/Mul/Div/Mod: both inputs of one arithmetic dtype.
template <typename Op>
std::unique_ptr<Kernel> make_binary_kernel(const KernelSpec& spec, Op op) {
  require_input_count(spec, 2, 2);
  const DType dtype = require_dtype_in(spec, 0, kArithmeticDTypes);
  require_dtype_in(spec, 1, kArithmeticDTypes);
  require_same_dtype(spec, 1, 0);
  const std::vector<int64_t> out = broadcast_sizes_or_fail(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
  require_output(spec, 0, dtype, out);
  const std::vector<std::vector<int64_t>> strides = {broadcast_strides(spec.inputs[0].sizes, out),
                                                     broadcast_strides(spec.inputs[1].sizes, out)};
  return make_closure_kernel([spec, dtype, out, strides, op](auto inputs, auto outputs) {
    dispatch_arithmetic(dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* a = inputs[0].template as<T>();
      const T* b = inputs[1].template as<T>();
      T* y = outputs[0].template as<T>();
      for_each_broadcast(out, strides, [&](int64_t i, const std::vector<int64_t>& offset) {
        y[i] = op.apply(spec, a[offset[0]], b[offset[1]]);
      });
    });
  });
}

template <typename Op>
std::unique_ptr<Kernel> make_arithmetic_kernel(const KernelSpec& spec) {
  return make_binary_kernel(spec, Op{});
}

// fmod 0 (integers only) or 1, as the schema checks (graph/ops/mod.cc).
std::unique_ptr<Kernel> make_mod_kernel(const KernelSpec& spec) {
  const int64_t fmod = spec.attributes.get_int("fmod", 0);
  const std::string bad = onnx_mod_fmod_error(fmod, !spec.inputs.empty() && is_floating(spec.inputs[0].dtype));
  if (!bad.empty()) kernel_fail(spec, bad);
  return make_binary_kernel(spec, ModOp{.fmod = fmod != 0});
}

// Integer base: exact repeated squaring (wrapping) for integer exponents.
template <typename T, typename E>
T integer_pow(const KernelSpec& spec, T base, E exponent) {
  if (exponent < 0) {  // 1/base^n truncated toward zero
    if (base == 0) kernel_fail(spec, "integer 0 raised to a negative power");
    if (base == 1) return 1;
    if constexpr (std::is_signed_v<T>) {
      if (base == -1) return static_cast<int64_t>(exponent) % 2 == 0 ? T(1) : T(-1);
    }
    return 0;
  }
  uint64_t result = 1, square = static_cast<uint64_t>(base);
  for (auto n = static_cast<uint64_t>(exponent); n > 0; n >>= 1) {
    if (n & 1) result *= square;
    square *= square;
  }
  return wrap<T>(result);
}

template <typename T, typename E>
T pow_element(const KernelSpec& spec, T base, E exponent) {
  if constexpr (std::is_floating_point_v<T>) {
    return elementwise::Pow<T, E>{}(base, exponent);
  } else if constexpr (std::is_integral_v<E>) {
    return integer_pow(spec, base, exponent);
  } else {
    return float_to_integer<T>(std::pow(static_cast<double>(base), static_cast<double>(exponent)));
  }
}

const std::vector<DType> kPowBaseDTypes = {DType::Float32, DType::Float64, DType::Int32, DType::Int64};

std::unique_ptr<Kernel> make_pow_kernel(const KernelSpec& spec) {
  require_input_count(spec, 2, 2);
  const DType base_dtype = require_dtype_in(spec, 0, kPowBaseDTypes);
  const DType exponent_dtype = require_dtype_in(spec, 1, kArithmeticDTypes);
  if (spec.opset < 12 && exponent_dtype != base_dtype) {
    kernel_fail(spec, "the exponent must have the base's dtype before opset 12");
  }
  const std::vector<int64_t> out = broadcast_sizes_or_fail(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
  require_output(spec, 0, base_dtype, out);
  const std::vector<std::vector<int64_t>> strides = {broadcast_strides(spec.inputs[0].sizes, out),
                                                     broadcast_strides(spec.inputs[1].sizes, out)};
  return make_closure_kernel([spec, base_dtype, exponent_dtype, out, strides](auto inputs, auto outputs) {
    dispatch_numeric(base_dtype, [&](auto base_zero) {
      using T = decltype(base_zero);
      dispatch_arithmetic(exponent_dtype, [&](auto exponent_zero) {
        using E = decltype(exponent_zero);
        const T* a = inputs[0].template as<T>();
        const E* b = inputs[1].template as<E>();
        T* y = outputs[0].template as<T>();
        for_each_broadcast(out, strides, [&](int64_t i, const std::vector<int64_t>& offset) {
          y[i] = pow_element(spec, a[offset[0]], b[offset[1]]);
        });
      });
    });
  });
}

// Min and Max propagate NaN, like numpy's minimum/maximum and torch.min/max.
template <template <typename> class Functor>
struct VariadicOp {
  template <typename T>
  static T combine(T a, T b) {
    return Functor<T>{}.combine(a, b);
  }
  template <typename T>
  static T finish(T v, size_t count) {
    return Functor<T>{}.finish(v, static_cast<int64_t>(count));
  }
};
using MinOp = VariadicOp<elementwise::Min>;
using MaxOp = VariadicOp<elementwise::Max>;
using SumOp = VariadicOp<elementwise::Sum>;
using MeanOp = VariadicOp<elementwise::Mean>;

const std::vector<DType> kMinMaxDTypes = [] {
  std::vector<DType> dtypes = kArithmeticDTypes;
  dtypes.push_back(DType::Float16);
  return dtypes;
}();

// Min/Max/Sum/Mean: one or more inputs of one dtype, broadcast together.
template <typename Op>
std::unique_ptr<Kernel> make_variadic_kernel(const KernelSpec& spec, const std::vector<DType>& allowed) {
  if (spec.inputs.empty()) kernel_fail(spec, "expects at least one input");
  const DType dtype = require_dtype_in(spec, 0, allowed);
  std::vector<int64_t> out = spec.inputs[0].sizes;
  for (size_t k = 1; k < spec.inputs.size(); ++k) {
    require_dtype_in(spec, k, allowed);
    require_same_dtype(spec, k, 0);
    out = broadcast_sizes_or_fail(spec, out, spec.inputs[k].sizes);
  }
  require_output(spec, 0, dtype, out);
  std::vector<std::vector<int64_t>> strides;
  for (const TensorDesc& in : spec.inputs) strides.push_back(broadcast_strides(in.sizes, out));
  return make_closure_kernel([dtype, out, strides](auto inputs, auto outputs) {
    if (dtype == DType::Float16) {  // Min/Max only: they pick an input, so float math is exact
      auto* y = outputs[0].template as<uint16_t>();
      for_each_broadcast(out, strides, [&](int64_t i, const std::vector<int64_t>& offset) {
        float value = half_bits_to_float(inputs[0].template as<uint16_t>()[offset[0]]);
        for (size_t k = 1; k < inputs.size(); ++k) {
          value = Op::combine(value, half_bits_to_float(inputs[k].template as<uint16_t>()[offset[k]]));
        }
        y[i] = double_to_half_bits(value);
      });
      return;
    }
    dispatch_arithmetic(dtype, [&](auto zero) {
      using T = decltype(zero);
      T* y = outputs[0].template as<T>();
      for_each_broadcast(out, strides, [&](int64_t i, const std::vector<int64_t>& offset) {
        T value = inputs[0].template as<T>()[offset[0]];
        for (size_t k = 1; k < inputs.size(); ++k) value = Op::combine(value, inputs[k].template as<T>()[offset[k]]);
        y[i] = Op::finish(value, inputs.size());
      });
    });
  });
}

}  // namespace

void register_reference_elementwise_binary_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Add", kArithmeticDTypes, [](const KernelSpec& s) {
    return fuses_relu(s.attributes) ? make_arithmetic_kernel<AddReluOp>(s) : make_arithmetic_kernel<AddOp>(s);
  }));
  registry.add(reference_entry("Sub", kArithmeticDTypes, &make_arithmetic_kernel<SubOp>));
  registry.add(reference_entry("Mul", kArithmeticDTypes, &make_arithmetic_kernel<MulOp>));
  registry.add(reference_entry("Div", kArithmeticDTypes, &make_arithmetic_kernel<DivOp>));
  registry.add(reference_entry("Mod", kArithmeticDTypes, &make_mod_kernel));
  registry.add(reference_entry("Pow", kPowBaseDTypes, &make_pow_kernel));
  registry.add(reference_entry("Min", kMinMaxDTypes,
                               [](const KernelSpec& s) { return make_variadic_kernel<MinOp>(s, kMinMaxDTypes); }));
  registry.add(reference_entry("Max", kMinMaxDTypes,
                               [](const KernelSpec& s) { return make_variadic_kernel<MaxOp>(s, kMinMaxDTypes); }));
  registry.add(reference_entry("Sum", kFloatDTypes,
                               [](const KernelSpec& s) { return make_variadic_kernel<SumOp>(s, kFloatDTypes); }));
  registry.add(reference_entry("Mean", kFloatDTypes,
                               [](const KernelSpec& s) { return make_variadic_kernel<MeanOp>(s, kFloatDTypes); }));
}

}  // namespace onnxtrain
