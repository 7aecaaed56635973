// Transpose (opset 1, 13) as one StridedCopy planned at prepare time: dims that stay adjacent are merged, a
// move that keeps the innermost dim copies whole rows, one that moves it copies cache tiles.
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/data_movement.h"

namespace onnxtrain {

namespace {

using namespace cpu;
using reference::row_major_strides;

class CpuTransposeKernel final : public CpuDataMovementKernel {
 public:
  explicit CpuTransposeKernel(const KernelSpec& spec) : CpuDataMovementKernel(spec) {
    perm_ = reference::transpose_perm(spec);
    plan(spec.inputs[0].sizes, spec.outputs[0].sizes);
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    if (inputs[0].sizes != in_sizes_ || outputs[0].sizes != out_sizes_) plan(inputs[0].sizes, outputs[0].sizes);
    if (!planned_) return run_reference(stream, inputs, outputs);
    copy_.run(inputs[0].data, outputs[0].data);
  }

 private:
  void plan(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
    in_sizes_ = in;
    out_sizes_ = out;
    const std::vector<int64_t> in_strides = row_major_strides(in);
    std::vector<int64_t> sizes, strides;
    for (int64_t p : perm_) {
      sizes.push_back(in[p]);
      strides.push_back(in_strides[p]);
    }
    planned_ = sizes == out && StridedCopy::plan(reference::element_bytes(spec_.inputs[0].dtype), sizes, strides,
                                                 row_major_strides(sizes), 0, 0, copy_);
  }

  std::vector<int64_t> perm_, in_sizes_, out_sizes_;
  StridedCopy copy_;
  bool planned_ = false;
};

}  // namespace

void register_cpu_transpose_kernels(KernelRegistry& registry) {
  registry.add(cpu_entry("Transpose", reference::kFixedSizeDTypes, reference::make_kernel<CpuTransposeKernel>));
}

}  // namespace onnxtrain
