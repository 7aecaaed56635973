// Per-element work of a pipeline stage's weight policy (executor/pipeline/weight_policy.h) on its flat
// float arrays, written once for the host loops and the CUDA kernels (kernels/cuda/optimizer_update.cu),
// so a stage on a GPU accumulates and scales exactly as a stage on the CPU does.
//
//   AccumulateGradient f{.weight = w, .first = true};   for (i) f(acc[i], g[i]);   // acc = w·g
//   ScaleValue s{.scale = 1.0f / m};                     for (i) s(acc[i]);         // gpipe's flush
#pragma once

#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE

namespace onnxtrain::optimizer_math {

// gpipe: a micro-batch's gradient weighted by its share of the mini-batch, into the sum (the first
// micro-batch's starts it; a weight of 1 changes no bit: 1·g == g).
struct AccumulateGradient {
  float weight;
  bool first;
  ONNXTRAIN_HOST_DEVICE void operator()(float& acc, const float& g) const { acc = first ? weight * g : acc + weight * g; }
};

struct ScaleValue {
  float scale;
  ONNXTRAIN_HOST_DEVICE void operator()(float& v) const { v *= scale; }
};

}  // namespace onnxtrain::optimizer_math
