// What the oneDNN LRN kernels forward (lrn.cc) and backward (lrn_grad.cc) share: ONNX's LRN attributes as
// oneDNN lrn_across_channels parameters, for the X the primitives compute exactly: float32, non-empty,
// rank <= 5 and an odd size (oneDNN's window is centred, ONNX's only for odd sizes). oneDNN's alpha is
// ONNX's: both divide it by size.
//
//   std::optional<LrnParams> p = lrn_params(spec, x);  // nullopt: the reference kernel instead
//   dnnl::lrn_forward::desc desc = p->forward_desc(dnnl::prop_kind::forward_inference, plain_desc(x));
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "kernels/onednn/primitive_kernel.h"

namespace onnxtrain::onednn {

struct LrnParams {
  int64_t size = 1;
  float alpha = 1e-4f, beta = 0.75f, bias = 1.0f;

  dnnl::lrn_forward::desc forward_desc(dnnl::prop_kind prop, const dnnl::memory::desc& data) const {
    return {prop, dnnl::algorithm::lrn_across_channels, data, size, alpha, beta, bias};
  }
  dnnl::lrn_backward::desc backward_desc(const dnnl::memory::desc& data) const {
    return {dnnl::algorithm::lrn_across_channels, data, data, size, alpha, beta, bias};
  }
};

// The parameters for X of sizes `x`; nullopt where the kernels fall back to the reference.
inline std::optional<LrnParams> lrn_params(const KernelSpec& spec, const std::vector<int64_t>& x) {
  const int64_t size = spec.attributes.get_int("size", 1);
  if (!all_float32_nonempty(spec) || x.size() > 5 || size % 2 == 0) return std::nullopt;
  return LrnParams{size, static_cast<float>(spec.attributes.get_float("alpha", 1e-4)),
                   static_cast<float>(spec.attributes.get_float("beta", 0.75)),
                   static_cast<float>(spec.attributes.get_float("bias", 1.0))};
}

}  // namespace onnxtrain::onednn
