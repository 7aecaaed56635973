// CUDA kernels of the activations and unary math (Relu … Gelu) and Clip: one grid-stride map per op over
// the functors of kernels/elementwise_functors.h, which the reference kernels run on the CPU. Float math
// ops take float32/float64; Relu, Neg, Abs, Sign and Clip also int32/int64. Also holds
// register_cuda_elementwise_kernels, the family's entry point.
#include <cmath>
#include <limits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise_launch.cuh"

namespace onnxtrain {
namespace cuda {
namespace {

using reference::kernel_fail;

// A kernel applying make_functor(T{}) to every element of input 0.
template <bool Numeric, typename MakeFunctor>
std::unique_ptr<Kernel> make_unary(const KernelSpec& spec, MakeFunctor make_functor) {
  reference::require_input_count(spec, 1, 1);
  const DType dtype = require_cuda_dtype(spec, 0, Numeric ? kCudaNumericDTypes : kCudaFloatDTypes);
  reference::require_output(spec, 0, dtype, spec.inputs[0].sizes);
  return make_cuda_kernel([dtype, make_functor](cudaStream_t stream, auto inputs, auto outputs) {
    dispatch_cuda<Numeric>(dtype, [&](auto zero) {
      using T = decltype(zero);
      launch_map(stream, inputs[0].template as<const T>(), outputs[0].template as<T>(), outputs[0].numel(),
                 make_functor(zero));
    });
  });
}

// An op whose functor has no parameters.
template <template <typename> class Functor, bool Numeric = false>
std::unique_ptr<Kernel> make_plain(const KernelSpec& spec) {
  return make_unary<Numeric>(spec, [](auto zero) { return Functor<decltype(zero)>{}; });
}

std::unique_ptr<Kernel> make_leaky_relu(const KernelSpec& spec) {
  const double alpha = spec.attributes.get_float("alpha", 0.01);
  return make_unary<false>(spec, [alpha](auto zero) {
    using T = decltype(zero);
    return elementwise::LeakyRelu<T>{static_cast<T>(alpha)};
  });
}

std::unique_ptr<Kernel> make_elu(const KernelSpec& spec) {
  const double alpha = spec.attributes.get_float("alpha", 1.0);
  return make_unary<false>(spec, [alpha](auto zero) {
    using T = decltype(zero);
    return elementwise::Elu<T>{static_cast<T>(alpha)};
  });
}

std::unique_ptr<Kernel> make_celu(const KernelSpec& spec) {
  const double alpha = spec.attributes.get_float("alpha", 1.0);
  return make_unary<false>(spec, [alpha](auto zero) {
    using T = decltype(zero);
    return elementwise::Celu<T>{static_cast<T>(alpha)};
  });
}

std::unique_ptr<Kernel> make_selu(const KernelSpec& spec) {
  const double alpha = spec.attributes.get_float("alpha", 1.67326319217681884765625);
  const double gamma = spec.attributes.get_float("gamma", 1.05070102214813232421875);
  return make_unary<false>(spec, [alpha, gamma](auto zero) {
    using T = decltype(zero);
    return elementwise::Selu<T>{static_cast<T>(alpha), static_cast<T>(gamma)};
  });
}

std::unique_ptr<Kernel> make_hard_sigmoid(const KernelSpec& spec) {
  const double alpha = spec.attributes.get_float("alpha", 0.2);
  const double beta = spec.attributes.get_float("beta", 0.5);
  return make_unary<false>(spec, [alpha, beta](auto zero) {
    using T = decltype(zero);
    return elementwise::HardSigmoid<T>{static_cast<T>(alpha), static_cast<T>(beta)};
  });
}

std::unique_ptr<Kernel> make_gelu(const KernelSpec& spec) {
  const std::string approximate = spec.attributes.get_string("approximate", "none");
  if (approximate == "none") return make_plain<elementwise::GeluErf>(spec);
  if (approximate == "tanh") return make_plain<elementwise::GeluTanh>(spec);
  kernel_fail(spec, "approximate must be 'none' or 'tanh', got '" + approximate + "'");
}

// Clip with bounds that live on the device (opset 11+ inputs): each thread reads the scalars, which
// stay in cache, so no host round trip is needed to learn them.
template <typename T>
struct DeviceBoundsClip {
  const T* lo_ptr;  // null: no min input
  const T* hi_ptr;  // null: no max input
  T lo, hi;         // used where the pointer is null
  __device__ T operator()(T x) const { return elementwise::Clip<T>{lo_ptr ? *lo_ptr : lo, hi_ptr ? *hi_ptr : hi}(x); }
};

// Clip: min/max attributes before opset 11 (float only), optional scalar inputs of X's dtype from 11.
std::unique_ptr<Kernel> make_clip(const KernelSpec& spec) {
  const bool bounds_as_inputs = spec.opset >= 11;
  reference::require_input_count(spec, 1, bounds_as_inputs ? 3 : 1);
  const DType dtype = require_cuda_dtype(spec, 0, bounds_as_inputs ? kCudaNumericDTypes : kCudaFloatDTypes);
  for (size_t i : {size_t{1}, size_t{2}}) {
    if (!reference::has_input(spec, i)) continue;
    reference::require_same_dtype(spec, i, 0);
    if (spec.inputs[i].numel() != 1) {
      kernel_fail(spec, std::string(i == 1 ? "min" : "max") + " must be a scalar, got sizes " +
                            reference::sizes_to_string(spec.inputs[i].sizes));
    }
  }
  reference::require_output(spec, 0, dtype, spec.inputs[0].sizes);
  const double min_attribute = spec.attributes.get_float("min", -INFINITY);
  const double max_attribute = spec.attributes.get_float("max", INFINITY);
  return make_cuda_kernel([=](cudaStream_t stream, auto inputs, auto outputs) {
    dispatch_cuda<true>(dtype, [&](auto zero) {
      using T = decltype(zero);
      T lo = std::numeric_limits<T>::lowest(), hi = std::numeric_limits<T>::max();
      if (!bounds_as_inputs) {
        lo = static_cast<T>(std::max(min_attribute, static_cast<double>(lo)));
        hi = static_cast<T>(std::min(max_attribute, static_cast<double>(hi)));
      }
      const T* lo_ptr = inputs.size() > 1 && inputs[1].present() ? inputs[1].template as<const T>() : nullptr;
      const T* hi_ptr = inputs.size() > 2 && inputs[2].present() ? inputs[2].template as<const T>() : nullptr;
      launch_map(stream, inputs[0].template as<const T>(), outputs[0].template as<T>(), outputs[0].numel(),
                 DeviceBoundsClip<T>{lo_ptr, hi_ptr, lo, hi});
    });
  });
}

}  // namespace

void register_cuda_unary_kernels(KernelRegistry& registry) {
  using namespace elementwise;
  registry.add(cuda_entry("Relu", kCudaNumericDTypes, &make_plain<Relu, true>));
  registry.add(cuda_entry("Neg", kCudaNumericDTypes, &make_plain<Neg, true>));
  registry.add(cuda_entry("Abs", kCudaNumericDTypes, &make_plain<Abs, true>));
  registry.add(cuda_entry("Sign", kCudaNumericDTypes, &make_plain<Sign, true>));
  registry.add(cuda_entry("Erf", kCudaFloatDTypes, &make_plain<Erf>));
  registry.add(cuda_entry("Sigmoid", kCudaFloatDTypes, &make_plain<Sigmoid>));
  registry.add(cuda_entry("Tanh", kCudaFloatDTypes, &make_plain<Tanh>));
  registry.add(cuda_entry("Sqrt", kCudaFloatDTypes, &make_plain<Sqrt>));
  registry.add(cuda_entry("Exp", kCudaFloatDTypes, &make_plain<Exp>));
  registry.add(cuda_entry("Log", kCudaFloatDTypes, &make_plain<Log>));
  registry.add(cuda_entry("Reciprocal", kCudaFloatDTypes, &make_plain<Reciprocal>));
  registry.add(cuda_entry("Sin", kCudaFloatDTypes, &make_plain<Sin>));
  registry.add(cuda_entry("Cos", kCudaFloatDTypes, &make_plain<Cos>));
  registry.add(cuda_entry("Ceil", kCudaFloatDTypes, &make_plain<Ceil>));
  registry.add(cuda_entry("Floor", kCudaFloatDTypes, &make_plain<Floor>));
  registry.add(cuda_entry("Softplus", kCudaFloatDTypes, &make_plain<Softplus>));
  registry.add(cuda_entry("HardSwish", kCudaFloatDTypes, &make_plain<HardSwish>));
  registry.add(cuda_entry("LeakyRelu", kCudaFloatDTypes, &make_leaky_relu));
  registry.add(cuda_entry("Elu", kCudaFloatDTypes, &make_elu));
  registry.add(cuda_entry("Celu", kCudaFloatDTypes, &make_celu));
  registry.add(cuda_entry("Mish", kCudaFloatDTypes, &make_plain<Mish>));
  registry.add(cuda_entry("Selu", kCudaFloatDTypes, &make_selu));
  registry.add(cuda_entry("HardSigmoid", kCudaFloatDTypes, &make_hard_sigmoid));
  registry.add(cuda_entry("Gelu", kCudaFloatDTypes, &make_gelu));
  registry.add(cuda_entry("Clip", kCudaNumericDTypes, &make_clip));
}

}  // namespace cuda

void register_cuda_elementwise_kernels(KernelRegistry& registry) {
  cuda::register_cuda_unary_kernels(registry);
  cuda::register_cuda_binary_kernels(registry);
  cuda::register_cuda_compare_logic_kernels(registry);
  cuda::register_cuda_cast_kernels(registry);
}

}  // namespace onnxtrain
