// CUDA Shape, Size, Constant, ConstantOfShape and Range. Shape, Size and Constant outputs are known at
// prepare time: they are computed on the host once, kept in the kernel's pinned buffer and copied
// asynchronously each run. ConstantOfShape fills with its value on the device (the shape input only
// repeats the output's sizes); Range reads start and delta on the device (or on the host, when an
// executor keeps those scalars in host memory), so nothing waits on the host.
// The element count of Range is the allocated output's (fixed at prepare by shape inference); the
// reference's run-time checks of limit and delta (delta 0, a count other than the allocation's) are not
// repeated on the GPU.
#include "kernels/cuda/data_movement_common.cuh"

namespace onnxtrain::cuda {

namespace {

// Copies the pinned bytes computed at prepare time into output 0.
class HostValueKernel : public Kernel {
 public:
  HostValueKernel(const void* bytes, size_t count) : value_(bytes, count) {}
  void run(Stream& stream, std::span<const TensorView>, std::span<const TensorView> outputs) override {
    DeviceGuard guard(stream);
    value_.copy_to(outputs[0].data, native_stream(stream));
  }

 private:
  PinnedBytes value_;
};

std::unique_ptr<Kernel> make_shape(const KernelSpec& spec) {
  reference::require_inputs(spec, 1);
  reference::require_output_dtype(spec, 0, DType::Int64);
  const std::vector<int64_t>& sizes = spec.inputs[0].sizes;
  const auto rank = static_cast<int64_t>(sizes.size());
  auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
  const int64_t start = clamp(spec.attributes.get_int("start", 0));
  const int64_t end = std::max(start, clamp(spec.attributes.get_int("end", rank)));
  const std::vector<int64_t> value(sizes.begin() + start, sizes.begin() + end);
  reference::require_output(spec, 0, DType::Int64, {end - start});
  return std::make_unique<HostValueKernel>(value.data(), value.size() * sizeof(int64_t));
}

std::unique_ptr<Kernel> make_size(const KernelSpec& spec) {
  reference::require_inputs(spec, 1);
  reference::require_output_dtype(spec, 0, DType::Int64);
  if (spec.outputs[0].numel() != 1)
    reference::kernel_fail(spec, "the output must hold one element, got sizes " + sizes_text(spec.outputs[0].sizes));
  const int64_t count = spec.inputs[0].numel();
  return std::make_unique<HostValueKernel>(&count, sizeof(count));
}

// The value a Constant node's attributes hold (the reference's rules): its bytes go to the pinned buffer.
std::unique_ptr<Kernel> make_constant(const KernelSpec& spec) {
  const Attributes& attrs = spec.attributes;
  static const char* kKeys[] = {"value",      "value_float",  "value_floats",  "value_int",
                                "value_ints", "value_string", "value_strings", "sparse_value"};
  int given = 0;
  for (const char* key : kKeys) given += attrs.has(key);
  if (given != 1) reference::kernel_fail(spec, "exactly one value attribute is required, got " + std::to_string(given));
  if (attrs.has("sparse_value")) reference::kernel_fail(spec, "sparse constants (sparse_value) are not supported");
  if (attrs.has("value_string") || attrs.has("value_strings"))
    reference::kernel_fail(spec, "string constants are not supported");
  Tensor value;
  if (attrs.has("value")) {
    const Tensor* t = attrs.get_tensor("value");
    if (!t) reference::kernel_fail(spec, "the value attribute is not a tensor onnxtrain can read");
    value = *t;
  } else if (attrs.has("value_float")) {
    value = Tensor(DType::Float32, {});
    value.data<float>()[0] = static_cast<float>(attrs.get_float("value_float", 0));
  } else if (attrs.has("value_floats")) {
    const std::vector<double> values = attrs.get_floats("value_floats");
    value = Tensor(DType::Float32, {static_cast<int64_t>(values.size())});
    for (size_t i = 0; i < values.size(); ++i) value.data<float>()[i] = static_cast<float>(values[i]);
  } else if (attrs.has("value_int")) {
    value = Tensor::scalar_int64(attrs.get_int("value_int", 0));
  } else {
    value = Tensor::vector_int64(attrs.get_ints("value_ints"));
  }
  reference::require_output(spec, 0, value.dtype(), value.sizes());
  return std::make_unique<HostValueKernel>(value.nbytes() ? value.raw() : nullptr, value.nbytes());
}

template <typename W>
__global__ void fill_kernel(W* out, W value, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x)
    out[i] = value;
}

// ConstantOfShape: every output element is the one-element `value` attribute (float32 0 by default).
class ConstantOfShapeKernel : public Kernel {
 public:
  explicit ConstantOfShapeKernel(const KernelSpec& spec) : value_(DType::Float32, {1}) {
    reference::require_inputs(spec, 1);
    reference::require_index_input(spec, 0, "shape");
    if (spec.attributes.has("value")) {
      const Tensor* t = spec.attributes.get_tensor("value");
      if (!t || t->numel() != 1) reference::kernel_fail(spec, "the value attribute must be a tensor with one element");
      value_ = *t;
    }
    reference::require_output_dtype(spec, 0, value_.dtype());
    if (!dispatch_element_size(dtype_size(value_.dtype()), [](auto) {}))
      reference::kernel_fail(spec, "unsupported value dtype " + std::string(dtype_name(value_.dtype())));
  }

  void run(Stream& stream, std::span<const TensorView>, std::span<const TensorView> outputs) override {
    const int64_t n = outputs[0].numel();
    if (n == 0) return;
    DeviceGuard guard(stream);
    dispatch_element_size(dtype_size(value_.dtype()), [&](auto word) {
      using W = decltype(word);
      W bits{};
      std::memcpy(&bits, value_.raw(), sizeof(W));
      fill_kernel<W><<<grid_for(n), kBlock, 0, native_stream(stream)>>>(outputs[0].as<W>(), bits, n);
      ONNXTRAIN_CUDA_CHECK_LAUNCH(fill_kernel<W>);
    });
  }

 private:
  Tensor value_;
};

// out[i] = start + i * delta, in double for floating types like the reference. The product is rounded on
// its own (__dmul_rn is never contracted into an FMA, which nvcc would otherwise make of a + i·b), so the
// values equal the reference's bit for bit.
template <typename T>
__global__ void range_kernel(Scalar<T> start, Scalar<T> delta, T* out, int64_t n) {
  const T first = start.get(), step = delta.get();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    if constexpr (std::is_floating_point_v<T>)
      out[i] =
          static_cast<T>(static_cast<double>(first) + __dmul_rn(static_cast<double>(i), static_cast<double>(step)));
    else
      out[i] = static_cast<T>(int64_t{first} + i * int64_t{step});
  }
}

class RangeKernel : public Kernel {
 public:
  explicit RangeKernel(const KernelSpec& spec) : dtype_(spec.inputs.empty() ? DType::Undefined : spec.inputs[0].dtype) {
    reference::require_inputs(spec, 3);
    static const char* kNames[] = {"start", "limit", "delta"};
    for (size_t i = 0; i < 3; ++i) {
      if (spec.inputs[i].dtype != dtype_)
        reference::kernel_fail(spec, std::string(kNames[i]) + " has dtype " +
                                         std::string(dtype_name(spec.inputs[i].dtype)) + ", start has " +
                                         std::string(dtype_name(dtype_)));
      if (spec.inputs[i].numel() != 1)
        reference::kernel_fail(
            spec, std::string(kNames[i]) + " must be a scalar, got sizes " + sizes_text(spec.inputs[i].sizes));
    }
    reference::require_output_dtype(spec, 0, dtype_);
    if (spec.outputs[0].sizes.size() != 1)
      reference::kernel_fail(spec, "the output must be 1-D, got sizes " + sizes_text(spec.outputs[0].sizes));
    if (!reference::dispatch_range(dtype_, [](auto) {}))
      reference::kernel_fail(spec, "unsupported dtype " + std::string(dtype_name(dtype_)));
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const int64_t n = outputs[0].numel();
    if (n == 0) return;
    DeviceGuard guard(stream);
    reference::dispatch_range(dtype_, [&](auto zero) {
      using T = decltype(zero);
      range_kernel<T><<<grid_for(n), kBlock, 0, native_stream(stream)>>>(
          Scalar<T>::of(inputs[0]), Scalar<T>::of(inputs[2]), outputs[0].as<T>(), n);
      ONNXTRAIN_CUDA_CHECK_LAUNCH(range_kernel<T>);
    });
  }

 private:
  DType dtype_;
};

}  // namespace

void register_cuda_shape_constant_kernels(KernelRegistry& registry) {
  registry.add(movement_entry("Shape", reference::kFixedSizeDTypes, &make_shape));
  registry.add(movement_entry("Size", reference::kFixedSizeDTypes, &make_size));
  registry.add(movement_entry("Constant", reference::kFixedSizeDTypes, &make_constant));
  registry.add(movement_entry("ConstantOfShape", {DType::Int64}, &reference::make_kernel<ConstantOfShapeKernel>));
  registry.add(movement_entry("Range", {DType::Float32, DType::Float64, DType::Int16, DType::Int32, DType::Int64},
                              &reference::make_kernel<RangeKernel>));
}

}  // namespace onnxtrain::cuda
