// The per-element unscale of fp16 dynamic loss scaling (executor/loss_scaler.h), written once for the
// host loop (LossScaler::unscale) and the CUDA kernel (kernels/cuda/optimizer_update.cu), as
// torch._amp_foreach_non_finite_check_and_unscale_ does it: g = g · (float32 reciprocal of the scale),
// then the result's finiteness.
//
//   const UnscaleGradient f{.inverse = static_cast<float>(1.0 / scale)};
//   bool finite = true;  for (float& g : grads) finite = f(g) && finite;
#pragma once

#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE

namespace onnxtrain::optimizer_math {

struct UnscaleGradient {
  float inverse;
  // True when the unscaled value is finite: x − x is 0 for finite x and NaN for ±inf and NaN, the same test
  // on host and device without depending on which isfinite overloads device code sees.
  ONNXTRAIN_HOST_DEVICE bool operator()(float& g) const {
    g *= inverse;
    return g - g == 0.0f;
  }
};

}  // namespace onnxtrain::optimizer_math
