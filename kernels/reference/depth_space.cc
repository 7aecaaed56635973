// DepthToSpace and SpaceToDepth: y is x viewed as 6-D and transposed (graph/depth_space_view.h), copied
// element by element in y's order; any fixed-size dtype.
#include "graph/depth_space_view.h"
#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class DepthSpaceKernel : public DataMovementKernel {
 public:
  explicit DepthSpaceKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 1);
    view_ = depth_space_view(spec.op_type == "DepthToSpace", spec.attributes.get_string("mode", "DCR"),
                             spec.inputs[0].sizes, spec.attributes.get_int("blocksize", 0));
    if (!view_.error.empty()) fail(view_.error);
    require_output(spec, 0, spec.inputs[0].dtype, view_.out);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const std::vector<int64_t> strides = row_major_strides(view_.sizes);
    std::vector<int64_t> permuted(6), index(6, 0);
    for (int k = 0; k < 6; ++k) permuted[k] = view_.sizes[view_.perm[k]];
    const int64_t n = outputs[0].numel();
    for (int64_t flat = 0; flat < n; ++flat) {
      int64_t source = 0;
      for (int k = 0; k < 6; ++k) source += index[k] * strides[view_.perm[k]];
      copy_elements(inputs[0], source, outputs[0], flat, 1);
      next_index(index, permuted);
    }
  }

 private:
  DepthSpaceView view_;
};

}  // namespace

void register_reference_depth_space_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("DepthToSpace", kFixedSizeDTypes, make_kernel<DepthSpaceKernel>));
  registry.add(reference_entry("SpaceToDepth", kFixedSizeDTypes, make_kernel<DepthSpaceKernel>));
}

}  // namespace onnxtrain
