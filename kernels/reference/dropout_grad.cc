// DropoutGrad (ai.onnxtrain): dX = dY * mask / (1 - ratio) (ratio default 0.5), or dX = dY when the
// optional training_mode input is false. The mask is bool, or dY's type (Dropout before opset 10).
#include <algorithm>

#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename T>
void dropout_grad(std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const T* dy = inputs[0].as<const T>();
  T* dx = outputs[0].as<T>();
  const int64_t count = inputs[0].numel();
  const bool training = !has_view(inputs, 3) || *inputs[3].as<const uint8_t>() != 0;
  if (!training) {
    std::copy(dy, dy + count, dx);
    return;
  }
  const double ratio = has_view(inputs, 2) ? to_doubles(inputs[2]).at(0) : 0.5;
  if (!(ratio >= 0 && ratio < 1))
    throw Error("DropoutGrad kernel: ratio must be in [0, 1), got " + std::to_string(ratio));
  const double scale = 1.0 / (1.0 - ratio);
  const bool bool_mask = inputs[1].dtype == DType::Bool;
  for (int64_t i = 0; i < count; ++i) {
    const bool keep = bool_mask ? inputs[1].as<const uint8_t>()[i] != 0 : inputs[1].as<const T>()[i] != T(0);
    dx[i] = keep ? static_cast<T>(static_cast<double>(dy[i]) * scale) : T(0);
  }
}

std::unique_ptr<Kernel> make_dropout_grad(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0});
  const TensorDesc& mask = require_input(spec, 1, "mask");
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
  require_output(spec, 0, dtype, sizes);
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [](std::span<const TensorView> in, std::span<const TensorView> out) { dropout_grad<T>(in, out); });
  });
}

}  // namespace

void register_reference_dropout_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("DropoutGrad", kFloatDTypes, &make_dropout_grad));
}

}  // namespace onnxtrain
