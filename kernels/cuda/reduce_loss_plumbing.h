// What the prepare-time .cc files of the reduce_loss family (reduce.cc, softmax.cc, loss.cc,
// layer_norm.cc, instance_norm.cc) share beyond kernel_entry.h: a float32/float64 kernel whose run()
// enters the stream's device and calls a launcher with the element type, and the normalisation grads'
// one kernel. Host C++ only (it pulls in the reference plumbing, which nvcc does not compile).
//
//   return cuda::make_float_launch_kernel(spec, dtype, [g](auto zero, Stream& stream, Views in, Views out) {
//     using T = decltype(zero);
//     cuda::launch_softmax<T>(false, g, in[0].as<const T>(), out[0].as<T>(), cuda::native_stream(stream));
//   });
//   registry.add(cuda::cuda_kernel_entry("", "Softmax", reference::kFloatDTypes, &make_cuda_softmax));
#pragma once

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/kernel_entry.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain::cuda {

// A kernel's inputs or outputs as run() gets them.
using Views = std::span<const TensorView>;

// A kernel for float32/float64 `dtype` (fails otherwise) whose run() holds a DeviceGuard on the stream's
// device and calls launch(T{}, stream, inputs, outputs) with T the element type.
template <typename Launch>
std::unique_ptr<Kernel> make_float_launch_kernel(const KernelSpec& spec, DType dtype, Launch launch) {
  return reference::make_float_kernel(spec, dtype, [&](auto zero) {
    return reference::make_closure_kernel([launch, zero](Stream& stream, Views in, Views out) {
      DeviceGuard guard(stream);
      launch(zero, stream, in, out);
    });
  });
}

struct NormParams;  // norm_launch.h

// LayerNormalizationGrad's and InstanceNormalizationGrad's kernel once checked: launch_norm_grad over `p`
// with each of dX, dScale, dBias written when present (layer_norm.cc).
std::unique_ptr<Kernel> make_norm_grad_kernel(const KernelSpec& spec, DType dtype, const NormParams& p);

}  // namespace onnxtrain::cuda
