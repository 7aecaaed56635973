// Slice (every opset the reference kernel takes, negative steps included) and SliceGrad (ai.onnxtrain): the
// numpy-clamped view of reference/slice_view.h turned into one StridedCopy, planned again only when the
// sizes or the starts/ends/axes/steps values change. SliceGrad zeroes dX and copies dY into the view.
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/data_movement.h"
#include "kernels/reference/slice_view.h"

namespace onnxtrain {

namespace {

using namespace cpu;
using reference::read_int_values;
using reference::row_major_strides;

using reference::kSliceInputsSince;

// The view Slice reads: starts/ends/axes/steps from inputs first..first+3 (axes and steps optional).
reference::SliceView view_of(const KernelSpec& spec, const std::vector<int64_t>& sizes,
                             std::span<const TensorView> inputs, size_t first) {
  const std::vector<int64_t> starts = read_int_values(inputs[first]), ends = read_int_values(inputs[first + 1]);
  std::vector<int64_t> axes, steps(starts.size(), 1);
  if (const TensorView* given = reference::optional_input(inputs, first + 2)) {
    axes = read_int_values(*given);
  } else {
    for (size_t j = 0; j < starts.size(); ++j) axes.push_back(static_cast<int64_t>(j));
  }
  if (const TensorView* given = reference::optional_input(inputs, first + 3)) steps = read_int_values(*given);
  return reference::slice_view(spec, sizes, starts, ends, axes, steps);
}

class StridedSliceKernel final : public CpuCopyKernel {
 public:
  explicit StridedSliceKernel(const KernelSpec& spec) : CpuCopyKernel(spec) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const bool from_attributes = spec_.opset < kSliceInputsSince;
    const bool changed =
        from_attributes ? key_.changed(inputs, outputs, {}) : key_.changed(inputs, outputs, {1, 2, 3, 4});
    run_copy(stream, inputs, outputs, changed, [&] {
      const std::vector<int64_t>& sizes = inputs[0].sizes;
      reference::SliceView v;
      if (from_attributes) {
        const Attributes& attrs = spec_.attributes;
        const std::vector<int64_t> starts = attrs.get_ints("starts");
        std::vector<int64_t> axes;
        if (attrs.has("axes")) {
          axes = attrs.get_ints("axes");
        } else {
          for (size_t j = 0; j < starts.size(); ++j) axes.push_back(static_cast<int64_t>(j));
        }
        v = reference::slice_view(spec_, sizes, starts, attrs.get_ints("ends"), axes,
                                  std::vector<int64_t>(starts.size(), 1));
      } else {
        v = view_of(spec_, sizes, inputs, 1);
      }
      return v.sizes == outputs[0].sizes && StridedCopy::plan(reference::element_bytes(inputs[0].dtype), v.sizes,
                                                              v.strides, row_major_strides(v.sizes), v.base, 0, copy_);
    });
  }
};

class SliceGradKernel final : public CpuDataMovementKernel {
 public:
  explicit SliceGradKernel(const KernelSpec& spec) : CpuDataMovementKernel(spec) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &dy = inputs[0], &dx = outputs[0];
    if (key_.changed(inputs, outputs, {1, 2, 3, 4, 5})) {
      valid_ = false;
      if (read_int_values(inputs[1]) == dx.sizes) {  // else the reference kernel names the bad x_shape
        const reference::SliceView v = view_of(spec_, dx.sizes, inputs, 2);
        valid_ = v.sizes == dy.sizes && StridedCopy::plan(reference::element_bytes(dx.dtype), v.sizes,
                                                          row_major_strides(v.sizes), v.strides, 0, v.base, copy_);
      }
    }
    if (!valid_) return run_reference(stream, inputs, outputs);
    parallel_zero(dx.data, dx.numel() * static_cast<int64_t>(reference::element_bytes(dx.dtype)));
    copy_.run(dy.data, dx.data);
  }

 private:
  RunKey key_;
  bool valid_ = false;
  StridedCopy copy_;
};

}  // namespace

void register_cpu_slice_kernels(KernelRegistry& registry) {
  registry.add(cpu_entry("Slice", reference::kFixedSizeDTypes, reference::make_kernel<StridedSliceKernel>));
  registry.add(cpu_training_entry("SliceGrad", reference::kFloatDTypes, reference::make_kernel<SliceGradKernel>));
}

}  // namespace onnxtrain
