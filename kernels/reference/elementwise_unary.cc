// Reference kernels for the activations and unary math (Relu … Gelu), Clip and PRelu. Float math ops
// take float32/float64; Relu and Neg also the signed integers, Abs, Sign, Erf, Clip and PRelu every
// arithmetic type. Each op's math is a functor of kernels/elementwise_functors.h (shared with the CUDA
// kernels), applied here in plain loops.
#include <cmath>
#include <type_traits>

#include "kernels/elementwise_functors.h"
#include "kernels/reference/elementwise_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

// A kernel applying fn to every element; instantiated for float types only when FloatsOnly.
template <bool FloatsOnly, typename Fn>
std::unique_ptr<Kernel> make_unary_kernel(const KernelSpec& spec, const std::vector<DType>& allowed, Fn fn) {
  require_input_count(spec, 1, 1);
  const DType dtype = require_dtype_in(spec, 0, allowed);
  require_output(spec, 0, dtype, spec.inputs[0].sizes);
  return make_closure_kernel([dtype, fn](auto inputs, auto outputs) {
    auto apply = [&](auto zero) {
      using T = decltype(zero);
      const T* x = inputs[0].template as<T>();
      T* y = outputs[0].template as<T>();
      for (int64_t i = 0; i < outputs[0].numel(); ++i) y[i] = fn(x[i]);
    };
    if constexpr (FloatsOnly) {
      dispatch_float(dtype, apply);
    } else {
      dispatch_arithmetic(dtype, apply);
    }
  });
}

template <typename Fn>
std::unique_ptr<Kernel> float_unary(const KernelSpec& spec, Fn fn) {
  return make_unary_kernel<true>(spec, kFloatDTypes, fn);
}

std::unique_ptr<Kernel> make_relu(const KernelSpec& spec) {
  return make_unary_kernel<false>(spec, kSignedDTypes, [](auto x) { return elementwise::Relu<decltype(x)>{}(x); });
}

std::unique_ptr<Kernel> make_neg(const KernelSpec& spec) {
  return make_unary_kernel<false>(spec, kSignedDTypes, [](auto x) { return elementwise::Neg<decltype(x)>{}(x); });
}

std::unique_ptr<Kernel> make_abs(const KernelSpec& spec) {
  return make_unary_kernel<false>(spec, kArithmeticDTypes, [](auto x) { return elementwise::Abs<decltype(x)>{}(x); });
}

std::unique_ptr<Kernel> make_sign(const KernelSpec& spec) {
  return make_unary_kernel<false>(spec, kArithmeticDTypes, [](auto x) { return elementwise::Sign<decltype(x)>{}(x); });
}

std::unique_ptr<Kernel> make_erf(const KernelSpec& spec) {
  return make_unary_kernel<false>(spec, kArithmeticDTypes, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_integral_v<T>) {
      return float_to_integer<T>(std::erf(static_cast<double>(x)));
    } else {
      return elementwise::Erf<T>{}(x);
    }
  });
}

std::unique_ptr<Kernel> make_sigmoid(const KernelSpec& spec) {
  return float_unary(spec, [](auto x) { return elementwise::Sigmoid<decltype(x)>{}(x); });
}

std::unique_ptr<Kernel> make_softplus(const KernelSpec& spec) {
  return float_unary(spec, [](auto x) { return elementwise::Softplus<decltype(x)>{}(x); });
}

std::unique_ptr<Kernel> make_leaky_relu(const KernelSpec& spec) {
  const double alpha = spec.attributes.get_float("alpha", 0.01);
  return float_unary(spec, [alpha](auto x) {
    using T = decltype(x);
    return elementwise::LeakyRelu<T>{static_cast<T>(alpha)}(x);
  });
}

std::unique_ptr<Kernel> make_elu(const KernelSpec& spec) {
  const double alpha = spec.attributes.get_float("alpha", 1.0);
  return float_unary(spec, [alpha](auto x) {
    using T = decltype(x);
    return elementwise::Elu<T>{static_cast<T>(alpha)}(x);
  });
}

std::unique_ptr<Kernel> make_celu(const KernelSpec& spec) {
  const double alpha = spec.attributes.get_float("alpha", 1.0);
  return float_unary(spec, [alpha](auto x) {
    using T = decltype(x);
    return elementwise::Celu<T>{static_cast<T>(alpha)}(x);
  });
}

std::unique_ptr<Kernel> make_selu(const KernelSpec& spec) {
  const double alpha = spec.attributes.get_float("alpha", 1.67326319217681884765625);
  const double gamma = spec.attributes.get_float("gamma", 1.05070102214813232421875);
  return float_unary(spec, [alpha, gamma](auto x) {
    using T = decltype(x);
    return elementwise::Selu<T>{static_cast<T>(alpha), static_cast<T>(gamma)}(x);
  });
}

std::unique_ptr<Kernel> make_hard_sigmoid(const KernelSpec& spec) {
  const double alpha = spec.attributes.get_float("alpha", 0.2);
  const double beta = spec.attributes.get_float("beta", 0.5);
  return float_unary(spec, [alpha, beta](auto x) {
    using T = decltype(x);
    return elementwise::HardSigmoid<T>{static_cast<T>(alpha), static_cast<T>(beta)}(x);
  });
}

std::unique_ptr<Kernel> make_hard_swish(const KernelSpec& spec) {
  return float_unary(spec, [](auto x) { return elementwise::HardSwish<decltype(x)>{}(x); });
}

std::unique_ptr<Kernel> make_gelu(const KernelSpec& spec) {
  const std::string approximate = spec.attributes.get_string("approximate", "none");
  if (approximate == "none") {
    return float_unary(spec, [](auto x) { return elementwise::GeluErf<decltype(x)>{}(x); });
  }
  if (approximate == "tanh") {
    return float_unary(spec, [](auto x) { return elementwise::GeluTanh<decltype(x)>{}(x); });
  }
  kernel_fail(spec, "approximate must be 'none' or 'tanh', got '" + approximate + "'");
}

// Clip: min/max attributes before opset 11 (float only), optional scalar inputs of X's dtype from 11.
std::unique_ptr<Kernel> make_clip(const KernelSpec& spec) {
  const bool bounds_as_inputs = spec.opset >= 11;
  require_input_count(spec, 1, bounds_as_inputs ? 3 : 1);
  const DType dtype = require_dtype_in(spec, 0, bounds_as_inputs ? kArithmeticDTypes : kFloatDTypes);
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (!has_input(spec, i)) continue;
    require_same_dtype(spec, i, 0);
    if (spec.inputs[i].numel() != 1) {
      kernel_fail(spec, std::string(i == 1 ? "min" : "max") + " must be a scalar, got sizes " +
                            sizes_to_string(spec.inputs[i].sizes));
    }
  }
  require_output(spec, 0, dtype, spec.inputs[0].sizes);
  const double min_attribute = spec.attributes.get_float("min", -INFINITY);
  const double max_attribute = spec.attributes.get_float("max", INFINITY);
  return make_closure_kernel([=](auto inputs, auto outputs) {
    dispatch_arithmetic(dtype, [&](auto zero) {
      using T = decltype(zero);
      T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
      if (!bounds_as_inputs) {
        lo = static_cast<T>(std::max(min_attribute, static_cast<double>(lo)));
        hi = static_cast<T>(std::min(max_attribute, static_cast<double>(hi)));
      }
      if (inputs.size() > 1 && inputs[1].present()) lo = inputs[1].template as<T>()[0];
      if (inputs.size() > 2 && inputs[2].present()) hi = inputs[2].template as<T>()[0];
      const T* x = inputs[0].template as<T>();
      T* y = outputs[0].template as<T>();
      const elementwise::Clip<T> clip{lo, hi};
      for (int64_t i = 0; i < outputs[0].numel(); ++i) y[i] = clip(x[i]);
    });
  });
}

// PRelu: the slope broadcasts onto X (unidirectionally).
std::unique_ptr<Kernel> make_prelu(const KernelSpec& spec) {
  require_input_count(spec, 2, 2);
  const DType dtype = require_dtype_in(spec, 0, kArithmeticDTypes);
  require_dtype_in(spec, 1, kArithmeticDTypes);
  require_same_dtype(spec, 1, 0);
  const std::vector<int64_t>& x_sizes = spec.inputs[0].sizes;
  if (broadcast_sizes_or_fail(spec, x_sizes, spec.inputs[1].sizes) != x_sizes) {
    kernel_fail(spec, "slope of sizes " + sizes_to_string(spec.inputs[1].sizes) + " does not broadcast onto X " +
                          sizes_to_string(x_sizes));
  }
  require_output(spec, 0, dtype, x_sizes);
  const std::vector<std::vector<int64_t>> strides = {broadcast_strides(x_sizes, x_sizes),
                                                     broadcast_strides(spec.inputs[1].sizes, x_sizes)};
  return make_closure_kernel([dtype, x_sizes, strides](auto inputs, auto outputs) {
    dispatch_arithmetic(dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* x = inputs[0].template as<T>();
      const T* slope = inputs[1].template as<T>();
      T* y = outputs[0].template as<T>();
      for_each_broadcast(x_sizes, strides, [&](int64_t i, const std::vector<int64_t>& offset) {
        y[i] = elementwise::PRelu<T>{}(x[offset[0]], slope[offset[1]]);
      });
    });
  });
}

// The float math ops without attributes.
#define ONNXTRAIN_FLOAT_UNARY(Functor)                                                       \
  [](const KernelSpec& spec) {                                                               \
    return float_unary(spec, [](auto x) { return elementwise::Functor<decltype(x)>{}(x); }); \
  }

}  // namespace

void register_reference_elementwise_unary_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Relu", kSignedDTypes, &make_relu));
  registry.add(reference_entry("Neg", kSignedDTypes, &make_neg));
  registry.add(reference_entry("Abs", kArithmeticDTypes, &make_abs));
  registry.add(reference_entry("Sign", kArithmeticDTypes, &make_sign));
  registry.add(reference_entry("Erf", kArithmeticDTypes, &make_erf));
  registry.add(reference_entry("Sigmoid", kFloatDTypes, &make_sigmoid));
  registry.add(reference_entry("Tanh", kFloatDTypes, ONNXTRAIN_FLOAT_UNARY(Tanh)));
  registry.add(reference_entry("Sqrt", kFloatDTypes, ONNXTRAIN_FLOAT_UNARY(Sqrt)));
  registry.add(reference_entry("Exp", kFloatDTypes, ONNXTRAIN_FLOAT_UNARY(Exp)));
  registry.add(reference_entry("Log", kFloatDTypes, ONNXTRAIN_FLOAT_UNARY(Log)));
  registry.add(reference_entry("Reciprocal", kFloatDTypes, ONNXTRAIN_FLOAT_UNARY(Reciprocal)));
  registry.add(reference_entry("Sin", kFloatDTypes, ONNXTRAIN_FLOAT_UNARY(Sin)));
  registry.add(reference_entry("Cos", kFloatDTypes, ONNXTRAIN_FLOAT_UNARY(Cos)));
  registry.add(reference_entry("Ceil", kFloatDTypes, ONNXTRAIN_FLOAT_UNARY(Ceil)));
  registry.add(reference_entry("Floor", kFloatDTypes, ONNXTRAIN_FLOAT_UNARY(Floor)));
  registry.add(reference_entry("Softplus", kFloatDTypes, &make_softplus));
  registry.add(reference_entry("LeakyRelu", kFloatDTypes, &make_leaky_relu));
  registry.add(reference_entry("Elu", kFloatDTypes, &make_elu));
  registry.add(reference_entry("Celu", kFloatDTypes, &make_celu));
  registry.add(reference_entry("Mish", kFloatDTypes, ONNXTRAIN_FLOAT_UNARY(Mish)));
  registry.add(reference_entry("Selu", kFloatDTypes, &make_selu));
  registry.add(reference_entry("HardSigmoid", kFloatDTypes, &make_hard_sigmoid));
  registry.add(reference_entry("HardSwish", kFloatDTypes, &make_hard_swish));
  registry.add(reference_entry("Gelu", kFloatDTypes, &make_gelu));
  registry.add(reference_entry("Clip", kArithmeticDTypes, &make_clip));
  registry.add(reference_entry("PRelu", kArithmeticDTypes, &make_prelu));
}

}  // namespace onnxtrain
