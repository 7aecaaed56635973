// oneDNN BatchNormalizationGrad (batch_normalization_backward, prop_kind::backward with use_scale |
// use_shift, float32) over X (N,C,D1..Dn), rank 2..5. Inference mode adds use_global_stats with the given
// mean/var; training mode first runs a forward_training primitive on X for the batch mean and population
// variance (kernel-owned buffers), then the backward primitive on them. Outputs the caller omitted go to
// kernel-owned buffers. Falls back to the reference kernel (same device) for float64 or mixed dtypes,
// opset 7's spatial=0 (scale not per channel), rank 1 or above 5 and empty tensors.
#include <optional>

#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/primitive_sequence_kernel.h"

namespace onnxtrain {
namespace {

using namespace onednn;

std::unique_ptr<Kernel> make_batch_norm_grad(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);  // validates inputs and outputs
  const std::vector<int64_t>& x = spec.inputs[1].sizes;
  if (!all_float32_nonempty(spec) || x.size() < 2 || x.size() > 5 || spec.inputs[2].numel() != x[1]) return fallback;
  const bool training = spec.attributes.get_int("training_mode", 0) != 0;
  const auto epsilon = static_cast<float>(spec.attributes.get_float("epsilon", 1e-5));
  try {
    using dnnl::normalization_flags;
    const dnnl::memory::desc data = plain_desc(x);
    const dnnl::memory::desc stat = plain_desc({x[1]});
    auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
    if (!training) flags = flags | normalization_flags::use_global_stats;
    dnnl::batch_normalization_forward::desc hint_desc(dnnl::prop_kind::forward_training, data, epsilon, flags);
    dnnl::batch_normalization_forward::primitive_desc hint(hint_desc, user_scratchpad_attr(), cpu_engine());
    dnnl::batch_normalization_backward::desc desc(dnnl::prop_kind::backward, data, data, epsilon, flags);
    dnnl::batch_normalization_backward::primitive_desc pd(desc, user_scratchpad_attr(), cpu_engine(), hint);

    auto kernel = std::make_unique<PrimitiveSequenceKernel>(spec);
    std::optional<NormStatistics> stats;
    if (training) {
      dnnl::batch_normalization_forward::desc stats_desc(dnnl::prop_kind::forward_training, data, epsilon,
                                                         normalization_flags::none);
      dnnl::batch_normalization_forward::primitive_desc stats_pd(stats_desc, user_scratchpad_attr(), cpu_engine());
      stats = add_statistics_step(*kernel, stats_pd, dnnl::batch_normalization_forward(stats_pd), data, stat);
    }
    const size_t backward = add_norm_backward_step(*kernel, pd, dnnl::batch_normalization_backward(pd), data, stat);
    if (stats) {
      set_statistics(*kernel, backward, *stats);
    } else {
      kernel->bind_input(backward, DNNL_ARG_MEAN, 3, stat);
      kernel->bind_input(backward, DNNL_ARG_VARIANCE, 4, stat);
    }
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;
  }
}

}  // namespace

void register_onednn_batch_norm_grad_kernels(KernelRegistry& registry) {
  registry.add(training_entry("BatchNormalizationGrad", &make_batch_norm_grad));
}

}  // namespace onnxtrain
