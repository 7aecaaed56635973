// "cuda" kernels of SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss and of ai.onnxtrain's
// SoftmaxCrossEntropyLossGrad and NegativeLogLikelihoodLossGrad, float32 and float64 with int32/int64
// labels, checked at prepare as the reference checks them (kernels/reference/losses.cc, losses_grad.cc,
// loss_common.h): reduction none/sum/mean (mean divides by Σ w over the elements not ignored),
// ignore_index, optional per-class weights, the optional log_prob output. Work in loss.cu; a label that
// is not a class gives NaN there rather than an Error (see loss_launch.h).
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/loss_launch.h"
#include "kernels/reference/loss_common.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain {
namespace {

using namespace reference;

cuda::LossParams loss_params(const LossGeometry& g, bool softmax, DType labels) {
  cuda::LossParams p;
  p.batch = g.batch;
  p.classes = g.classes;
  p.inner = g.inner;
  p.softmax = softmax;
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

std::unique_ptr<Kernel> make_cuda_loss(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0, 2});
  const bool softmax = spec.op_type == "SoftmaxCrossEntropyLoss";
  const std::vector<int64_t>& scores = spec.inputs[0].sizes;
  const TensorDesc& labels = require_input(spec, 1, softmax ? "labels" : "target");
  const LossGeometry g = read_loss_geometry(spec, scores, labels, 2);
  const TensorDesc& out = require_output(spec, 0, "loss");
  const std::vector<int64_t> expected = g.reduction == Reduction::None ? g.per_element : std::vector<int64_t>{};
  if (out.sizes != expected || out.dtype != dtype) {
    kernel_fail(spec, "loss must be " + std::string(dtype_name(dtype)) + " " + sizes_to_string(expected) +
                          " for reduction '" + g.reduction_name + "', got " + sizes_to_string(out.sizes));
  }
  if (has_output(spec, 1) && (!softmax || spec.outputs[1].sizes != scores || spec.outputs[1].dtype != dtype)) {
    kernel_fail(spec, "log_prob must have the scores' dtype and shape " + sizes_to_string(scores));
  }
  const cuda::LossParams p = loss_params(g, softmax, labels.dtype);
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel([p](Stream& stream, std::span<const TensorView> in, std::span<const TensorView> out) {
      cuda::DeviceGuard guard(stream);
      auto* scratch = static_cast<double*>(cuda::workspace(stream, cuda::loss_scratch_bytes(p)));
      cuda::launch_loss<T>(p, in[0].as<const T>(), in[1].data, static_cast<const T*>(optional_data(in, 2)),
                           out[0].as<T>(), static_cast<T*>(const_cast<void*>(optional_data(out, 1))), scratch,
                           cuda::native_stream(stream));
    });
  });
}

std::unique_ptr<Kernel> make_cuda_loss_grad(const KernelSpec& spec) {
  const bool softmax = spec.op_type == "SoftmaxCrossEntropyLossGrad";
  const size_t labels = softmax ? 2 : 1, weights = 3;
  const DType dtype = require_same_float_dtype(spec, {0, weights});
  const TensorDesc& out = require_output(spec, 0, "dscores");
  const std::vector<int64_t>& scores = out.sizes;
  if (softmax) {
    require_same_dtype(spec, 1, 0);
    if (require_input(spec, 1, "log_prob").sizes != scores) kernel_fail(spec, "dscores must be shaped like log_prob");
  }
  if (out.dtype != dtype) kernel_fail(spec, "the output must be " + std::string(dtype_name(dtype)));
  const TensorDesc& label_desc = require_input(spec, labels, "labels");
  const LossGeometry g = read_loss_geometry(spec, scores, label_desc, weights);
  const std::vector<int64_t> dloss = g.reduction == Reduction::None ? g.per_element : std::vector<int64_t>{};
  if (spec.inputs[0].sizes != dloss) {
    kernel_fail(spec, "dLoss is " + sizes_to_string(spec.inputs[0].sizes) + ", expected " + sizes_to_string(dloss) +
                          " for reduction '" + g.reduction_name + "'");
  }
  const cuda::LossParams p = loss_params(g, softmax, label_desc.dtype);
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [p, labels, weights](Stream& stream, std::span<const TensorView> in, std::span<const TensorView> out) {
          cuda::DeviceGuard guard(stream);
          auto* scratch = static_cast<double*>(cuda::workspace(stream, cuda::loss_scratch_bytes(p)));
          cuda::launch_loss_grad<T>(p, in[0].as<const T>(), p.softmax ? in[1].as<const T>() : nullptr, in[labels].data,
                                    static_cast<const T*>(optional_data(in, weights)), out[0].as<T>(), scratch,
                                    cuda::native_stream(stream));
        });
  });
}

KernelEntry cuda_entry(std::string domain, std::string op_type, KernelFactory factory) {
  return {.domain = std::move(domain),
          .op_type = std::move(op_type),
          .device = DeviceKind::Cuda,
          .dtypes = kFloatDTypes,
          .implementation = "cuda",
          .factory = factory};
}

}  // namespace

void register_cuda_loss_kernels(KernelRegistry& registry) {
  registry.add(cuda_entry("", "SoftmaxCrossEntropyLoss", &make_cuda_loss));
  registry.add(cuda_entry("", "NegativeLogLikelihoodLoss", &make_cuda_loss));
  registry.add(cuda_entry("ai.onnxtrain", "SoftmaxCrossEntropyLossGrad", &make_cuda_loss_grad));
  registry.add(cuda_entry("ai.onnxtrain", "NegativeLogLikelihoodLossGrad", &make_cuda_loss_grad));
}

}  // namespace onnxtrain
