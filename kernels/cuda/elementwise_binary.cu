// CUDA kernels of Add, Sub, Mul, Div, Mod, Pow, PRelu (two inputs) and Min, Max, Sum, Mean (one or more):
// numpy broadcasting through the host-computed BroadcastGeometry, math from kernels/elementwise_functors.h.
// Add/Sub/Mul/Div/Min/Max/PRelu take float32/float64/int32/int64, Sum/Mean float32/float64, Pow a float
// base with a float32/float64/int32/int64 exponent. Variadic ops fold left to right into the output
// (one launch per extra input), so they add in the reference kernel's order.
//
// Integer Div by zero: the reference kernel throws; a device cannot without a host round trip, so the
// CUDA kernel writes 0 there (elementwise::Div), and Mod too.
#include "graph/fused_activation.h"
#include "graph/onnx_mod.h"
#include "kernels/cuda/elementwise_launch.cuh"

namespace onnxtrain::cuda {
namespace {

using reference::kernel_fail;

// Two inputs of one dtype, broadcast together; output of that dtype; `make_functor(T{})` the functor.
template <typename MakeFunctor>
std::unique_ptr<Kernel> make_binary(const KernelSpec& spec, MakeFunctor make_functor) {
  reference::require_input_count(spec, 2, 2);
  const DType dtype = require_cuda_dtype(spec, 0, kCudaNumericDTypes);
  reference::require_same_dtype(spec, 1, 0);
  const std::vector<int64_t> out = reference::broadcast_sizes_or_fail(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
  reference::require_output(spec, 0, dtype, out);
  const BroadcastGeometry g = require_geometry(spec, out, {spec.inputs[0].sizes, spec.inputs[1].sizes});
  return make_cuda_kernel([dtype, g, make_functor](cudaStream_t stream, auto inputs, auto outputs) {
    dispatch_cuda<true>(dtype, [&](auto zero) {
      using T = decltype(zero);
      launch_broadcast2(stream, g, inputs[0].template as<const T>(), inputs[1].template as<const T>(),
                        outputs[0].template as<T>(), make_functor(zero));
    });
  });
}

template <template <typename> class Functor>
std::unique_ptr<Kernel> make_arithmetic(const KernelSpec& spec) {
  if (fuses_relu(spec.attributes))  // graph/autodiff/add_relu.h: a CPU training graph's only
    reference::kernel_fail(spec, "the fused Relu runs on the CPU only; train on the GPU unfused");
  return make_binary(spec, [](auto zero) { return Functor<decltype(zero)>{}; });
}

// Mod: graph/onnx_mod.h's remainder, fmod 0 (integers) or 1.
template <typename T>
struct ModFunctor {
  bool fmod = false;
  ONNXTRAIN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_integral_v<T>) {
      if (b == T(0)) return T(0);
    }
    return onnx_mod(a, b, fmod);
  }
};

std::unique_ptr<Kernel> make_mod(const KernelSpec& spec) {
  const int64_t fmod = spec.attributes.get_int("fmod", 0);
  const std::string bad = onnx_mod_fmod_error(fmod, !spec.inputs.empty() && is_floating(spec.inputs[0].dtype));
  if (!bad.empty()) kernel_fail(spec, bad);
  return make_binary(spec, [fmod](auto zero) { return ModFunctor<decltype(zero)>{fmod != 0}; });
}

// PRelu: the slope broadcasts onto X (unidirectionally).
std::unique_ptr<Kernel> make_prelu(const KernelSpec& spec) {
  reference::require_input_count(spec, 2, 2);
  const DType dtype = require_cuda_dtype(spec, 0, kCudaNumericDTypes);
  reference::require_same_dtype(spec, 1, 0);
  const std::vector<int64_t>& x_sizes = spec.inputs[0].sizes;
  if (!reference::broadcasts_onto(spec.inputs[1].sizes, x_sizes)) {
    kernel_fail(spec, "slope of sizes " + reference::sizes_to_string(spec.inputs[1].sizes) +
                          " does not broadcast onto X " + reference::sizes_to_string(x_sizes));
  }
  reference::require_output(spec, 0, dtype, x_sizes);
  const BroadcastGeometry g = require_geometry(spec, x_sizes, {x_sizes, spec.inputs[1].sizes});
  return make_cuda_kernel([dtype, g](cudaStream_t stream, auto inputs, auto outputs) {
    dispatch_cuda<true>(dtype, [&](auto zero) {
      using T = decltype(zero);
      launch_broadcast2(stream, g, inputs[0].template as<const T>(), inputs[1].template as<const T>(),
                        outputs[0].template as<T>(), elementwise::PRelu<T>{});
    });
  });
}

// Pow: a float base; the exponent has the base's dtype before opset 12, any numeric type from 12 (here
// float32/64 and the 32- and 64-bit integers, signed or not).
const std::vector<DType> kPowExponentDTypes = {DType::Float32, DType::Float64, DType::Int32,
                                               DType::Int64,   DType::UInt32,  DType::UInt64};

// dispatch_cuda<true> with the unsigned exponents too (only Pow takes them).
template <typename Fn>
void dispatch_pow_exponent(DType dtype, Fn&& fn) {
  if (dtype == DType::UInt32) return fn(uint32_t{});
  if (dtype == DType::UInt64) return fn(uint64_t{});
  dispatch_cuda<true>(dtype, fn);
}

std::unique_ptr<Kernel> make_pow(const KernelSpec& spec) {
  reference::require_input_count(spec, 2, 2);
  const DType base_dtype = require_cuda_dtype(spec, 0, kCudaFloatDTypes);
  const DType exponent_dtype = require_cuda_dtype(spec, 1, kPowExponentDTypes);
  if (spec.opset < 12 && exponent_dtype != base_dtype) {
    kernel_fail(spec, "the exponent must have the base's dtype before opset 12");
  }
  const std::vector<int64_t> out = reference::broadcast_sizes_or_fail(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
  reference::require_output(spec, 0, base_dtype, out);
  const BroadcastGeometry g = require_geometry(spec, out, {spec.inputs[0].sizes, spec.inputs[1].sizes});
  return make_cuda_kernel([base_dtype, exponent_dtype, g](cudaStream_t stream, auto inputs, auto outputs) {
    dispatch_cuda<false>(base_dtype, [&](auto base_zero) {
      using T = decltype(base_zero);
      dispatch_pow_exponent(exponent_dtype, [&](auto exponent_zero) {
        using E = decltype(exponent_zero);
        launch_broadcast2(stream, g, inputs[0].template as<const T>(), inputs[1].template as<const E>(),
                          outputs[0].template as<T>(), elementwise::Pow<T, E>{});
      });
    });
  });
}

// One step of a variadic fold: combine, and on the last step finish (Mean divides by the input count).
template <typename F, typename T>
struct FoldStep {
  int64_t count;
  bool last;
  ONNXTRAIN_HOST_DEVICE T operator()(T acc, T next) const {
    const T v = F{}.combine(acc, next);
    return last ? F{}.finish(v, count) : v;
  }
};

// The single-input case: finish(x, 1) (a copy for Min/Max/Sum, x / 1 for Mean).
template <typename F, typename T>
struct FinishOnly {
  ONNXTRAIN_HOST_DEVICE T operator()(T x) const { return F{}.finish(x, 1); }
};

template <template <typename> class Functor>
std::unique_ptr<Kernel> make_variadic(const KernelSpec& spec, const std::vector<DType>& allowed) {
  if (spec.inputs.empty()) kernel_fail(spec, "expects at least one input");
  const DType dtype = require_cuda_dtype(spec, 0, allowed);
  std::vector<int64_t> out = spec.inputs[0].sizes;
  for (size_t k = 1; k < spec.inputs.size(); ++k) {
    require_cuda_dtype(spec, k, allowed);
    reference::require_same_dtype(spec, k, 0);
    out = reference::broadcast_sizes_or_fail(spec, out, spec.inputs[k].sizes);
  }
  reference::require_output(spec, 0, dtype, out);
  // Step 1 combines inputs 0 and 1; step k (k >= 2) combines the output so far with input k.
  std::vector<BroadcastGeometry> steps;
  for (size_t k = 1; k < spec.inputs.size(); ++k) {
    steps.push_back(require_geometry(spec, out, {k == 1 ? spec.inputs[0].sizes : out, spec.inputs[k].sizes}));
  }
  const auto count = static_cast<int64_t>(spec.inputs.size());
  return make_cuda_kernel([dtype, steps, count](cudaStream_t stream, auto inputs, auto outputs) {
    dispatch_cuda<true>(dtype, [&](auto zero) {
      using T = decltype(zero);
      using F = Functor<T>;
      T* y = outputs[0].template as<T>();
      if (steps.empty()) {
        launch_map(stream, inputs[0].template as<const T>(), y, outputs[0].numel(), FinishOnly<F, T>{});
        return;
      }
      for (size_t s = 0; s < steps.size(); ++s) {
        const T* acc = s == 0 ? inputs[0].template as<const T>() : y;
        launch_broadcast2(stream, steps[s], acc, inputs[s + 1].template as<const T>(), y,
                          FoldStep<F, T>{count, s + 1 == steps.size()});
      }
    });
  });
}

}  // namespace

void register_cuda_binary_kernels(KernelRegistry& registry) {
  using namespace elementwise;
  registry.add(cuda_entry("Add", kCudaNumericDTypes, &make_arithmetic<Add>));
  registry.add(cuda_entry("Sub", kCudaNumericDTypes, &make_arithmetic<Sub>));
  registry.add(cuda_entry("Mul", kCudaNumericDTypes, &make_arithmetic<Mul>));
  registry.add(cuda_entry("Div", kCudaNumericDTypes, &make_arithmetic<Div>));
  registry.add(cuda_entry("Mod", kCudaNumericDTypes, &make_mod));
  registry.add(cuda_entry("Pow", kCudaFloatDTypes, &make_pow));
  registry.add(cuda_entry("PRelu", kCudaNumericDTypes, &make_prelu));
  registry.add(cuda_entry("Min", kCudaNumericDTypes,
                          [](const KernelSpec& s) { return make_variadic<Min>(s, kCudaNumericDTypes); }));
  registry.add(cuda_entry("Max", kCudaNumericDTypes,
                          [](const KernelSpec& s) { return make_variadic<Max>(s, kCudaNumericDTypes); }));
  registry.add(
      cuda_entry("Sum", kCudaFloatDTypes, [](const KernelSpec& s) { return make_variadic<Sum>(s, kCudaFloatDTypes); }));
  registry.add(cuda_entry("Mean", kCudaFloatDTypes,
                          [](const KernelSpec& s) { return make_variadic<Mean>(s, kCudaFloatDTypes); }));
}

}  // namespace onnxtrain::cuda
