// oneDNN pooling (pooling_v2_forward, float32): AveragePool, GlobalMaxPool (MaxPool and GlobalAveragePool are
// the "cpu" family's, kernels/cpu/max_pool.cc and global_average_pool.cc). ceil_mode (or any output size the floor
// formula misses) becomes extra right padding, so the output is exactly spec.outputs. Falls back to the reference
// kernel (same device) for: non-float32 or empty tensors, more than 3 spatial dims, AveragePool with count_include_pad
// whose windows overhang the padded input (ONNX/PyTorch do not count the overhang, oneDNN would), and
// any geometry oneDNN refuses. Attribute errors are the reference kernel's (it validates first).
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/primitive_kernel.h"
#include "kernels/reference/window.h"

namespace onnxtrain {
namespace {

using namespace onednn;

struct PoolParams {
  dnnl::algorithm algorithm;
  dnnl::memory::dims strides, kernel, dilation, pad_l, pad_r;
};

std::unique_ptr<Kernel> make_pool_kernel(const KernelSpec& spec, const PoolParams& p,
                                         std::unique_ptr<Kernel> fallback) {
  try {
    const dnnl::memory::desc src = plain_desc(spec.inputs[0].sizes);
    const dnnl::memory::desc dst = plain_desc(spec.outputs[0].sizes);
    dnnl::pooling_v2_forward::desc desc(dnnl::prop_kind::forward_inference, p.algorithm, src, dst, p.strides, p.kernel,
                                        p.dilation, p.pad_l, p.pad_r);
    dnnl::pooling_v2_forward::primitive_desc pd(desc, user_scratchpad_attr(), cpu_engine());
    auto kernel = std::make_unique<PrimitiveKernel>(spec, pd, dnnl::pooling_v2_forward(pd));
    kernel->bind_input(DNNL_ARG_SRC, 0, src);
    kernel->bind_output(DNNL_ARG_DST, 0, dst);
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;  // a geometry this oneDNN does not implement
  }
}

bool pool_supported(const KernelSpec& spec) {
  const size_t rank = spec.inputs[0].sizes.size();
  return all_float32_nonempty(spec) && rank >= 3 && rank <= 5;
}

// AveragePool: windows from the attributes.
std::unique_ptr<Kernel> make_onednn_average_pool(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);
  if (!pool_supported(spec)) return fallback;
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  const std::vector<int64_t>& y = spec.outputs[0].sizes;
  const reference::WindowGeometry w = reference::read_window_geometry(
      spec, {x.begin() + 2, x.end()}, {y.begin() + 2, y.end()}, spec.attributes.get_ints("kernel_shape"));
  const bool include_pad = spec.attributes.get_int("count_include_pad", 0) == 1;
  PoolParams p{
      include_pad ? dnnl::algorithm::pooling_avg_include_padding : dnnl::algorithm::pooling_avg_exclude_padding,
      {},
      {},
      {},
      {},
      {}};
  for (size_t d = 0; d < w.spatial(); ++d) {
    const int64_t dilated = (w.kernel[d] - 1) * w.dilations[d] + 1;
    // The right padding that makes oneDNN's floor formula give exactly the declared output size.
    int64_t pad_r = w.pad_end[d];
    if ((w.input[d] + w.pad_begin[d] + pad_r - dilated) / w.strides[d] + 1 != w.output[d]) {
      pad_r = (w.output[d] - 1) * w.strides[d] + dilated - w.input[d] - w.pad_begin[d];
      if (pad_r < w.pad_end[d] || (pad_r > w.pad_end[d] && include_pad)) return fallback;  // overhang counted
      if (pad_r < 0 || (w.input[d] + w.pad_begin[d] + pad_r - dilated) / w.strides[d] + 1 != w.output[d])
        return fallback;
    }
    // A window lying wholly in the padding is -inf / 0 in the reference; do not rely on oneDNN there.
    if ((w.output[d] - 1) * w.strides[d] - w.pad_begin[d] >= w.input[d] || w.pad_begin[d] >= dilated) return fallback;
    p.strides.push_back(w.strides[d]);
    p.kernel.push_back(w.kernel[d]);
    p.dilation.push_back(w.dilations[d] - 1);  // oneDNN counts dilation from 0
    p.pad_l.push_back(w.pad_begin[d]);
    p.pad_r.push_back(pad_r);
  }
  return make_pool_kernel(spec, p, std::move(fallback));
}

template <bool Max>
std::unique_ptr<Kernel> make_global_pool(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);
  if (!pool_supported(spec)) return fallback;
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  const size_t n = x.size() - 2;
  PoolParams p{Max ? dnnl::algorithm::pooling_max : dnnl::algorithm::pooling_avg_exclude_padding,
               dnnl::memory::dims(n, 1),
               dnnl::memory::dims(x.begin() + 2, x.end()),
               dnnl::memory::dims(n, 0),
               dnnl::memory::dims(n, 0),
               dnnl::memory::dims(n, 0)};
  return make_pool_kernel(spec, p, std::move(fallback));
}

}  // namespace

void register_onednn_pooling_kernels(KernelRegistry& registry) {
  // MaxPool and GlobalAveragePool are the "cpu" family's (kernels/cpu/max_pool.cc, global_average_pool.cc):
  // oneDNN's pooling on plain NCHW tensors is its scalar simple_nchw code, several times slower.
  registry.add(onednn_entry("AveragePool", &make_onednn_average_pool));
  registry.add(onednn_entry("GlobalMaxPool", &make_global_pool<true>));
}

}  // namespace onnxtrain
