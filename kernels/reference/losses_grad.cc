// Reference kernels of the losses' backward ops (ai.onnxtrain), scores/input as (N, C, D1·…·Dk):
//   SoftmaxCrossEntropyLossGrad: dscores[e,c] = k_e w_l (exp(log_prob[e,c]) - [c == l]);
//   NegativeLogLikelihoodLossGrad: dinput[e,c] = -k_e w_l [c == l];
// with l the label of element e, k_e = dloss[e] (none), dloss (sum) or dloss / Σ w over the elements not
// ignored (mean), and 0 for elements labelled ignore_index. When every element is ignored the gradient
// is 0, as in PyTorch (the forward mean is NaN there).
#include <cmath>
#include <optional>

#include "kernels/reference/loss_common.h"
#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

// softmax (SoftmaxCrossEntropyLossGrad): log_prob is given and the softmax term added.
struct LossGradGeometry : LossGeometry {
  size_t labels = 0, weights = 0;  // input slots
};

template <typename T>
void loss_grad(const LossGradGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const T* dloss = inputs[0].as<const T>();
  const T* log_prob = g.softmax ? inputs[1].as<const T>() : nullptr;
  const T* weights = has_view(inputs, g.weights) ? inputs[g.weights].as<const T>() : nullptr;
  const TensorView& labels = inputs[g.labels];
  const int64_t elements = g.batch * g.inner;
  auto at = [&](int64_t e, int64_t c) { return ((e / g.inner) * g.classes + c) * g.inner + e % g.inner; };
  auto ignored = [&](int64_t label) { return g.ignore_index && label == *g.ignore_index; };
  double total_weight = 0;
  for (int64_t e = 0; e < elements; ++e) {
    const int64_t label = label_at(labels, e);
    if (ignored(label)) continue;
    require_label_in_range(g, g.softmax ? "SoftmaxCrossEntropyLossGrad" : "NegativeLogLikelihoodLossGrad", label, e);
    total_weight += weights ? static_cast<double>(weights[label]) : 1.0;
  }
  T* out = outputs[0].as<T>();
  std::fill(out, out + elements * g.classes, T(0));
  for (int64_t e = 0; e < elements; ++e) {
    const int64_t label = label_at(labels, e);
    if (ignored(label)) continue;
    double k = static_cast<double>(g.reduction == Reduction::None ? dloss[e] : dloss[0]);
    if (g.reduction == Reduction::Mean) k /= total_weight;
    const double scale = k * (weights ? static_cast<double>(weights[label]) : 1.0);
    if (g.softmax) {
      for (int64_t c = 0; c < g.classes; ++c)
        out[at(e, c)] = static_cast<T>(scale * std::exp(static_cast<double>(log_prob[at(e, c)])));
    }
    out[at(e, label)] = static_cast<T>(static_cast<double>(out[at(e, label)]) - scale);
  }
}

std::unique_ptr<Kernel> make_loss_grad(const KernelSpec& spec) {
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
  LossGradGeometry g;
  static_cast<LossGeometry&>(g) = read_loss_geometry(spec, scores, require_input(spec, labels, "labels"), weights);
  g.softmax = softmax;
  g.labels = labels;
  g.weights = weights;
  const std::vector<int64_t> dloss = g.reduction == Reduction::None ? g.per_element : std::vector<int64_t>{};
  if (spec.inputs[0].sizes != dloss) {
    kernel_fail(spec, "dLoss is " + sizes_to_string(spec.inputs[0].sizes) + ", expected " + sizes_to_string(dloss) +
                          " for reduction '" + g.reduction_name + "'");
  }
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { loss_grad<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_loss_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("SoftmaxCrossEntropyLossGrad", kFloatDTypes, &make_loss_grad));
  registry.add(reference_training_entry("NegativeLogLikelihoodLossGrad", kFloatDTypes, &make_loss_grad));
}

}  // namespace onnxtrain
