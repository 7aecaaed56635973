// "cuda" kernels of SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss and of ai.onnxtrain's
// SoftmaxCrossEntropyLossGrad and NegativeLogLikelihoodLossGrad, float32 and float64 with int32/int64
// labels, checked at prepare as the reference checks them (kernels/reference/losses.cc, losses_grad.cc,
// loss_common.h): reduction none/sum/mean (mean divides by Σ w over the elements not ignored),
// ignore_index, optional per-class weights, the optional log_prob output. Work in loss.cu; a label that
// is not a class gives NaN there, and the kernel's next run throws the Error the reference throws at once
// (see loss_launch.h).
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_error_flag.h"
#include "kernels/cuda/loss_launch.h"
#include "kernels/cuda/reduce_loss_plumbing.h"
#include "kernels/reference/loss_common.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain {
namespace {

using namespace reference;

cuda::LossParams loss_params(const LossGeometry& g, DType labels) {
  cuda::LossParams p;
  p.batch = g.batch;
  p.classes = g.classes;
  p.inner = g.inner;
  p.softmax = g.softmax;
  p.reduction = g.reduction == Reduction::None  ? cuda::LossReduction::None
                : g.reduction == Reduction::Sum ? cuda::LossReduction::Sum
                                                : cuda::LossReduction::Mean;
  p.has_ignore_index = g.ignore_index.has_value();
  p.ignore_index = g.ignore_index.value_or(0);
  p.labels_int64 = labels == DType::Int64;
  return p;
}

const void* optional_data(std::span<const TensorView> views, size_t i) {
  return has_view(views, i) ? views[i].data : nullptr;
}

const char* bad_label_text(int) { return "a label outside [0, classes) that is not ignore_index (its loss was NaN)"; }

// The kernel's flag for bad labels (made after the checks: prepare-time refusals need no GPU), wired into p.
std::shared_ptr<cuda::DeviceErrorFlag> bad_label_flag(cuda::LossParams& p) {
  auto flag = std::make_shared<cuda::DeviceErrorFlag>();
  p.bad_label = flag->device_ptr();
  return flag;
}

std::unique_ptr<Kernel> make_cuda_loss(const KernelSpec& spec) {
  const auto checked = check_loss(spec);
  cuda::LossParams p = loss_params(checked.geometry, spec.inputs[1].dtype);
  auto flag = bad_label_flag(p);
  return cuda::make_float_launch_kernel(
      spec, checked.dtype, [p, flag, spec](auto zero, Stream& stream, cuda::Views in, cuda::Views out) {
        using T = decltype(zero);
        flag->throw_if_raised(spec, bad_label_text);
        auto* scratch = static_cast<double*>(cuda::workspace(stream, cuda::loss_scratch_bytes(p)));
        cuda::launch_loss<T>(p, in[0].as<const T>(), in[1].data, static_cast<const T*>(optional_data(in, 2)),
                             out[0].as<T>(), static_cast<T*>(const_cast<void*>(optional_data(out, 1))), scratch,
                             cuda::native_stream(stream));
      });
}

std::unique_ptr<Kernel> make_cuda_loss_grad(const KernelSpec& spec) {
  const auto checked = check_loss_grad(spec);
  const size_t labels = checked.geometry.labels, weights = checked.geometry.weights;
  cuda::LossParams p = loss_params(checked.geometry, spec.inputs[labels].dtype);
  auto flag = bad_label_flag(p);
  return cuda::make_float_launch_kernel(
      spec, checked.dtype,
      [p, flag, spec, labels, weights](auto zero, Stream& stream, cuda::Views in, cuda::Views out) {
        using T = decltype(zero);
        flag->throw_if_raised(spec, bad_label_text);
        auto* scratch = static_cast<double*>(cuda::workspace(stream, cuda::loss_scratch_bytes(p)));
        cuda::launch_loss_grad<T>(p, in[0].as<const T>(), p.softmax ? in[1].as<const T>() : nullptr, in[labels].data,
                                  static_cast<const T*>(optional_data(in, weights)), out[0].as<T>(), scratch,
                                  cuda::native_stream(stream));
      });
}

}  // namespace

void register_cuda_loss_kernels(KernelRegistry& registry) {
  registry.add(cuda::cuda_kernel_entry("", "SoftmaxCrossEntropyLoss", kFloatDTypes, &make_cuda_loss));
  registry.add(cuda::cuda_kernel_entry("", "NegativeLogLikelihoodLoss", kFloatDTypes, &make_cuda_loss));
  registry.add(
      cuda::cuda_kernel_entry("ai.onnxtrain", "SoftmaxCrossEntropyLossGrad", kFloatDTypes, &make_cuda_loss_grad));
  registry.add(
      cuda::cuda_kernel_entry("ai.onnxtrain", "NegativeLogLikelihoodLossGrad", kFloatDTypes, &make_cuda_loss_grad));
}

}  // namespace onnxtrain
