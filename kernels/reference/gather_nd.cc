// GatherND (opset 11, 12: batch_dims, 13): out[batch, j, :] = data[batch, row(j), :] in the layout of
// gather_nd_index.h; any fixed-size dtype moves as bytes. A coordinate outside [-n, n) is bad data:
// run() throws Error naming it.
#include "kernels/reference/gather_nd_index.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class GatherNDKernel : public DataMovementKernel {
 public:
  explicit GatherNDKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 2);
    require_index_input(spec, 1, "indices");
    layout_ = gather_nd_layout(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
    require_output(spec, 0, spec.inputs[0].dtype, layout_.out_sizes);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const std::vector<int64_t> rows = gather_nd_rows(spec_, layout_, inputs[1]);
    const GatherNDLayout& l = layout_;
    for (int64_t j = 0; j < static_cast<int64_t>(rows.size()); ++j) {
      const int64_t batch = j / l.count;
      copy_elements(inputs[0], (batch * l.rows + rows[j]) * l.inner, outputs[0], j * l.inner, l.inner);
    }
  }

 private:
  GatherNDLayout layout_;
};

}  // namespace

void register_reference_gather_nd_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("GatherND", kFixedSizeDTypes, make_kernel<GatherNDKernel>));
}

}  // namespace onnxtrain
