// CUDA kernels of the comparisons Equal, Less, LessOrEqual, Greater, GreaterOrEqual (float32/float64/
// int32/int64 in, bool out; Equal also on bool), the logical Not, And, Or, Xor (bool) and Where (a bool
// condition picking from X or Y of any fixed-size dtype, moved as 1/2/4/8-byte words). All broadcast like
// numpy; the math is kernels/elementwise_functors.h's. Bool elements are bytes, any non-zero byte true.
#include "kernels/cuda/elementwise_launch.cuh"

namespace onnxtrain::cuda {
namespace {

using reference::kernel_fail;

// Reads bool bytes as bool before calling the bool functor F.
template <typename F>
struct OnBoolBytes {
  ONNXTRAIN_HOST_DEVICE uint8_t operator()(uint8_t a, uint8_t b) const { return F{}(a != 0, b != 0) ? 1 : 0; }
};

template <typename F, typename T>
struct CompareToByte {
  ONNXTRAIN_HOST_DEVICE uint8_t operator()(T a, T b) const { return F{}(a, b) ? 1 : 0; }
};

struct NotByte {
  ONNXTRAIN_HOST_DEVICE uint8_t operator()(uint8_t a) const { return a != 0 ? 0 : 1; }
};

struct IsNaNByte {
  template <typename T>
  ONNXTRAIN_HOST_DEVICE uint8_t operator()(T a) const {
    return a != a ? 1 : 0;  // NaN alone compares unequal to itself
  }
};

template <typename T>
struct Select {
  ONNXTRAIN_HOST_DEVICE T operator()(uint8_t condition, T x, T y) const { return condition != 0 ? x : y; }
};

BroadcastGeometry pair_geometry(const KernelSpec& spec, std::vector<int64_t>& out) {
  out = reference::broadcast_sizes_or_fail(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
  return require_geometry(spec, out, {spec.inputs[0].sizes, spec.inputs[1].sizes});
}

template <typename F>
std::unique_ptr<Kernel> make_comparison(const KernelSpec& spec, const std::vector<DType>& allowed) {
  reference::require_input_count(spec, 2, 2);
  const DType dtype = require_cuda_dtype(spec, 0, allowed);
  reference::require_same_dtype(spec, 1, 0);
  std::vector<int64_t> out;
  const BroadcastGeometry g = pair_geometry(spec, out);
  reference::require_output(spec, 0, DType::Bool, out);
  return make_cuda_kernel([dtype, g](cudaStream_t stream, auto inputs, auto outputs) {
    auto* y = outputs[0].template as<uint8_t>();
    if (dtype == DType::Bool) {
      launch_broadcast2(stream, g, inputs[0].template as<const uint8_t>(), inputs[1].template as<const uint8_t>(), y,
                        OnBoolBytes<F>{});
      return;
    }
    dispatch_cuda<true>(dtype, [&](auto zero) {
      using T = decltype(zero);
      launch_broadcast2(stream, g, inputs[0].template as<const T>(), inputs[1].template as<const T>(), y,
                        CompareToByte<F, T>{});
    });
  });
}

template <typename F>
std::unique_ptr<Kernel> make_logical(const KernelSpec& spec) {
  reference::require_input_count(spec, 2, 2);
  require_cuda_dtype(spec, 0, {DType::Bool});
  require_cuda_dtype(spec, 1, {DType::Bool});
  std::vector<int64_t> out;
  const BroadcastGeometry g = pair_geometry(spec, out);
  reference::require_output(spec, 0, DType::Bool, out);
  return make_cuda_kernel([g](cudaStream_t stream, auto inputs, auto outputs) {
    launch_broadcast2(stream, g, inputs[0].template as<const uint8_t>(), inputs[1].template as<const uint8_t>(),
                      outputs[0].template as<uint8_t>(), OnBoolBytes<F>{});
  });
}

std::unique_ptr<Kernel> make_not(const KernelSpec& spec) {
  reference::require_input_count(spec, 1, 1);
  require_cuda_dtype(spec, 0, {DType::Bool});
  reference::require_output(spec, 0, DType::Bool, spec.inputs[0].sizes);
  return make_cuda_kernel([](cudaStream_t stream, auto inputs, auto outputs) {
    launch_map(stream, inputs[0].template as<const uint8_t>(), outputs[0].template as<uint8_t>(), outputs[0].numel(),
               NotByte{});
  });
}

std::unique_ptr<Kernel> make_is_nan(const KernelSpec& spec) {
  reference::require_input_count(spec, 1, 1);
  require_cuda_dtype(spec, 0, {DType::Float32, DType::Float64});
  reference::require_output(spec, 0, DType::Bool, spec.inputs[0].sizes);
  const bool single = spec.inputs[0].dtype == DType::Float32;
  return make_cuda_kernel([single](cudaStream_t stream, auto inputs, auto outputs) {
    if (single) {
      launch_map(stream, inputs[0].template as<const float>(), outputs[0].template as<uint8_t>(), outputs[0].numel(),
                 IsNaNByte{});
    } else {
      launch_map(stream, inputs[0].template as<const double>(), outputs[0].template as<uint8_t>(), outputs[0].numel(),
                 IsNaNByte{});
    }
  });
}

// Where moves whole elements, so any fixed-size dtype works as an unsigned word of its size.
template <typename Fn>
void dispatch_word(size_t bytes, Fn&& fn) {
  switch (bytes) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    case 8:
      return fn(uint64_t{});
    default:
      throw Error("Where CUDA kernel: elements of " + std::to_string(bytes) + " bytes reached run() unchecked");
  }
}

std::unique_ptr<Kernel> make_where(const KernelSpec& spec) {
  reference::require_input_count(spec, 3, 3);
  require_cuda_dtype(spec, 0, {DType::Bool});
  if (!reference::has_input(spec, 1) || !reference::has_input(spec, 2)) kernel_fail(spec, "X and Y are required");
  const DType dtype = spec.inputs[1].dtype;
  const size_t element = dtype_size(dtype);
  if (element != 1 && element != 2 && element != 4 && element != 8) {
    kernel_fail(spec,
                "X has dtype " + std::string(dtype_name(dtype)) + ", not a fixed-size type of 1, 2, 4 or 8 bytes");
  }
  reference::require_same_dtype(spec, 2, 1);
  const std::vector<int64_t> out = reference::broadcast_sizes_or_fail(
      spec, reference::broadcast_sizes_or_fail(spec, spec.inputs[0].sizes, spec.inputs[1].sizes), spec.inputs[2].sizes);
  reference::require_output(spec, 0, dtype, out);
  const BroadcastGeometry g =
      require_geometry(spec, out, {spec.inputs[0].sizes, spec.inputs[1].sizes, spec.inputs[2].sizes});
  return make_cuda_kernel([element, g](cudaStream_t stream, auto inputs, auto outputs) {
    dispatch_word(element, [&](auto zero) {
      using W = decltype(zero);
      launch_broadcast3(stream, g, inputs[0].template as<const uint8_t>(), inputs[1].template as<const W>(),
                        inputs[2].template as<const W>(), outputs[0].template as<W>(), Select<W>{});
    });
  });
}

}  // namespace

void register_cuda_compare_logic_kernels(KernelRegistry& registry) {
  using namespace elementwise;
  const std::vector<DType> equal_dtypes = {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool};
  registry.add(cuda_entry("Equal", equal_dtypes, [](const KernelSpec& s) {
    return make_comparison<Equal>(s, {DType::Float32, DType::Float64, DType::Int32, DType::Int64, DType::Bool});
  }));
  registry.add(cuda_entry("Less", kCudaNumericDTypes,
                          [](const KernelSpec& s) { return make_comparison<Less>(s, kCudaNumericDTypes); }));
  registry.add(cuda_entry("LessOrEqual", kCudaNumericDTypes,
                          [](const KernelSpec& s) { return make_comparison<LessOrEqual>(s, kCudaNumericDTypes); }));
  registry.add(cuda_entry("Greater", kCudaNumericDTypes,
                          [](const KernelSpec& s) { return make_comparison<Greater>(s, kCudaNumericDTypes); }));
  registry.add(cuda_entry("GreaterOrEqual", kCudaNumericDTypes,
                          [](const KernelSpec& s) { return make_comparison<GreaterOrEqual>(s, kCudaNumericDTypes); }));
  registry.add(cuda_entry("Not", {DType::Bool}, &make_not));
  registry.add(cuda_entry("And", {DType::Bool}, &make_logical<And>));
  registry.add(cuda_entry("Or", {DType::Bool}, &make_logical<Or>));
  registry.add(cuda_entry("Xor", {DType::Bool}, &make_logical<Xor>));
  registry.add(cuda_entry("IsNaN", {DType::Float32, DType::Float64}, &make_is_nan));
  registry.add(cuda_entry("Where", {DType::Bool}, &make_where));
}

}  // namespace onnxtrain::cuda
