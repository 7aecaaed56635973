// oneDNN LayerNormalization (layer_normalization_forward, float32): X viewed as (outer, inner) at
// `axis`, use_scale (and use_shift with B). Mean is oneDNN's; InvStdDev is 1/sqrt(variance + epsilon)
// computed on the host from oneDNN's (population) variance. The row means and variances are kept for the
// gradient of the same run (layer_norm_statistics_key, Stream::derived), whose statistics step was a pass
// over X of its own, the longer as X had left the cache (0.34 of the 0.76 ms LayerNormalizationGrad took on
// a ViT's 2080x256, one thread). Falls back to the reference kernel (same
// device) when Scale or B broadcast (fewer elements than the normalized dims), for float64 stash
// outputs, empty tensors and anything oneDNN refuses; attribute errors are the reference kernel's.
#include <algorithm>
#include <cmath>

#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/primitive_kernel.h"
#include "kernels/onednn/primitive_sequence_kernel.h"

namespace onnxtrain {
namespace {

using namespace onednn;

std::unique_ptr<Kernel> make_layer_norm(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);  // validates axis, broadcasts and outputs
  if (!all_float32_nonempty(spec)) return fallback;
  const Rows rows = rows_at_axis(spec.inputs[0].sizes, spec.attributes.get_int("axis", -1));
  const int64_t outer = rows.outer, inner = rows.inner;
  const bool has_bias = spec.inputs.size() > 2 && spec.inputs[2].present();
  if (spec.inputs[1].numel() != inner || (has_bias && spec.inputs[2].numel() != inner)) return fallback;
  const bool want_mean = spec.outputs.size() > 1 && spec.outputs[1].present();
  const bool want_inv_std = spec.outputs.size() > 2 && spec.outputs[2].present();
  const auto epsilon = static_cast<float>(spec.attributes.get_float("epsilon", 1e-5));
  try {
    const dnnl::memory::desc data = plain_desc({outer, inner});
    const dnnl::memory::desc stat = plain_desc({outer});
    const dnnl::memory::desc weights = plain_desc({inner});
    auto flags = dnnl::normalization_flags::use_scale;
    if (has_bias) flags = flags | dnnl::normalization_flags::use_shift;
    dnnl::layer_normalization_forward::desc desc(dnnl::prop_kind::forward_training, data, stat, epsilon, flags);
    dnnl::layer_normalization_forward::primitive_desc pd(desc, user_scratchpad_attr(), cpu_engine());
    auto kernel = std::make_unique<PrimitiveKernel>(spec, pd, dnnl::layer_normalization_forward(pd));
    kernel->bind_input(DNNL_ARG_SRC, 0, data);
    kernel->bind_output(DNNL_ARG_DST, 0, data);
    kernel->bind_input(DNNL_ARG_SCALE, 1, weights);
    if (has_bias) kernel->bind_input(DNNL_ARG_SHIFT, 2, weights);
    const float* mean = kernel->own(DNNL_ARG_MEAN, stat);
    const float* var = kernel->own(DNNL_ARG_VARIANCE, stat);
    if (want_mean || want_inv_std) {
      kernel->set_finish([=](std::span<const TensorView>, std::span<const TensorView> out) {
        if (want_mean) std::copy(mean, mean + outer, out[1].as<float>());
        if (!want_inv_std) return;
        float* inv_std = out[2].as<float>();
        for (int64_t r = 0; r < outer; ++r)
          inv_std[r] = static_cast<float>(1.0 / std::sqrt(static_cast<double>(var[r]) + epsilon));
      });
    }
    kernel->set_keep(
        [=, key = layer_norm_statistics_key(outer, inner)](Stream& stream, std::span<const TensorView> in) {
          keep_norm_statistics(stream, in[0].data, key, mean, var, outer);
        });
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;
  }
}

}  // namespace

void register_onednn_layer_norm_kernels(KernelRegistry& registry) {
  registry.add(onednn_entry("LayerNormalization", &make_layer_norm));
}

}  // namespace onnxtrain
