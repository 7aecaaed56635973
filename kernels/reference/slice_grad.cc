// SliceGrad (ai.onnxtrain): dX = zeros shaped x_shape, with dY written where Slice(x, starts, ends, axes,
// steps) reads (the same numpy_slice clamping as the Slice kernel, negative steps included). The output's
// sizes are x_shape; the int inputs are read at run time.
#include <cstring>

#include "graph/shape.h"
#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class SliceGradKernel : public DataMovementKernel {
 public:
  explicit SliceGradKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 4);
    require_dtype_in(spec, 0, kFloatDTypes);
    require_output(spec, 0, spec.inputs[0].dtype, require_output(spec, 0).sizes);
    static const char* kNames[] = {"dY", "x_shape", "starts", "ends", "axes", "steps"};
    for (size_t i = 1; i < 6; ++i)
      if (has_input(spec, i)) require_index_input(spec, i, kNames[i]);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &dy = inputs[0], &dx = outputs[0];
    if (read_int_values(inputs[1]) != dx.sizes) {
      fail("x_shape " + sizes_to_string(read_int_values(inputs[1])) + " differs from the output's sizes " +
           sizes_to_string(dx.sizes));
    }
    const auto rank = static_cast<int64_t>(dx.sizes.size());
    const std::vector<int64_t> starts = read_int_values(inputs[2]), ends = read_int_values(inputs[3]);
    std::vector<int64_t> axes, steps(starts.size(), 1);
    if (const TensorView* axes_input = optional_input(inputs, 4)) {
      axes = read_int_values(*axes_input);
    } else {
      for (size_t j = 0; j < starts.size(); ++j) axes.push_back(static_cast<int64_t>(j));
    }
    if (const TensorView* steps_input = optional_input(inputs, 5)) steps = read_int_values(*steps_input);
    if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
      fail("starts " + sizes_to_string(starts) + ", ends " + sizes_to_string(ends) + ", axes " + sizes_to_string(axes) +
           " and steps " + sizes_to_string(steps) + " must have the same length");
    }

    // The slice as (base, strides) into dX, exactly as the Slice kernel reads x.
    const std::vector<int64_t> x_strides = row_major_strides(dx.sizes);
    std::vector<int64_t> sizes = dx.sizes, strides = x_strides;
    std::vector<bool> seen(rank, false);
    int64_t base = 0;
    for (size_t j = 0; j < starts.size(); ++j) {
      const int64_t axis = normalized_axis(spec_, axes[j], rank);
      if (seen[axis]) fail("axis " + std::to_string(axes[j]) + " appears twice in axes " + sizes_to_string(axes));
      seen[axis] = true;
      if (steps[j] == 0) fail("step 0 on axis " + std::to_string(axes[j]) + " (steps must be non-zero)");
      SliceExtent r = numpy_slice(starts[j], ends[j], steps[j], dx.sizes[axis]);
      sizes[axis] = r.count;
      base += r.first * x_strides[axis];
      strides[axis] = r.count > 1 ? x_strides[axis] * steps[j] : 0;
    }
    if (sizes != dy.sizes)
      fail("dY has sizes " + sizes_to_string(dy.sizes) + ", the slice gives " + sizes_to_string(sizes));

    const size_t element = element_bytes(dx.dtype);
    std::memset(dx.data, 0, static_cast<size_t>(dx.numel()) * element);
    const std::byte* from = bytes_of(dy);
    std::byte* to = bytes_of(dx);
    for_each_broadcast(dy.sizes, {strides}, [&](int64_t flat, const std::vector<int64_t>& offsets) {
      std::memcpy(to + (base + offsets[0]) * element, from + flat * element, element);
    });
  }
};

}  // namespace

void register_reference_slice_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("SliceGrad", kFloatDTypes, make_kernel<SliceGradKernel>));
}

}  // namespace onnxtrain
