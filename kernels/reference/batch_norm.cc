// BatchNormalization over X (N,C,D1..Dn) (a 1-D X is (N) with one channel), or per element of (C,D1..)
// with spatial=0 (opset 7). Inference uses input_mean/input_var; training (training_mode=1 from opset 14,
// any output beyond Y before it) uses the batch mean and the population variance and outputs the running
// statistics input·momentum + batch·(1-momentum) (ONNX's rule: the running variance is updated with the
// population variance, not PyTorch's unbiased one). Before opset 14 the extra outputs are running mean,
// running var, saved mean and saved var, the last two the batch mean and the batch (population) variance.
// scale/B and mean/var may be float32 or float64 independently of X (opset 15). fused_activation "Relu"
// (training graphs, graph/autodiff/batch_norm_relu.h): Y = max(that, 0).
#include <cmath>

#include "graph/fused_activation.h"
#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename T>
void batch_norm(const BatchNormGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const T* x = inputs[0].as<const T>();
  T* y = outputs[0].as<T>();
  const std::vector<double> scale = to_doubles(inputs[1]);
  const std::vector<double> bias = to_doubles(inputs[2]);
  const std::vector<double> input_mean = to_doubles(inputs[3]);
  const std::vector<double> input_var = to_doubles(inputs[4]);
  std::vector<double> mean = input_mean, var = input_var;
  auto at = [&](int64_t n, int64_t f, int64_t i) { return (n * g.features + f) * g.inner + i; };
  if (g.training) {
    for (int64_t f = 0; f < g.features; ++f) {
      const BatchMoments m = batch_moments(x, g, f);
      mean[f] = m.mean;
      var[f] = m.var;
    }
  }
  for (int64_t f = 0; f < g.features; ++f) {
    const double inv_std = 1.0 / std::sqrt(var[f] + g.epsilon);
    for (int64_t n = 0; n < g.batch; ++n)
      for (int64_t i = 0; i < g.inner; ++i) {
        const int64_t e = at(n, f, i);
        const double v = scale[f] * (static_cast<double>(x[e]) - mean[f]) * inv_std + bias[f];
        y[e] = static_cast<T>(g.relu && v < 0 ? 0.0 : v);
      }
  }
  if (!g.training) return;
  std::vector<double> running_mean(mean.size()), running_var(var.size());
  for (size_t f = 0; f < mean.size(); ++f) {
    running_mean[f] = input_mean[f] * g.momentum + mean[f] * (1 - g.momentum);
    running_var[f] = input_var[f] * g.momentum + var[f] * (1 - g.momentum);
  }
  if (has_view(outputs, 1)) store_doubles(outputs[1], running_mean);
  if (has_view(outputs, 2)) store_doubles(outputs[2], running_var);
  if (has_view(outputs, 3)) store_doubles(outputs[3], mean);
  if (has_view(outputs, 4)) store_doubles(outputs[4], var);
}

std::unique_ptr<Kernel> make_batch_norm(const KernelSpec& spec) {
  const char* names[] = {"X", "scale", "B", "input_mean", "input_var"};
  require_float_inputs(spec, names);
  const DType dtype = spec.inputs[0].dtype;
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  if (x.empty()) kernel_fail(spec, "X must be (N,C,D1,...), got a scalar");
  const TensorDesc& y = require_output(spec, 0, "Y");
  if (y.sizes != x || y.dtype != dtype) kernel_fail(spec, "Y must have X's dtype and shape " + sizes_to_string(x));
  BatchNormGeometry g;
  g.batch = x[0];
  const bool per_channel = spec.opset >= 9 || spec.attributes.get_int("spatial", 1) != 0;
  g.features = per_channel ? (x.size() > 1 ? x[1] : 1) : product_of(x, 1);
  g.inner = per_channel ? product_of(x, 2) : 1;
  g.epsilon = spec.attributes.get_float("epsilon", 1e-5);
  g.momentum = spec.attributes.get_float("momentum", 0.9);
  g.relu = fuses_relu(spec.attributes);
  bool extra_outputs = false;
  for (size_t i = 1; i < spec.outputs.size(); ++i) extra_outputs = extra_outputs || has_output(spec, i);
  if (spec.opset >= 14) {
    g.training = spec.attributes.get_int("training_mode", 0) != 0;
    if (spec.outputs.size() > 3) kernel_fail(spec, "has at most 3 outputs from opset 14");
    if (!g.training && extra_outputs) {
      kernel_fail(spec, "running_mean and running_var are outputs only in training mode (training_mode=1)");
    }
  } else {
    g.training = extra_outputs;
  }
  for (size_t i = 1; i < 5; ++i) {
    if (spec.inputs[i].numel() != g.features) {
      kernel_fail(spec, std::string(names[i]) + " " + sizes_to_string(spec.inputs[i].sizes) + " must have " +
                            std::to_string(g.features) + " values for X " + sizes_to_string(x));
    }
  }
  for (size_t i = 1; i < spec.outputs.size(); ++i) {
    if (has_output(spec, i) && (spec.outputs[i].numel() != g.features || !is_float32_or_64(spec.outputs[i].dtype))) {
      kernel_fail(spec, "output " + std::to_string(i) + " must be float32 or float64 with " +
                            std::to_string(g.features) + " values");
    }
  }
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { batch_norm<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_batch_norm_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("BatchNormalization", kFloatDTypes, &make_batch_norm));
}

}  // namespace onnxtrain
