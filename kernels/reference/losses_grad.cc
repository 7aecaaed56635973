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
  const auto checked = check_loss_grad(spec);
  const LossGradGeometry& g = checked.geometry;
  return make_float_kernel(spec, checked.dtype, [&](auto zero) {
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
