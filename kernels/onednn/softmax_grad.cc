// oneDNN SoftmaxGrad and LogSoftmaxGrad(dY, Y) (softmax_v2_backward, softmax_accurate / softmax_log,
// float32) over one axis, the tensors viewed as (outer, n, inner) with axis 1 like the forward kernel
// (softmax.cc). Falls back to the reference kernel (same device) for empty tensors and anything oneDNN
// refuses; attribute errors are the reference kernel's.
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/primitive_kernel.h"

namespace onnxtrain {
namespace {

using namespace onednn;

template <bool Log>
std::unique_ptr<Kernel> make_onednn_softmax_grad(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);  // validates shapes and the axis
  if (!all_float32_nonempty(spec)) return fallback;
  const std::vector<int64_t>& sizes = spec.inputs[1].sizes;
  const auto rank = static_cast<int64_t>(sizes.size());
  int64_t axis = spec.attributes.get_int("axis", -1);
  if (axis < 0) axis += rank;
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= sizes[d];
  for (int64_t d = axis + 1; d < rank; ++d) inner *= sizes[d];
  const dnnl::algorithm algorithm = Log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate;
  try {
    const dnnl::memory::desc view = plain_desc({outer, sizes[axis], inner});
    dnnl::softmax_v2_forward::desc fwd_desc(dnnl::prop_kind::forward_training, algorithm, view, view, 1);
    dnnl::softmax_v2_forward::primitive_desc fwd_pd(fwd_desc, user_scratchpad_attr(), cpu_engine());
    dnnl::softmax_v2_backward::desc bwd_desc(algorithm, view, view, view, 1);
    dnnl::softmax_v2_backward::primitive_desc bwd_pd(bwd_desc, user_scratchpad_attr(), cpu_engine(), fwd_pd);
    auto kernel = std::make_unique<PrimitiveKernel>(spec, bwd_pd, dnnl::softmax_v2_backward(bwd_pd));
    kernel->bind_input(DNNL_ARG_DIFF_DST, 0, view);
    kernel->bind_input(DNNL_ARG_DST, 1, view);
    kernel->bind_output(DNNL_ARG_DIFF_SRC, 0, view);
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;
  }
}

}  // namespace

void register_onednn_softmax_grad_kernels(KernelRegistry& registry) {
  registry.add(training_entry("SoftmaxGrad", &make_onednn_softmax_grad<false>));
  registry.add(training_entry("LogSoftmaxGrad", &make_onednn_softmax_grad<true>));
}

}  // namespace onnxtrain
