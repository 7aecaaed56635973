// ai.onnxtrain::BatchNormalizationGrad(dY, X, scale, mean, var) → dX, dScale, dBias, each optional. X is
// viewed as (N, F, inner) with F = scale's element count. training_mode=1 recomputes the batch mean and
// population variance from X and differentiates through them; otherwise mean/var are constants.
// scale/mean/var may be float32 or float64 independently of X (opset 15); dScale/dBias take scale's dtype.
// fused_activation "Relu" (graph/autodiff/batch_norm_relu.h): input 5 is Y = Relu(BN(X)), and dY counts
// only where Y > 0.
#include <cmath>

#include "graph/fused_activation.h"
#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename T>
void batch_norm_grad(const BatchNormGeometry& g, std::span<const TensorView> inputs,
                     std::span<const TensorView> outputs) {
  const T* dy_in = inputs[0].as<const T>();
  const T* relu_out = g.relu ? inputs[5].as<const T>() : nullptr;
  const T* x = inputs[1].as<const T>();
  const std::vector<double> scale = to_doubles(inputs[2]);
  std::vector<double> mean = to_doubles(inputs[3]), var = to_doubles(inputs[4]);
  T* dx = has_view(outputs, 0) ? outputs[0].as<T>() : nullptr;
  std::vector<double> dscale(static_cast<size_t>(g.features)), dbias(static_cast<size_t>(g.features));
  const double count = static_cast<double>(g.batch * g.inner);
  auto at = [&](int64_t n, int64_t f, int64_t i) { return (n * g.features + f) * g.inner + i; };
  // dY of the BatchNorm: the fused Relu's gradient passes where its output is positive.
  auto dy = [&](int64_t e) { return relu_out && !(relu_out[e] > T(0)) ? 0.0 : static_cast<double>(dy_in[e]); };
  for (int64_t f = 0; f < g.features; ++f) {
    if (g.training) {
      const BatchMoments m = batch_moments(x, g, f);
      mean[f] = m.mean;
      var[f] = m.var;
    }
    const double inv_std = 1.0 / std::sqrt(var[f] + g.epsilon);
    double sum_dy = 0, sum_dy_xhat = 0;
    for (int64_t n = 0; n < g.batch; ++n)
      for (int64_t i = 0; i < g.inner; ++i) {
        const int64_t e = at(n, f, i);
        sum_dy += dy(e);
        sum_dy_xhat += dy(e) * (static_cast<double>(x[e]) - mean[f]) * inv_std;
      }
    dbias[f] = sum_dy;
    dscale[f] = sum_dy_xhat;
    if (!dx) continue;
    for (int64_t n = 0; n < g.batch; ++n)
      for (int64_t i = 0; i < g.inner; ++i) {
        const int64_t e = at(n, f, i);
        double v = dy(e);
        if (g.training) {
          const double xhat = (static_cast<double>(x[e]) - mean[f]) * inv_std;
          v -= (sum_dy + xhat * sum_dy_xhat) / count;
        }
        dx[e] = static_cast<T>(scale[f] * inv_std * v);
      }
  }
  if (has_view(outputs, 1)) store_doubles(outputs[1], dscale);
  if (has_view(outputs, 2)) store_doubles(outputs[2], dbias);
}

std::unique_ptr<Kernel> make_batch_norm_grad(const KernelSpec& spec) {
  const char* names[] = {"dY", "X", "scale", "mean", "var"};
  require_float_inputs(spec, names);
  require_same_dtype(spec, 0, 1);
  const DType dtype = spec.inputs[1].dtype;
  const std::vector<int64_t>& x = spec.inputs[1].sizes;
  if (x.empty()) kernel_fail(spec, "X must be (N,C,D1,...), got a scalar");
  if (spec.inputs[0].sizes != x) kernel_fail(spec, "dY must have X's shape " + sizes_to_string(x));
  BatchNormGeometry g;
  g.batch = x[0];
  g.features = spec.inputs[2].numel();
  // Per channel, or (opset 7, spatial=0) one value per element of X's non-batch dims.
  const int64_t channels = x.size() > 1 ? x[1] : 1;
  if (g.features != channels && g.features != product_of(x, 1)) {
    kernel_fail(spec, "scale " + sizes_to_string(spec.inputs[2].sizes) + " must have one value per channel of X " +
                          sizes_to_string(x));
  }
  g.inner = g.features == channels ? product_of(x, 2) : 1;
  for (size_t i = 3; i < 5; ++i) {
    if (spec.inputs[i].numel() != g.features) {
      kernel_fail(spec, std::string(names[i]) + " " + sizes_to_string(spec.inputs[i].sizes) + " must have " +
                            std::to_string(g.features) + " values like scale");
    }
  }
  g.epsilon = spec.attributes.get_float("epsilon", 1e-5);
  g.training = spec.attributes.get_int("training_mode", 0) != 0;
  g.relu = fuses_relu(spec.attributes);
  if (g.relu && (spec.inputs.size() < 6 || spec.inputs[5].sizes != x || spec.inputs[5].dtype != dtype))
    kernel_fail(spec, "a fused Relu needs its output Y " + sizes_to_string(x) + " as input 5, like X");
  if (has_output(spec, 0)) require_output(spec, 0, dtype, x);
  for (size_t i = 1; i < 3; ++i) {
    if (has_output(spec, i)) require_output(spec, i, spec.inputs[2].dtype, spec.inputs[2].sizes);
  }
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { batch_norm_grad<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_batch_norm_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("BatchNormalizationGrad", kFloatDTypes, &make_batch_norm_grad));
}

}  // namespace onnxtrain
