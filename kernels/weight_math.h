// Per-element work of a pipeline stage's weight policy (executor/pipeline/weight_policy.h) on its flat
// float arrays, written once for the host loops and the CUDA kernels (kernels/cuda/optimizer_update.cu),
// so a stage on a GPU accumulates and scales exactly as a stage on the CPU does.
//
//   AccumulateGradient f{.weight = w, .first = true};   for (i) f(acc[i], g[i]);   // acc = w·g
//   ScaleValue s{.scale = 1.0f / m};                     for (i) s(acc[i]);         // gpipe's flush
//   AdamPrediction p{...};                               for (i) p(out[i], w[i], m[i], h[i]);   // SpecTrain
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

// SpecTrain's prediction of one weight, Ŵ = W − s·d with d = lr·v and v the optimizer's smoothed gradient
// (Optimizer::smoothed_gradient), in the float operations of its host loops: SGD with momentum's v is the
// momentum buffer; Adam's is its last step's direction m·scale / (√h / root_divisor + eps), plus wd·W for
// AdamW (h: max_exp_avg_sq with amsgrad). Optimizers without a direction predict Ŵ = W.
struct MomentumPrediction {
  float lr, s;
  ONNXTRAIN_HOST_DEVICE void operator()(float& out, const float& w, const float& buf) const {
    const float d = buf * lr;
    out = w - s * d;
  }
};

struct AdamPrediction {
  float scale, root_divisor, eps, wd, lr, s;
  ONNXTRAIN_HOST_DEVICE void operator()(float& out, const float& w, const float& m, const float& h) const {
    const float v = scale * m / (std::sqrt(h) / root_divisor + eps) + wd * w;
    const float d = v * lr;
    out = w - s * d;
  }
};

}  // namespace onnxtrain::optimizer_math
