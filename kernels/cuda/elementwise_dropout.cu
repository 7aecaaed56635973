// CUDA kernels of Dropout and ai.onnxtrain DropoutGrad (float32/float64), with the reference semantics
// of kernels/reference/dropout.cc and dropout_grad.cc: Y = X·mask/(1-ratio) in training mode (opset 12+
// with a training_mode input that is true), Y = X and a mask of all true otherwise. The mask equals the
// reference mask bit for bit: each device thread computes the Philox4x32-10 block of its pair of elements
// (kernels/philox.h, the functions the reference kernel calls), so nothing is drawn on the host or
// uploaded. ratio and training_mode are read on the device, so a run never waits for the GPU; an
// out-of-range ratio in training mode, which the reference rejects with an Error, writes NaN to Y / dX
// instead (the value cannot reach the host without a synchronisation).
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/elementwise_launch.cuh"
#include "kernels/philox.h"

namespace onnxtrain {
namespace cuda {
namespace {

using reference::has_input;
using reference::kernel_fail;

bool is_float32_or_64(DType dtype) { return dtype == DType::Float32 || dtype == DType::Float64; }

// The optional scalar inputs, as device pointers (null when absent).
struct DropoutScalars {
  const void* ratio = nullptr;  // float or double
  bool ratio_is_double = false;
  const uint8_t* training = nullptr;  // bool byte
  double default_ratio = 0.5;
  __device__ double read_ratio() const {
    if (ratio == nullptr) return default_ratio;
    return ratio_is_double ? *static_cast<const double*>(ratio)
                           : static_cast<double>(*static_cast<const float*>(ratio));
  }
};

// Y and the mask (M: uint8_t for bool, or T before opset 10; null when not requested). Element i draws at
// counter offset + i (Stream::draw_offset). One thread per pair of counters 2q, 2q + 1 (grid-stride over
// the pairs that hold elements 0..n-1): the pair's draws are one Philox block. may_train is false when the
// op cannot be in training mode (then Y = X, mask all true).
template <typename T, typename M>
__global__ void dropout_kernel(const T* x, T* y, M* mask, bool may_train, uint64_t stream_seed, uint64_t offset,
                               int64_t n, DropoutScalars s) {
  const bool training = may_train && s.training != nullptr && *s.training != 0;
  const double ratio = s.read_ratio();
  const bool invalid = training && !(ratio >= 0 && ratio < 1);
  const bool draw = training && !(ratio <= 0);  // ratio 0 keeps everything: no draws needed
  const double scale = training ? 1.0 / (1.0 - ratio) : 1.0;
  const uint64_t first_pair = offset / 2;
  const auto pairs = static_cast<int64_t>((offset + static_cast<uint64_t>(n) + 1) / 2 - first_pair);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; p < pairs; p += step) {
    const uint64_t q = first_pair + static_cast<uint64_t>(p);
    DropoutDrawPair d{0, 0};
    if (draw) d = dropout_draw_pair(stream_seed, q);
    for (int half = 0; half < 2; ++half) {
      const uint64_t counter = 2 * q + static_cast<uint64_t>(half);
      if (counter < offset) continue;  // an odd offset: the first pair's even counter precedes element 0
      const auto i = static_cast<int64_t>(counter - offset);
      if (i >= n) break;
      const bool keep = !draw || dropout_keeps(half == 0 ? d.even : d.odd, ratio);
      if (invalid) {
        y[i] = static_cast<T>(NAN);
      } else {
        y[i] = keep ? static_cast<T>(static_cast<double>(x[i]) * scale) : T(0);
      }
      if (mask != nullptr) mask[i] = keep ? M(1) : M(0);
    }
  }
}

template <typename T>
void launch_dropout(cudaStream_t stream, const TensorView& x, const TensorView& y, const TensorView* mask,
                    bool may_train, uint64_t stream_seed, uint64_t offset, const DropoutScalars& s) {
  const int64_t n = x.numel();
  if (n == 0) return;
  const unsigned int grid = grid_for(n / 2 + 1, kElementwiseBlock);
  if (mask == nullptr) {
    dropout_kernel<T, uint8_t><<<grid, kElementwiseBlock, 0, stream>>>(x.as<const T>(), y.as<T>(), nullptr, may_train,
                                                                       stream_seed, offset, n, s);
  } else if (mask->dtype == DType::Bool) {
    dropout_kernel<T, uint8_t><<<grid, kElementwiseBlock, 0, stream>>>(x.as<const T>(), y.as<T>(), mask->as<uint8_t>(),
                                                                       may_train, stream_seed, offset, n, s);
  } else {
    dropout_kernel<T, T><<<grid, kElementwiseBlock, 0, stream>>>(x.as<const T>(), y.as<T>(), mask->as<T>(), may_train,
                                                                 stream_seed, offset, n, s);
  }
  ONNXTRAIN_CUDA_CHECK_LAUNCH("dropout_kernel");
}

std::unique_ptr<Kernel> make_dropout(const KernelSpec& spec) {
  const DType dtype = require_cuda_dtype(spec, 0, kCudaFloatDTypes);
  const TensorDesc& x = spec.inputs[0];
  if (reference::require_output(spec, 0, "output").sizes != x.sizes || spec.outputs[0].dtype != dtype) {
    kernel_fail(spec, "output must have the input's shape and dtype");
  }
  const bool ratio_is_input = spec.opset >= 12;
  double attribute_ratio = 0.5;
  if (!ratio_is_input) {
    if (has_input(spec, 1) || has_input(spec, 2))
      kernel_fail(spec, "ratio is an attribute before opset 12, not an input");
    attribute_ratio = spec.attributes.get_float("ratio", 0.5);
  } else {
    if (has_input(spec, 1) && (!is_float32_or_64(spec.inputs[1].dtype) || spec.inputs[1].numel() != 1)) {
      kernel_fail(spec, "ratio must be a float32 or float64 scalar in the CUDA kernel");
    }
    if (has_input(spec, 2) && (spec.inputs[2].dtype != DType::Bool || spec.inputs[2].numel() != 1)) {
      kernel_fail(spec, "training_mode must be a bool scalar");
    }
  }
  const bool mask_requested = reference::has_output(spec, 1);
  if (mask_requested) {
    const TensorDesc& mask = spec.outputs[1];
    if (mask.sizes != x.sizes || (mask.dtype != DType::Bool && mask.dtype != dtype)) {
      kernel_fail(spec, "mask must have the input's shape and be bool (or the input's type before opset 10)");
    }
  }
  // Only a training_mode input can turn training on (the reference's rule); without one, no draws.
  const bool may_train = ratio_is_input && has_input(spec, 2);
  const bool ratio_is_double = has_input(spec, 1) && spec.inputs[1].dtype == DType::Float64;
  const auto seed = static_cast<uint64_t>(spec.attributes.get_int("seed", 0));
  return make_cuda_kernel([=](Stream& stream, auto inputs, auto outputs) {
    const cudaStream_t native = native_stream(stream);
    DropoutScalars s;
    s.default_ratio = attribute_ratio;
    s.ratio_is_double = ratio_is_double;
    if (ratio_is_input && inputs.size() > 1 && inputs[1].data != nullptr) s.ratio = inputs[1].data;
    if (inputs.size() > 2 && inputs[2].data != nullptr) s.training = inputs[2].template as<const uint8_t>();
    const uint64_t stream_seed = random_stream_seed(seed, stream.run_index());
    const TensorView* mask = mask_requested && outputs.size() > 1 && outputs[1].data != nullptr ? &outputs[1] : nullptr;
    dispatch_cuda<false>(dtype, [&](auto zero) {
      launch_dropout<decltype(zero)>(native, inputs[0], outputs[0], mask, may_train, stream_seed,
                                     stream.draw_offset(inputs[0].numel()), s);
    });
  });
}

// dX = dY·mask/(1-ratio) in training mode (the default without a training_mode input), dY otherwise.
template <typename T, typename M>
__global__ void dropout_grad_kernel(const T* dy, const M* mask, T* dx, int64_t n, DropoutScalars s) {
  const bool training = s.training == nullptr || *s.training != 0;
  const double ratio = s.read_ratio();
  const bool invalid = training && !(ratio >= 0 && ratio < 1);
  const double scale = 1.0 / (1.0 - ratio);
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    if (!training) {
      dx[i] = dy[i];
    } else if (invalid) {
      dx[i] = static_cast<T>(NAN);
    } else {
      dx[i] = mask[i] != M(0) ? static_cast<T>(static_cast<double>(dy[i]) * scale) : T(0);
    }
  }
}

std::unique_ptr<Kernel> make_dropout_grad(const KernelSpec& spec) {
  const DType dtype = require_cuda_dtype(spec, 0, kCudaFloatDTypes);
  const TensorDesc& mask = reference::require_input(spec, 1, "mask");
  const std::vector<int64_t>& sizes = spec.inputs[0].sizes;
  if (mask.sizes != sizes || (mask.dtype != DType::Bool && mask.dtype != dtype)) {
    kernel_fail(spec, "mask must have dY's shape and be bool or dY's type");
  }
  if (has_input(spec, 2) && (!is_float32_or_64(spec.inputs[2].dtype) || spec.inputs[2].numel() != 1)) {
    kernel_fail(spec, "ratio must be a float32 or float64 scalar");
  }
  if (has_input(spec, 3) && (spec.inputs[3].dtype != DType::Bool || spec.inputs[3].numel() != 1)) {
    kernel_fail(spec, "training_mode must be a bool scalar");
  }
  reference::require_output(spec, 0, dtype, sizes);
  const bool bool_mask = mask.dtype == DType::Bool;
  const bool ratio_is_double = has_input(spec, 2) && spec.inputs[2].dtype == DType::Float64;
  return make_cuda_kernel([=](cudaStream_t stream, auto inputs, auto outputs) {
    DropoutScalars s;
    s.ratio_is_double = ratio_is_double;
    if (inputs.size() > 2 && inputs[2].data != nullptr) s.ratio = inputs[2].data;
    if (inputs.size() > 3 && inputs[3].data != nullptr) s.training = inputs[3].template as<const uint8_t>();
    const int64_t n = outputs[0].numel();
    if (n == 0) return;
    const unsigned int grid = grid_for(n, kElementwiseBlock);
    dispatch_cuda<false>(dtype, [&](auto zero) {
      using T = decltype(zero);
      if (bool_mask) {
        dropout_grad_kernel<<<grid, kElementwiseBlock, 0, stream>>>(inputs[0].template as<const T>(),
                                                                    inputs[1].template as<const uint8_t>(),
                                                                    outputs[0].template as<T>(), n, s);
      } else {
        dropout_grad_kernel<<<grid, kElementwiseBlock, 0, stream>>>(
            inputs[0].template as<const T>(), inputs[1].template as<const T>(), outputs[0].template as<T>(), n, s);
      }
      ONNXTRAIN_CUDA_CHECK_LAUNCH("dropout_grad_kernel");
    });
  });
}

}  // namespace
}  // namespace cuda

void register_cuda_dropout_kernels(KernelRegistry& registry) {
  registry.add(cuda::cuda_entry("Dropout", cuda::kCudaFloatDTypes, &cuda::make_dropout));
  registry.add(cuda::cuda_entry("DropoutGrad", cuda::kCudaFloatDTypes, &cuda::make_dropout_grad, "ai.onnxtrain"));
}

}  // namespace onnxtrain
