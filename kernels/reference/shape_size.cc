// Shape (opset 1, 13, 15: start/end) and Size: int64 views of the input's sizes; the data is not read.
#include <algorithm>

#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class ShapeKernel : public DataMovementKernel {
 public:
  explicit ShapeKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 1);
    require_output_dtype(spec, 0, DType::Int64);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const std::vector<int64_t>& sizes = inputs[0].sizes;
    const auto rank = static_cast<int64_t>(sizes.size());
    // start/end clamp like a Python slice of the shape.
    auto clamp = [rank](int64_t v) { return std::clamp(v < 0 ? v + rank : v, int64_t{0}, rank); };
    const int64_t start = clamp(spec_.attributes.get_int("start", 0));
    const int64_t end = std::max(start, clamp(spec_.attributes.get_int("end", rank)));
    require_output_sizes(outputs[0], {end - start});
    for (int64_t k = start; k < end; ++k) outputs[0].as<int64_t>()[k - start] = sizes[k];
  }
};

class SizeKernel : public DataMovementKernel {
 public:
  explicit SizeKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 1);
    require_output_dtype(spec, 0, DType::Int64);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    if (outputs[0].numel() != 1)
      fail("the output must hold one element, got sizes " + sizes_to_string(outputs[0].sizes));
    outputs[0].as<int64_t>()[0] = inputs[0].numel();
  }
};

}  // namespace

void register_reference_shape_size_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Shape", kFixedSizeDTypes, make_kernel<ShapeKernel>));
  registry.add(reference_entry("Size", kFixedSizeDTypes, make_kernel<SizeKernel>));
}

}  // namespace onnxtrain
