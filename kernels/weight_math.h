// Per-element work of a pipeline stage's weight policy (executor/pipeline/weight_policy.h) on its flat
// float arrays, written once for the host loops and the CUDA kernels (kernels/cuda/optimizer_update.cu),
// so a stage on a GPU accumulates and scales exactly as a stage on the CPU does.
//
//   AccumulateGradient f{.weight = w, .first = true};   for (i) f(acc[i], g[i]);   // acc = w·g
//   ScaleValue s{.scale = 1.0f / m};                     for (i) s(acc[i]);         // gpipe's flush
//   PredictAhead<SgdMomentumUpdate> p{...};              for (i) p(out[i], w[i], buf[i], buf[i]);   // SpecTrain
#pragma once

#include <cmath>

#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE

namespace onnxtrain::optimizer_math {

// gpipe: a micro-batch's gradient weighted by its share of the mini-batch, into the sum (the first
// micro-batch's starts it; a weight of 1 changes no bit: 1·g == g).
struct AccumulateGradient {
  float weight;
  bool first;
  ONNXTRAIN_HOST_DEVICE void operator()(float& acc, const float& g) const {
    acc = first ? weight * g : acc + weight * g;
  }
};

struct ScaleValue {
  float scale;
  ONNXTRAIN_HOST_DEVICE void operator()(float& v) const { v *= scale; }
};

// SpecTrain's prediction of one weight s updates ahead (executor/weight_prediction.h): the optimizer's own
// update rule, applied `steps` times to scratch copies of the weight and its state with the gradient
// estimate ĝ = estimate·estimate_scale, rule k holding the scalars of the k-th coming update (its scheduled
// lr, its bias corrections). For a constant gradient this is the weight the optimizer will reach.
inline constexpr int kMaxPredictedSteps = 32;

template <typename Rule>
struct PredictAhead {
  Rule rules[kMaxPredictedSteps];
  int steps = 0;
  float estimate_scale = 0;

  // `states`: the rule's state arrays' elements (none for plain SGD), read, never written.
  template <typename... States>
  ONNXTRAIN_HOST_DEVICE void operator()(float& out, const float& w, const float& estimate,
                                        const States&... states) const {
    float x = w;
    apply(x, estimate * estimate_scale, states...);
    out = x;
  }

 private:
  template <typename... Scratch>
  ONNXTRAIN_HOST_DEVICE void apply(float& x, float g, Scratch... scratch) const {
    for (int k = 0; k < steps; ++k) rules[k](x, g, scratch...);
  }
};

// The predictor's own smoothed gradient, for optimizers whose state does not hold one:
// avg = avg·β + (1 − β)·g from avg = 0 (the first gradient sets it: the same bits, without zeroing the
// array first); the bias correction is in PredictAhead::estimate_scale.
struct SmoothGradient {
  float beta, one_minus_beta;
  bool first;
  ONNXTRAIN_HOST_DEVICE void operator()(float& avg, const float& g) const {
    avg = first ? one_minus_beta * g : avg * beta + one_minus_beta * g;
  }
};

}  // namespace onnxtrain::optimizer_math
