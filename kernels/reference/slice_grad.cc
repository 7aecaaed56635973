// SliceGrad (ai.onnxtrain): dX = zeros shaped x_shape, with dY written where Slice(x, starts, ends, axes,
// steps) reads (the same numpy_slice clamping as the Slice kernel, negative steps included). The output's
// sizes are x_shape; the int inputs are read at run time.
#include <cstring>

#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"
#include "kernels/reference/slice_view.h"

namespace onnxtrain {

namespace {

using namespace reference;

class SliceGradKernel : public DataMovementKernel {
 public:
  explicit SliceGradKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_shape_grad_inputs(spec, 4, {"dY", "x_shape", "starts", "ends", "axes", "steps"});
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &dy = inputs[0], &dx = outputs[0];
    require_x_shape(inputs[1], dx);
    const std::vector<int64_t> starts = read_int_values(inputs[2]), ends = read_int_values(inputs[3]);
    std::vector<int64_t> axes, steps(starts.size(), 1);
    if (const TensorView* axes_input = optional_input(inputs, 4)) {
      axes = read_int_values(*axes_input);
    } else {
      for (size_t j = 0; j < starts.size(); ++j) axes.push_back(static_cast<int64_t>(j));
    }
    if (const TensorView* steps_input = optional_input(inputs, 5)) steps = read_int_values(*steps_input);
    // The slice as (base, strides) into dX, exactly as the Slice kernel reads x.
    const SliceView v = slice_view(spec_, dx.sizes, starts, ends, axes, steps);
    if (v.sizes != dy.sizes)
      fail("dY has sizes " + sizes_to_string(dy.sizes) + ", the slice gives " + sizes_to_string(v.sizes));

    const size_t element = element_bytes(dx.dtype);
    std::memset(dx.data, 0, static_cast<size_t>(dx.numel()) * element);
    const std::byte* from = bytes_of(dy);
    std::byte* to = bytes_of(dx);
    for_each_broadcast(dy.sizes, {v.strides}, [&](int64_t flat, const std::vector<int64_t>& offsets) {
      std::memcpy(to + (v.base + offsets[0]) * element, from + flat * element, element);
    });
  }
};

}  // namespace

void register_reference_slice_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("SliceGrad", kFloatDTypes, make_kernel<SliceGradKernel>));
}

}  // namespace onnxtrain
