// oneDNN LayerNormalizationGrad (layer_normalization_backward, prop_kind::backward with use_scale |
// use_shift, float32): X viewed as (outer, inner) at `axis`. A forward_training primitive first computes
// each row's mean and population variance (kernel-owned buffers), then the backward primitive reads them.
// Outputs the caller omitted go to kernel-owned buffers. Falls back to the reference kernel (same device)
// when Scale broadcasts (fewer elements than the normalised dims), for float64 and empty tensors.
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/primitive_sequence_kernel.h"

namespace onnxtrain {
namespace {

using namespace onednn;

std::unique_ptr<Kernel> make_layer_norm_grad(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);  // validates axis, Scale and outputs
  if (!all_float32_nonempty(spec)) return fallback;
  const std::vector<int64_t>& x = spec.inputs[1].sizes;
  const auto rank = static_cast<int64_t>(x.size());
  int64_t axis = spec.attributes.get_int("axis", -1);
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? outer : inner) *= x[d];
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
    const dnnl::memory mean = kernel->own(stat);
    const dnnl::memory var = kernel->own(stat);
    const size_t stats = kernel->add_step(stats_pd, dnnl::layer_normalization_forward(stats_pd));
    kernel->bind_input(stats, DNNL_ARG_SRC, 1, data);
    kernel->set(stats, DNNL_ARG_DST, kernel->own(data));
    kernel->set(stats, DNNL_ARG_MEAN, mean);
    kernel->set(stats, DNNL_ARG_VARIANCE, var);
    const size_t backward = kernel->add_step(pd, dnnl::layer_normalization_backward(pd));
    kernel->bind_input(backward, DNNL_ARG_DIFF_DST, 0, data);
    kernel->bind_input(backward, DNNL_ARG_SRC, 1, data);
    kernel->bind_input(backward, DNNL_ARG_SCALE, 2, weights);
    kernel->set(backward, DNNL_ARG_MEAN, mean);
    kernel->set(backward, DNNL_ARG_VARIANCE, var);
    // oneDNN counts SHIFT among the backward's inputs with use_shift (which makes it compute DIFF_SHIFT),
    // though the gradients do not depend on it.
    kernel->set(backward, DNNL_ARG_SHIFT, kernel->own(weights));
    auto output = [&](int arg, size_t index, const dnnl::memory::desc& d) {
      if (index < spec.outputs.size() && spec.outputs[index].present()) {
        kernel->bind_output(backward, arg, index, d);
      } else {
        kernel->set(backward, arg, kernel->own(d));
      }
    };
    output(DNNL_ARG_DIFF_SRC, 0, data);
    output(DNNL_ARG_DIFF_SCALE, 1, weights);
    output(DNNL_ARG_DIFF_SHIFT, 2, weights);
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;
  }
}

}  // namespace

void register_onednn_layer_norm_grad_kernels(KernelRegistry& registry) {
  KernelEntry entry = onednn_entry("LayerNormalizationGrad", &make_layer_norm_grad);
  entry.domain = "ai.onnxtrain";
  registry.add(std::move(entry));
}

}  // namespace onnxtrain
