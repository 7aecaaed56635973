// oneDNN BatchNormalizationGrad (batch_normalization_backward, prop_kind::backward with use_scale |
// use_shift, float32) over X (N,C,D1..Dn), rank 2..5. Inference mode adds use_global_stats with the given
// mean/var; training mode first runs a forward_training primitive on X for the batch mean and population
// variance (kernel-owned buffers), then the backward primitive on them. Rank 3..5 runs in the
// channel-blocked layout (dY and X reordered in, dX out): oneDNN's plain-layout path is several times slower. Outputs
// the caller omitted go to kernel-owned buffers. Falls back to the reference kernel (same device) for float64 or mixed
// dtypes, opset 7's spatial=0 (scale not per channel), rank 1 or above 5 and empty tensors.
#include <optional>

#include "graph/fused_activation.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/plain_batch_norm.h"
#include "kernels/onednn/primitive_sequence_kernel.h"

namespace onnxtrain {
namespace {

using namespace onednn;

struct BackwardPrimitives {
  dnnl::batch_normalization_backward::primitive_desc backward;
  std::optional<dnnl::batch_normalization_forward::primitive_desc> statistics;  // training mode
};

BackwardPrimitives primitives_for(const dnnl::memory::desc& data, float epsilon, dnnl::normalization_flags flags,
                                  bool training) {
  using dnnl::normalization_flags;
  dnnl::batch_normalization_forward::desc hint_desc(dnnl::prop_kind::forward_training, data, epsilon, flags);
  dnnl::batch_normalization_forward::primitive_desc hint(hint_desc, user_scratchpad_attr(), cpu_engine());
  dnnl::batch_normalization_backward::desc desc(dnnl::prop_kind::backward, data, data, epsilon, flags);
  BackwardPrimitives p{{desc, user_scratchpad_attr(), cpu_engine(), hint}, std::nullopt};
  if (training) {
    dnnl::batch_normalization_forward::desc stats_desc(dnnl::prop_kind::forward_training, data, epsilon,
                                                       normalization_flags::none);
    p.statistics.emplace(stats_desc, user_scratchpad_attr(), cpu_engine());
  }
  return p;
}

// dY, X and dX in the caller's plain layout.
void add_plain_steps(PrimitiveSequenceKernel& kernel, const dnnl::memory::desc& data, const dnnl::memory::desc& stat,
                     float epsilon, dnnl::normalization_flags flags, bool training) {
  const BackwardPrimitives p = primitives_for(data, epsilon, flags, training);
  std::optional<NormStatistics> stats;
  if (p.statistics) {
    stats = add_statistics_step(kernel, *p.statistics, dnnl::batch_normalization_forward(*p.statistics), data, stat);
    reuse_forward_statistics(kernel, stats->step, *stats, 1, stat.dims()[0], batch_statistics_key(stat.dims()[0]));
  }
  const size_t backward =
      add_norm_backward_step(kernel, p.backward, dnnl::batch_normalization_backward(p.backward), data, stat);
  if (stats) {
    set_statistics(kernel, backward, *stats);
  } else {
    kernel.bind_input(backward, DNNL_ARG_MEAN, 3, stat);
    kernel.bind_input(backward, DNNL_ARG_VARIANCE, 4, stat);
  }
}

// dY and X reordered into the channel-blocked layout, the statistics and the backward run there, dX
// reordered back (measured on (32,16,32,32), 1 thread: 2.4 ms plain, well under 1 ms blocked with the
// three reorders).
void add_blocked_steps(PrimitiveSequenceKernel& kernel, const KernelSpec& spec, const dnnl::memory::desc& plain,
                       const dnnl::memory::desc& blocked, const dnnl::memory::desc& stat, float epsilon,
                       dnnl::normalization_flags flags, bool training) {
  const BackwardPrimitives p = primitives_for(blocked, epsilon, flags, training);
  const dnnl::memory dy = add_input_reorder(kernel, 0, plain, blocked);
  const dnnl::memory x = add_input_reorder(kernel, 1, plain, blocked);
  const dnnl::memory dx = kernel.transient(blocked);
  const dnnl::memory mean = kernel.own(stat), variance = kernel.own(stat);
  if (p.statistics) {
    const size_t step = kernel.add_step(*p.statistics, dnnl::batch_normalization_forward(*p.statistics));
    kernel.set(step, DNNL_ARG_SRC, x);
    kernel.set(step, DNNL_ARG_DST, dx);  // scratch: dX is written only by the backward step below
    kernel.set(step, DNNL_ARG_MEAN, mean);
    kernel.set(step, DNNL_ARG_VARIANCE, variance);
    reuse_forward_statistics(kernel, step, {mean, variance, step}, 1, stat.dims()[0],
                             batch_statistics_key(stat.dims()[0]));
  }
  const size_t backward = kernel.add_step(p.backward, dnnl::batch_normalization_backward(p.backward));
  kernel.set(backward, DNNL_ARG_DIFF_DST, dy);
  kernel.set(backward, DNNL_ARG_SRC, x);
  kernel.bind_input(backward, DNNL_ARG_SCALE, 2, stat);
  kernel.set(backward, DNNL_ARG_SHIFT, kernel.own(stat));  // read with use_shift, though dX does not depend on it
  kernel.set(backward, DNNL_ARG_DIFF_SRC, dx);
  kernel.bind_output_or_discard(backward, DNNL_ARG_DIFF_SCALE, 1, stat);
  kernel.bind_output_or_discard(backward, DNNL_ARG_DIFF_SHIFT, 2, stat);
  if (p.statistics) {
    kernel.set(backward, DNNL_ARG_MEAN, mean);
    kernel.set(backward, DNNL_ARG_VARIANCE, variance);
  } else {
    kernel.bind_input(backward, DNNL_ARG_MEAN, 3, stat);
    kernel.bind_input(backward, DNNL_ARG_VARIANCE, 4, stat);
  }
  if (!spec.outputs.empty() && spec.outputs[0].present()) add_output_reorder(kernel, dx, 0, plain);
}

std::unique_ptr<Kernel> make_onednn_batch_norm_grad(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);  // validates inputs and outputs
  const std::vector<int64_t>& x = spec.inputs[1].sizes;
  if (!all_float32_nonempty(spec) || x.size() < 2 || x.size() > 5 || spec.inputs[2].numel() != x[1]) return fallback;
  const bool training = spec.attributes.get_int("training_mode", 0) != 0;
  if (std::unique_ptr<Kernel> plain = make_plain_batch_norm_grad(spec, training)) return plain;
  if (fuses_relu(spec.attributes)) return fallback;  // the fused Relu: the plain kernel's, or the reference's
  const auto epsilon = static_cast<float>(spec.attributes.get_float("epsilon", 1e-5));
  try {
    using dnnl::normalization_flags;
    const dnnl::memory::desc plain = plain_desc(x);
    const dnnl::memory::desc stat = plain_desc({x[1]});
    auto flags = normalization_flags::use_scale | normalization_flags::use_shift;
    if (!training) flags = flags | normalization_flags::use_global_stats;
    auto kernel = std::make_unique<PrimitiveSequenceKernel>(spec);
    if (x.size() == 2) {  // (N,C): the plain layout is oneDNN's fast one
      add_plain_steps(*kernel, plain, stat, epsilon, flags, training);
    } else {
      add_blocked_steps(*kernel, spec, plain, channel_blocked_desc(x), stat, epsilon, flags, training);
    }
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;
  }
}

}  // namespace

void register_onednn_batch_norm_grad_kernels(KernelRegistry& registry) {
  registry.add(training_entry("BatchNormalizationGrad", &make_onednn_batch_norm_grad));
}

}  // namespace onnxtrain
