// CUDA Resize, Upsample and ResizeGrad: one thread per output element (Resize) or per dX element
// (ResizeGrad) runs the host's per-element math (kernels/resize_gather.h) over the sampling tables, so
// both directions gather, without atomics, in the reference's order. The tables are made on the host from
// the run's roi, scales and sizes (read where they live: a copy and a wait when they are on the device) and
// copied to the kernel's own device memory when they change, which for a model's constant scales is once.
#include <cuda_runtime.h>

#include "kernels/cuda/data_movement_common.cuh"
#include "kernels/resize_plan.h"

namespace onnxtrain::cuda {

namespace {

template <typename T>
__global__ void resize_kernel(ResizeGeometry g, const ResizeTaps* taps, const T* x, T* y, int64_t n,
                              double extrapolation_value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x)
    y[i] = resize_value(g, taps, x, i, extrapolation_value);
}

template <typename T>
__global__ void resize_grad_kernel(ResizeGeometry g, const ResizeTaps* taps, const int64_t* reach, const T* dy, T* dx,
                                   int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x)
    dx[i] = resize_gradient(g, taps, reach, dy, i);
}

// What Resize and ResizeGrad share: the operands read to the host, the plan, its tables on the device.
class ResizeKernelBase : public Kernel {
 protected:
  explicit ResizeKernelBase(const KernelSpec& spec) : spec_(spec), sampling_(resize_sampling_of(spec)) {}
  ~ResizeKernelBase() override {
    if (device_tables_) static_cast<void>(cudaFree(device_tables_));  // a destructor cannot throw
  }

  // The plan for this run, its tables on the device (taps, then reach).
  const ResizePlan& prepare_run(Stream& stream, const std::vector<int64_t>& x_sizes,
                                std::span<const TensorView> inputs) {
    std::vector<TensorView> host(inputs.begin(), inputs.end());
    host_copies_.resize(host.size());
    std::vector<std::byte> key;
    for (size_t i = 1; i < host.size(); ++i) {  // the small operands; input 0 is the data
      if (!host[i].present()) continue;
      const size_t bytes = static_cast<size_t>(host[i].numel()) * dtype_size(host[i].dtype);
      host_copies_[i].resize(bytes);
      if (bytes > 0 && !on_host(host[i])) {
        ONNXTRAIN_CUDA_CHECK(cudaMemcpyAsync(host_copies_[i].data(), host[i].data, bytes, cudaMemcpyDeviceToHost,
                                             native_stream(stream)));
        ONNXTRAIN_CUDA_CHECK(cudaStreamSynchronize(native_stream(stream)));
      } else if (bytes > 0) {
        std::memcpy(host_copies_[i].data(), host[i].data, bytes);
      }
      host[i].data = host_copies_[i].data();
      key.insert(key.end(), host_copies_[i].begin(), host_copies_[i].end());
    }
    for (int64_t s : x_sizes) {
      const auto* b = reinterpret_cast<const std::byte*>(&s);
      key.insert(key.end(), b, b + sizeof(s));
    }
    if (plan_ && key == key_) return *plan_;
    plan_ = plan_resize(spec_, sampling_, x_sizes, host);
    key_ = std::move(key);
    const size_t tap_bytes = plan_->tables.taps.size() * sizeof(ResizeTaps);
    const size_t bytes = tap_bytes + plan_->tables.reach.size() * sizeof(int64_t);
    if (bytes > device_bytes_) {
      if (device_tables_) ONNXTRAIN_CUDA_CHECK(cudaFree(device_tables_));
      device_tables_ = nullptr;
      ONNXTRAIN_CUDA_CHECK(cudaMalloc(&device_tables_, bytes));
      device_bytes_ = bytes;
    }
    // Synchronous: the tables change only when the operands do, and the host vectors may go right after.
    ONNXTRAIN_CUDA_CHECK(cudaStreamSynchronize(native_stream(stream)));
    if (tap_bytes > 0)
      ONNXTRAIN_CUDA_CHECK(cudaMemcpy(device_tables_, plan_->tables.taps.data(), tap_bytes, cudaMemcpyHostToDevice));
    if (bytes > tap_bytes) {
      ONNXTRAIN_CUDA_CHECK(cudaMemcpy(static_cast<std::byte*>(device_tables_) + tap_bytes, plan_->tables.reach.data(),
                                      bytes - tap_bytes, cudaMemcpyHostToDevice));
    }
    return *plan_;
  }
  const ResizeTaps* device_taps() const { return static_cast<const ResizeTaps*>(device_tables_); }
  const int64_t* device_reach() const {
    return reinterpret_cast<const int64_t*>(static_cast<const std::byte*>(device_tables_) +
                                            plan_->tables.taps.size() * sizeof(ResizeTaps));
  }

  KernelSpec spec_;
  ResizeSampling sampling_;
  DType dtype_ = DType::Undefined;

 private:
  std::optional<ResizePlan> plan_;
  std::vector<std::byte> key_;  // the operands and sizes plan_ was made for
  std::vector<std::vector<std::byte>> host_copies_;
  void* device_tables_ = nullptr;
  size_t device_bytes_ = 0;
};

class ResizeKernel final : public ResizeKernelBase {
 public:
  explicit ResizeKernel(const KernelSpec& spec) : ResizeKernelBase(spec) {
    reference::require_inputs(spec, 1);
    dtype_ = reference::require_dtype_in(spec, 0, reference::kFloatDTypes);
    reference::require_output_dtype(spec, 0, dtype_);
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    DeviceGuard guard(stream);
    const ResizePlan& plan = prepare_run(stream, inputs[0].sizes, inputs);
    if (plan.output_sizes() != outputs[0].sizes)
      reference::kernel_fail(spec_, "output has sizes " + sizes_text(outputs[0].sizes) + " but the inputs give " +
                                        sizes_text(plan.output_sizes()));
    const int64_t n = outputs[0].numel();
    if (n == 0) return;
    reference::dispatch_float(dtype_, [&](auto zero) {
      using T = decltype(zero);
      resize_kernel<T><<<grid_for(n), kBlock, 0, native_stream(stream)>>>(
          plan.geometry, device_taps(), inputs[0].as<const T>(), outputs[0].as<T>(), n, sampling_.extrapolation_value);
      ONNXTRAIN_CUDA_CHECK_LAUNCH(resize_kernel<T>);
    });
  }
};

class ResizeGradKernel final : public ResizeKernelBase {
 public:
  explicit ResizeGradKernel(const KernelSpec& spec) : ResizeKernelBase(spec) {
    dtype_ = reference::require_shape_grad_inputs(spec, 2, {"dY", "x_shape"});
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    DeviceGuard guard(stream);
    const ResizePlan& plan = prepare_run(stream, outputs[0].sizes, inputs);
    if (plan.output_sizes() != inputs[0].sizes)
      reference::kernel_fail(spec_, "dY has sizes " + sizes_text(inputs[0].sizes) + ", the resize gives " +
                                        sizes_text(plan.output_sizes()));
    const int64_t n = outputs[0].numel();
    if (n == 0) return;
    reference::dispatch_float(dtype_, [&](auto zero) {
      using T = decltype(zero);
      resize_grad_kernel<T><<<grid_for(n), kBlock, 0, native_stream(stream)>>>(
          plan.geometry, device_taps(), device_reach(), inputs[0].as<const T>(), outputs[0].as<T>(), n);
      ONNXTRAIN_CUDA_CHECK_LAUNCH(resize_grad_kernel<T>);
    });
  }
};

}  // namespace

void register_cuda_resize_kernels(KernelRegistry& registry) {
  registry.add(movement_entry("Resize", reference::kFloatDTypes, &reference::make_kernel<ResizeKernel>));
  registry.add(movement_entry("Upsample", reference::kFloatDTypes, &reference::make_kernel<ResizeKernel>));
  registry.add(
      movement_entry("ResizeGrad", reference::kFloatDTypes, &reference::make_kernel<ResizeGradKernel>, "ai.onnxtrain"));
}

}  // namespace onnxtrain::cuda
