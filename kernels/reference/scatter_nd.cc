// ScatterND (opset 11, 13, 16, 18): out = data, then for every index row j in row-major order the data
// slice it names (gather_nd_index.h, no batch axes) is set to updates' slice j (reduction none; bytes, any
// fixed-size dtype) or combined with it element by element for add, mul, max, min (arithmetic dtypes).
// Repeated rows apply in that order, so under "none" the last write wins. A coordinate outside [-n, n)
// is bad data: run() throws Error naming it.
#include "kernels/reference/elements_index.h"
#include "kernels/reference/gather_nd_index.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class ScatterNDKernel : public DataMovementKernel {
 public:
  explicit ScatterNDKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 3);
    require_index_input(spec, 1, "indices");
    require_same_dtype(spec, 2, 0);
    if (spec.attributes.get_int("batch_dims", 0) != 0) fail("ScatterND has no batch_dims");
    layout_ = gather_nd_layout(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
    if (spec.inputs[2].sizes != layout_.out_sizes) {
      fail("updates " + sizes_to_string(spec.inputs[2].sizes) +
           " must have the sizes indices[:-1] + data[k:] = " + sizes_to_string(layout_.out_sizes));
    }
    reduction_ = scatter_reduction(spec);
    require_output(spec, 0, spec.inputs[0].dtype, spec.inputs[0].sizes);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &data = inputs[0], &updates = inputs[2], &out = outputs[0];
    copy_elements(data, 0, out, 0, data.numel());
    const std::vector<int64_t> rows = gather_nd_rows(spec_, layout_, inputs[1]);
    const int64_t inner = layout_.inner;
    if (reduction_ == ScatterReduction::None) {
      for (size_t j = 0; j < rows.size(); ++j)
        copy_elements(updates, static_cast<int64_t>(j) * inner, out, rows[j] * inner, inner);
      return;
    }
    dispatch_arithmetic(data.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* from = updates.as<const T>();
      T* to = out.as<T>();
      for (size_t j = 0; j < rows.size(); ++j)
        for (int64_t i = 0; i < inner; ++i)
          to[rows[j] * inner + i] = scatter_combine(reduction_, to[rows[j] * inner + i], from[j * inner + i]);
    });
  }

 private:
  GatherNDLayout layout_;
  ScatterReduction reduction_ = ScatterReduction::None;
};

}  // namespace

void register_reference_scatter_nd_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("ScatterND", kFixedSizeDTypes, make_kernel<ScatterNDKernel>));
}

}  // namespace onnxtrain
