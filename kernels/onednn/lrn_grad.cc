// oneDNN LRNGrad(dY, X) (lrn_backward, lrn_across_channels, float32) over X (N,C,D1..Dn), rank 3..5. The
// backward primitive needs the forward's workspace, so the kernel first runs a forward_training LRN over
// X into kernel-owned buffers (both primitives prepared once). oneDNN's alpha is ONNX's (both divide it
// by size); its window is centred, ONNX's only for odd sizes, so even sizes fall back to the reference
// kernel (same device), as do empty tensors and anything oneDNN refuses.
#include <optional>

#include "kernels/onednn/lrn_params.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/primitive_sequence_kernel.h"

namespace onnxtrain {
namespace {

using namespace onednn;

std::unique_ptr<Kernel> make_onednn_lrn_grad(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);  // validates shapes and attributes
  const std::vector<int64_t>& x = spec.inputs[1].sizes;
  const std::optional<LrnParams> p = lrn_params(spec, x);
  if (!p) return fallback;
  try {
    const dnnl::memory::desc data = plain_desc(x);
    dnnl::lrn_forward::primitive_desc fwd_pd(p->forward_desc(dnnl::prop_kind::forward_training, data),
                                             user_scratchpad_attr(), cpu_engine());
    dnnl::lrn_backward::primitive_desc bwd_pd(p->backward_desc(data), user_scratchpad_attr(), cpu_engine(), fwd_pd);
    auto kernel = std::make_unique<PrimitiveSequenceKernel>(spec);
    const dnnl::memory workspace = kernel->transient(fwd_pd.workspace_desc());
    const size_t fwd = kernel->add_step(fwd_pd, dnnl::lrn_forward(fwd_pd));
    kernel->bind_input(fwd, DNNL_ARG_SRC, 1, data);
    kernel->set(fwd, DNNL_ARG_DST, kernel->transient(data));
    kernel->set(fwd, DNNL_ARG_WORKSPACE, workspace);
    const size_t bwd = kernel->add_step(bwd_pd, dnnl::lrn_backward(bwd_pd));
    kernel->bind_input(bwd, DNNL_ARG_SRC, 1, data);
    kernel->bind_input(bwd, DNNL_ARG_DIFF_DST, 0, data);
    kernel->set(bwd, DNNL_ARG_WORKSPACE, workspace);
    kernel->bind_output(bwd, DNNL_ARG_DIFF_SRC, 0, data);
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;
  }
}

}  // namespace

void register_onednn_lrn_grad_kernels(KernelRegistry& registry) {
  registry.add(training_entry("LRNGrad", &make_onednn_lrn_grad));
}

}  // namespace onnxtrain
