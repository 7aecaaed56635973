// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss over scores (N,C) or (N,C,D1..Dk) with int32 or
// int64 labels (N) or (N,D1..Dk) and optional per-class weights (C). Per element:
//   loss = -w[label]·log_prob[label], log_prob = log_softmax(scores) over C (SoftmaxCrossEntropyLoss) or
//   the input itself (NegativeLogLikelihoodLoss); 0 where label == ignore_index.
// reduction none keeps the per-element losses, sum adds them, mean divides the sum by Σ w[label] over the
// elements not ignored (their count without weights): 0/0 = NaN when all are ignored, as in PyTorch.
// A label outside [0, C) that is not ignore_index is an Error at run time.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "kernels/reference/loss_common.h"
#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename T>
void loss(const LossGeometry& g, std::span<const TensorView> inputs, std::span<const TensorView> outputs) {
  const T* scores = inputs[0].as<const T>();
  const T* weights = has_view(inputs, 2) ? inputs[2].as<const T>() : nullptr;
  const int64_t elements = g.batch * g.inner;
  std::vector<double> log_prob(static_cast<size_t>(elements * g.classes));
  auto at = [&](int64_t n, int64_t c, int64_t d) { return (n * g.classes + c) * g.inner + d; };
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t d = 0; d < g.inner; ++d) {
      if (!g.softmax) {
        for (int64_t c = 0; c < g.classes; ++c) log_prob[at(n, c, d)] = static_cast<double>(scores[at(n, c, d)]);
        continue;
      }
      double max = -std::numeric_limits<double>::infinity();
      for (int64_t c = 0; c < g.classes; ++c) max = std::max(max, static_cast<double>(scores[at(n, c, d)]));
      double sum = 0;
      for (int64_t c = 0; c < g.classes; ++c) sum += std::exp(static_cast<double>(scores[at(n, c, d)]) - max);
      const double log_sum = std::log(sum) + max;
      for (int64_t c = 0; c < g.classes; ++c)
        log_prob[at(n, c, d)] = static_cast<double>(scores[at(n, c, d)]) - log_sum;
    }
  }
  std::vector<double> losses(static_cast<size_t>(elements));
  double total = 0, total_weight = 0;
  for (int64_t e = 0; e < elements; ++e) {
    const int64_t label = label_at(inputs[1], e);
    if (g.ignore_index && label == *g.ignore_index) continue;
    require_label_in_range(g, g.softmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss", label, e);
    const double w = weights ? static_cast<double>(weights[label]) : 1.0;
    losses[e] = -w * log_prob[at(e / g.inner, label, e % g.inner)];
    total += losses[e];
    total_weight += w;
  }
  T* out = outputs[0].as<T>();
  switch (g.reduction) {
    case Reduction::None:
      for (int64_t e = 0; e < elements; ++e) out[e] = static_cast<T>(losses[e]);
      break;
    case Reduction::Sum:
      out[0] = static_cast<T>(total);
      break;
    case Reduction::Mean:
      out[0] = static_cast<T>(total / total_weight);
      break;
  }
  if (g.softmax && has_view(outputs, 1)) {
    T* lp = outputs[1].as<T>();
    for (size_t i = 0; i < log_prob.size(); ++i) lp[i] = static_cast<T>(log_prob[i]);
  }
}

std::unique_ptr<Kernel> make_loss(const KernelSpec& spec) {
  const auto checked = check_loss(spec);
  const LossGeometry& g = checked.geometry;
  return make_float_kernel(spec, checked.dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { loss<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_loss_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("SoftmaxCrossEntropyLoss", kFloatDTypes, &make_loss));
  registry.add(reference_entry("NegativeLogLikelihoodLoss", kFloatDTypes, &make_loss));
}

}  // namespace onnxtrain
