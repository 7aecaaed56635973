// oneDNN AveragePoolGrad (pooling_v2_backward, float32), with the forward kernel's geometry (pooling.cc):
// ceil_mode and any output size the floor formula misses become extra right padding. (MaxPoolGrad is the
// "cpu" family's, kernels/cpu/max_pool_grad.cc.) Falls back to the reference kernel (same device) where the forward
// kernel does: non-float32 or empty tensors, more than 3 spatial dims, count_include_pad windows that
// overhang the padded input, windows wholly in the padding, and geometries oneDNN refuses.
#include <optional>

#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/primitive_sequence_kernel.h"
#include "kernels/reference/window.h"

namespace onnxtrain {
namespace {

using namespace onednn;

struct PoolParams {
  dnnl::memory::dims strides, kernel, dilation, pad_l, pad_r;
};

// oneDNN's pooling parameters for dX (the pool's input) and dY (its output); nullopt where the forward
// kernel would fall back too.
std::optional<PoolParams> pool_params(const KernelSpec& spec, bool include_pad) {
  const std::vector<int64_t>& dy = spec.inputs[0].sizes;
  const std::vector<int64_t>& dx = spec.outputs[0].sizes;
  const reference::WindowGeometry w = reference::read_window_geometry(
      spec, {dx.begin() + 2, dx.end()}, {dy.begin() + 2, dy.end()}, spec.attributes.get_ints("kernel_shape"));
  PoolParams p;
  for (size_t d = 0; d < w.spatial(); ++d) {
    const int64_t dilated = (w.kernel[d] - 1) * w.dilations[d] + 1;
    int64_t pad_r = w.pad_end[d];
    if ((w.input[d] + w.pad_begin[d] + pad_r - dilated) / w.strides[d] + 1 != w.output[d]) {
      pad_r = (w.output[d] - 1) * w.strides[d] + dilated - w.input[d] - w.pad_begin[d];
      if (pad_r < w.pad_end[d] || (pad_r > w.pad_end[d] && include_pad)) return std::nullopt;
      if (pad_r < 0 || (w.input[d] + w.pad_begin[d] + pad_r - dilated) / w.strides[d] + 1 != w.output[d])
        return std::nullopt;
    }
    if ((w.output[d] - 1) * w.strides[d] - w.pad_begin[d] >= w.input[d] || w.pad_begin[d] >= dilated) {
      return std::nullopt;
    }
    p.strides.push_back(w.strides[d]);
    p.kernel.push_back(w.kernel[d]);
    p.dilation.push_back(w.dilations[d] - 1);  // oneDNN counts dilation from 0
    p.pad_l.push_back(w.pad_begin[d]);
    p.pad_r.push_back(pad_r);
  }
  return p;
}

std::unique_ptr<Kernel> make_onednn_average_pool_grad(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);  // validates inputs and attributes
  const size_t rank = spec.outputs[0].sizes.size();
  // AveragePoolGrad's x_shape is int64: only dY and dX need to be float32.
  KernelSpec floats = spec;
  floats.inputs.resize(1);
  if (!all_float32_nonempty(floats) || rank < 3 || rank > 5) return fallback;
  const bool include_pad = spec.attributes.get_int("count_include_pad", 0) == 1;
  const std::optional<PoolParams> p = pool_params(spec, include_pad);
  if (!p) return fallback;
  const dnnl::algorithm algorithm =
      include_pad ? dnnl::algorithm::pooling_avg_include_padding : dnnl::algorithm::pooling_avg_exclude_padding;
  try {
    const dnnl::memory::desc x = plain_desc(spec.outputs[0].sizes);
    const dnnl::memory::desc y = plain_desc(spec.inputs[0].sizes);
    dnnl::pooling_v2_forward::desc fwd_desc(dnnl::prop_kind::forward_training, algorithm, x, y, p->strides, p->kernel,
                                            p->dilation, p->pad_l, p->pad_r);
    dnnl::pooling_v2_forward::primitive_desc fwd_pd(fwd_desc, user_scratchpad_attr(), cpu_engine());
    dnnl::pooling_v2_backward::desc bwd_desc(algorithm, x, y, p->strides, p->kernel, p->dilation, p->pad_l, p->pad_r);
    dnnl::pooling_v2_backward::primitive_desc bwd_pd(bwd_desc, user_scratchpad_attr(), cpu_engine(), fwd_pd);
    auto kernel = std::make_unique<PrimitiveSequenceKernel>(spec);
    const size_t bwd = kernel->add_step(bwd_pd, dnnl::pooling_v2_backward(bwd_pd));
    kernel->bind_input(bwd, DNNL_ARG_DIFF_DST, 0, y);
    kernel->bind_output(bwd, DNNL_ARG_DIFF_SRC, 0, x);
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;  // a geometry this oneDNN does not implement
  }
}

}  // namespace

void register_onednn_pooling_grad_kernels(KernelRegistry& registry) {
  // MaxPoolGrad is the "cpu" family's (kernels/cpu/max_pool_grad.cc), as MaxPool is (pooling.cc).
  registry.add(training_entry("AveragePoolGrad", &make_onednn_average_pool_grad));
}

}  // namespace onnxtrain
