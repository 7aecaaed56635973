// The per-element unscale of fp16 dynamic loss scaling (executor/loss_scaler.h), written once for the
// host loop (LossScaler::unscale) and the CUDA kernel (kernels/cuda/optimizer_update.cu), as
// torch._amp_foreach_non_finite_check_and_unscale_ does it: the scaled value's finiteness, then
// g = g · (float32 reciprocal of the scale).
//
//   const UnscaleGradient f{.inverse = static_cast<float>(1.0 / scale)};
//   bool finite = true;  for (float& g : grads) finite = f(g) && finite;
#pragma once

#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE

namespace onnxtrain::optimizer_math {

struct UnscaleGradient {
  float inverse;
  // True when the scaled value is finite (tested before the multiply, as torch does: a finite gradient
  // stays usable even if the scale has backed off below 1): x − x is 0 for finite x and NaN for ±inf and
  // NaN, the same test on host and device without depending on which isfinite overloads device code sees.
  ONNXTRAIN_HOST_DEVICE bool operator()(float& g) const {
    const bool finite = g - g == 0.0f;
    g *= inverse;
    return finite;
  }
};

}  // namespace onnxtrain::optimizer_math
