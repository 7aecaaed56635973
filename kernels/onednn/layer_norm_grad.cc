// oneDNN LayerNormalizationGrad (layer_normalization_backward, prop_kind::backward with use_scale |
// use_shift, float32): X viewed as (outer, inner) at `axis`. A forward_training primitive first computes
// each row's mean and population variance (kernel-owned buffers), unless the LayerNormalization of the same
// run kept them (layer_norm.cc), then the backward primitive reads them.
// Outputs the caller omitted go to kernel-owned buffers. Falls back to the reference kernel (same device)
// when Scale broadcasts (fewer elements than the normalised dims), for float64 and empty tensors.
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/primitive_sequence_kernel.h"

namespace onnxtrain {
namespace {

using namespace onednn;

std::unique_ptr<Kernel> make_onednn_layer_norm_grad(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);  // validates axis, Scale and outputs
  if (!all_float32_nonempty(spec)) return fallback;
  const Rows rows = rows_at_axis(spec.inputs[1].sizes, spec.attributes.get_int("axis", -1));
  const int64_t outer = rows.outer, inner = rows.inner;
  if (spec.inputs[2].numel() != inner) return fallback;
  const auto epsilon = static_cast<float>(spec.attributes.get_float("epsilon", 1e-5));
  try {
    using dnnl::normalization_flags;
    const dnnl::memory::desc data = plain_desc({outer, inner});
    const dnnl::memory::desc stat = plain_desc({outer});
    const dnnl::memory::desc weights = plain_desc({inner});
    const auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
    dnnl::layer_normalization_forward::desc hint_desc(dnnl::prop_kind::forward_training, data, stat, epsilon, flags);
    dnnl::layer_normalization_forward::primitive_desc hint(hint_desc, user_scratchpad_attr(), cpu_engine());
    dnnl::layer_normalization_forward::desc stats_desc(dnnl::prop_kind::forward_training, data, stat, epsilon,
                                                       normalization_flags::none);
    dnnl::layer_normalization_forward::primitive_desc stats_pd(stats_desc, user_scratchpad_attr(), cpu_engine());
    dnnl::layer_normalization_backward::desc desc(dnnl::prop_kind::backward, data, data, stat, epsilon, flags);
    dnnl::layer_normalization_backward::primitive_desc pd(desc, user_scratchpad_attr(), cpu_engine(), hint);

    auto kernel = std::make_unique<PrimitiveSequenceKernel>(spec);
    const NormStatistics stats =
        add_statistics_step(*kernel, stats_pd, dnnl::layer_normalization_forward(stats_pd), data, stat);
    reuse_forward_statistics(*kernel, stats.step, stats, 1, outer, layer_norm_statistics_key(outer, inner));
    const size_t backward = add_norm_backward_step(*kernel, pd, dnnl::layer_normalization_backward(pd), data, weights);
    set_statistics(*kernel, backward, stats);
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;
  }
}

}  // namespace

void register_onednn_layer_norm_grad_kernels(KernelRegistry& registry) {
  registry.add(training_entry("LayerNormalizationGrad", &make_onednn_layer_norm_grad));
}

}  // namespace onnxtrain
