// oneDNN BatchNormalization (batch_normalization_forward, float32) over X (N,C,D1..Dn), rank 2..5.
// Inference: use_global_stats | use_scale | use_shift with input_mean/input_var. Training (training_mode=1
// from opset 14, any output beyond Y before it): oneDNN's batch mean and population variance, then the
// running statistics input·momentum + batch·(1-momentum) on the host, exactly as the reference kernel
// (ONNX's rule, population variance); before opset 14 the saved mean/var outputs are the batch ones. The
// batch statistics are kept for the gradient of the same run (batch_statistics_key).
// Falls back to the reference kernel (same device) for: float64 or mixed-dtype scale/B/mean/var or
// outputs (opset 15), spatial=0 (opset 7), rank 1 or above 5, empty X. Attribute errors are the
// reference kernel's (it validates first).
#include "graph/fused_activation.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/plain_batch_norm.h"
#include "kernels/onednn/primitive_sequence_kernel.h"

namespace onnxtrain {
namespace {

using namespace onednn;

bool is_training(const KernelSpec& spec) {
  if (spec.opset >= 14) return spec.attributes.get_int("training_mode", 0) != 0;
  for (size_t i = 1; i < spec.outputs.size(); ++i)
    if (spec.outputs[i].present()) return true;
  return false;
}

std::unique_ptr<Kernel> make_batch_norm(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  const bool per_channel = spec.opset >= 9 || spec.attributes.get_int("spatial", 1) != 0;
  if (!all_float32_nonempty(spec) || !per_channel || x.size() < 2 || x.size() > 5) return fallback;
  const bool training = is_training(spec);
  if (std::unique_ptr<Kernel> plain = make_plain_batch_norm(spec, training)) return plain;
  if (fuses_relu(spec.attributes)) return fallback;  // the fused Relu: the plain kernel's, or the reference's
  const auto epsilon = static_cast<float>(spec.attributes.get_float("epsilon", 1e-5));
  const double momentum = spec.attributes.get_float("momentum", 0.9);
  const int64_t channels = x[1];
  try {
    const dnnl::memory::desc plain = plain_desc(x);
    // Rank 3..5 runs in the channel-blocked layout (X reordered in, Y out): oneDNN's plain-layout path
    // is several times slower.
    const bool blocked = x.size() > 2;
    const dnnl::memory::desc data = blocked ? channel_blocked_desc(x) : plain;
    const dnnl::memory::desc stat = plain_desc({channels});
    auto flags = dnnl::normalization_flags::use_scale | dnnl::normalization_flags::use_shift;
    if (!training) flags = flags | dnnl::normalization_flags::use_global_stats;
    dnnl::batch_normalization_forward::desc desc(
        training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference, data, epsilon, flags);
    dnnl::batch_normalization_forward::primitive_desc pd(desc, user_scratchpad_attr(), cpu_engine());
    auto kernel = std::make_unique<PrimitiveSequenceKernel>(spec);
    const dnnl::memory src = blocked ? add_input_reorder(*kernel, 0, plain, data) : dnnl::memory();
    const dnnl::memory dst = blocked ? kernel->transient(data) : dnnl::memory();
    const size_t step = kernel->add_step(pd, dnnl::batch_normalization_forward(pd));
    if (blocked) {
      kernel->set(step, DNNL_ARG_SRC, src);
      kernel->set(step, DNNL_ARG_DST, dst);
    } else {
      kernel->bind_input(step, DNNL_ARG_SRC, 0, plain);
      kernel->bind_output(step, DNNL_ARG_DST, 0, plain);
    }
    kernel->bind_input(step, DNNL_ARG_SCALE, 1, stat);
    kernel->bind_input(step, DNNL_ARG_SHIFT, 2, stat);
    if (!training) {
      kernel->bind_input(step, DNNL_ARG_MEAN, 3, stat);
      kernel->bind_input(step, DNNL_ARG_VARIANCE, 4, stat);
    }
    if (blocked) add_output_reorder(*kernel, dst, 0, plain);
    if (!training) return kernel;
    const dnnl::memory mean_memory = kernel->own(stat), var_memory = kernel->own(stat);
    kernel->set(step, DNNL_ARG_MEAN, mean_memory);
    kernel->set(step, DNNL_ARG_VARIANCE, var_memory);
    const auto* mean = static_cast<const float*>(mean_memory.get_data_handle());
    const auto* var = static_cast<const float*>(var_memory.get_data_handle());
    kernel->set_finish([=](std::span<const TensorView> in, std::span<const TensorView> out) {
      const float* input_mean = in[3].as<const float>();
      const float* input_var = in[4].as<const float>();
      auto store = [&](size_t i, auto value) {
        if (i >= out.size() || out[i].data == nullptr) return;
        float* o = out[i].as<float>();
        for (int64_t c = 0; c < channels; ++c) o[c] = static_cast<float>(value(c));
      };
      store(1, [&](int64_t c) { return input_mean[c] * momentum + mean[c] * (1 - momentum); });
      store(2, [&](int64_t c) { return input_var[c] * momentum + var[c] * (1 - momentum); });
      store(3, [&](int64_t c) { return mean[c]; });
      store(4, [&](int64_t c) { return var[c]; });
    });
    // The batch statistics for the gradient of this run (BatchNormalizationGrad's statistics step).
    kernel->set_keep([=, key = batch_statistics_key(channels)](Stream& stream, std::span<const TensorView> in) {
      keep_norm_statistics(stream, in[0].data, key, mean, var, channels);
    });
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;
  }
}

}  // namespace

void register_onednn_batch_norm_kernels(KernelRegistry& registry) {
  registry.add(onednn_entry("BatchNormalization", &make_batch_norm));
}

}  // namespace onnxtrain
