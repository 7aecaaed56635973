// oneDNN LRN (lrn_forward, lrn_across_channels, float32) over X (N,C,D1..Dn), rank 3..5. oneDNN's
// alpha is ONNX's: both divide it by size (y = x / (bias + alpha/size · Σ x²)^beta). oneDNN's window is
// centred, c - (size-1)/2 .. c + (size-1)/2, which is ONNX's only for odd sizes: even sizes fall back to
// the reference kernel (same device), as do empty tensors and anything oneDNN refuses (lrn_params.h).
#include <optional>

#include "kernels/onednn/lrn_params.h"
#include "kernels/onednn/onednn_kernels.h"

namespace onnxtrain {
namespace {

using namespace onednn;

std::unique_ptr<Kernel> make_lrn(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);  // validates shapes and attributes
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  const std::optional<LrnParams> p = lrn_params(spec, x);
  if (!p) return fallback;
  try {
    const dnnl::memory::desc data = plain_desc(x);
    dnnl::lrn_forward::primitive_desc pd(p->forward_desc(dnnl::prop_kind::forward_inference, data),
                                         user_scratchpad_attr(), cpu_engine());
    auto kernel = std::make_unique<PrimitiveKernel>(spec, pd, dnnl::lrn_forward(pd));
    kernel->bind_input(DNNL_ARG_SRC, 0, data);
    kernel->bind_output(DNNL_ARG_DST, 0, data);
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;
  }
}

}  // namespace

void register_onednn_lrn_kernels(KernelRegistry& registry) { registry.add(onednn_entry("LRN", &make_lrn)); }

}  // namespace onnxtrain
