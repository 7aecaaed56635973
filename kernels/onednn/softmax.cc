// oneDNN Softmax and LogSoftmax (softmax_v2_forward, softmax_accurate / softmax_log, float32). From
// opset 13 over `axis` alone, X viewed as (outer, n, inner) with axis 1; before 13 X coerced to 2-D
// (outer, n) at `axis` (default 1) and normalised over n. Falls back to the reference kernel (same
// device) for empty tensors and anything oneDNN refuses; attribute errors are the reference kernel's.
// Softmax over contiguous rows (the normalised axis innermost: attention's scores) runs on the CPU's own
// AVX-512 kernel instead (kernels/cpu/row_softmax.h), where the CPU has AVX-512.
#include "kernels/cpu/row_softmax.h"
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/primitive_kernel.h"

namespace onnxtrain {
namespace {

using namespace onednn;

class RowSoftmaxKernel final : public Kernel, public ReportsImplementation {
 public:
  RowSoftmaxKernel(int64_t rows, int64_t n) : rows_(rows), n_(n) {}
  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    cpu::row_softmax(inputs[0].as<const float>(), outputs[0].as<float>(), rows_, n_);
  }
  std::string library_implementation() const override { return "cpu row softmax (avx512)"; }

 private:
  int64_t rows_, n_;
};

template <bool Log>
std::unique_ptr<Kernel> make_softmax(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = reference_kernel(spec);  // validates rank, axis and output
  if (!all_float32_nonempty(spec)) return fallback;
  const std::vector<int64_t>& sizes = spec.inputs[0].sizes;
  const auto rank = static_cast<int64_t>(sizes.size());
  const bool coerce_to_2d = spec.opset < 13;
  int64_t axis = spec.attributes.get_int("axis", coerce_to_2d ? 1 : -1);
  if (axis < 0) axis += rank;
  int64_t outer = 1, n = 1, inner = 1;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < axis) {
      outer *= sizes[d];
    } else if (d == axis || coerce_to_2d) {
      n *= sizes[d];
    } else {
      inner *= sizes[d];
    }
  }
  if (!Log && inner == 1 && cpu::has_row_softmax()) return std::make_unique<RowSoftmaxKernel>(outer, n);
  try {
    const dnnl::memory::desc view = plain_desc({outer, n, inner});
    dnnl::softmax_v2_forward::desc desc(dnnl::prop_kind::forward_inference,
                                        Log ? dnnl::algorithm::softmax_log : dnnl::algorithm::softmax_accurate, view,
                                        view, 1);
    dnnl::softmax_v2_forward::primitive_desc pd(desc, user_scratchpad_attr(), cpu_engine());
    auto kernel = std::make_unique<PrimitiveKernel>(spec, pd, dnnl::softmax_v2_forward(pd));
    kernel->bind_input(DNNL_ARG_SRC, 0, view);
    kernel->bind_output(DNNL_ARG_DST, 0, view);
    return kernel;
  } catch (const dnnl::error&) {
    return fallback;
  }
}

}  // namespace

void register_onednn_softmax_kernels(KernelRegistry& registry) {
  registry.add(onednn_entry("Softmax", &make_softmax<false>));
  registry.add(onednn_entry("LogSoftmax", &make_softmax<true>));
}

}  // namespace onnxtrain
