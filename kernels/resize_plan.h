// A Resize, Upsample or ResizeGrad kernel's plan for one run: its roi, scales and sizes operands read from
// host memory, the axes they resolve to and the sampling tables (graph/resize_sampling.h) with the geometry
// the per-element math takes (kernels/resize_gather.h). Shared by the reference kernels and the CUDA ones,
// which copy device-resident operands to the host first.
//
//   ResizePlan plan = plan_resize(spec, sampling, x_sizes, inputs);   // inputs: host views
//   require(plan.output_sizes() == y.sizes);
#pragma once

#include <span>
#include <string>
#include <vector>

#include "graph/resize_sampling.h"
#include "kernels/reference/copy.h"
#include "kernels/resize_gather.h"

namespace onnxtrain {

struct ResizePlan {
  std::vector<ResizeAxis> axes;
  ResizeTables tables;
  ResizeGeometry geometry;
  std::vector<int64_t> output_sizes() const {
    std::vector<int64_t> sizes;
    for (const ResizeAxis& a : axes) sizes.push_back(a.out);
    return sizes;
  }
};

// The node's sampling, or a kernel error naming the bad attribute.
inline ResizeSampling resize_sampling_of(const KernelSpec& spec) {
  const bool legacy = spec.op_type == "ResizeGrad" ? spec.attributes.get_int("legacy", 0) != 0
                                                   : resize_is_legacy(spec.op_type, spec.opset);
  ResizeSampling sampling = decode_resize_sampling(spec.attributes, legacy);
  if (!sampling.error.empty()) reference::kernel_fail(spec, sampling.error);
  if (static_cast<int64_t>(spec.inputs.at(0).sizes.size()) > kResizeMaxRank)
    reference::kernel_fail(spec, "Resize takes at most " + std::to_string(kResizeMaxRank) + " dimensions");
  return sampling;
}

// `inputs` are host views; x_sizes the resized tensor's (Resize's input, ResizeGrad's dX).
inline ResizePlan plan_resize(const KernelSpec& spec, const ResizeSampling& sampling,
                              const std::vector<int64_t>& x_sizes, std::span<const TensorView> inputs) {
  const ResizeSlots slots = resize_slots(spec.op_type, spec.opset);
  auto present = [&](int slot) { return slot >= 0 && reference::optional_input(inputs, slot) != nullptr; };
  auto floats = [&](int slot, const char* what) {
    std::vector<double> values;
    const TensorView& v = inputs[slot];
    if (!read_resize_floats(v.dtype, v.data, v.numel(), values))
      reference::kernel_fail(
          spec, std::string(what) + " must be float32 or float64, not " + std::string(dtype_name(v.dtype)));
    return values;
  };
  std::vector<double> roi, scales;
  std::vector<int64_t> sizes;
  if (present(slots.roi)) roi = floats(slots.roi, "roi");
  if (present(slots.scales)) scales = floats(slots.scales, "scales");
  if (slots.scales < 0) scales = spec.attributes.get_floats("scales");  // Upsample-7
  if (present(slots.sizes)) sizes = reference::read_int_values(inputs[slots.sizes]);
  std::string error;
  ResizePlan plan;
  plan.axes = resolve_resize_axes(sampling, x_sizes, present(slots.roi) ? &roi : nullptr, &scales, &sizes, &error);
  if (plan.axes.empty())
    reference::kernel_fail(spec, error + " (input sizes " + reference::sizes_to_string(x_sizes) + ")");
  plan.tables = make_resize_tables(sampling, plan.axes);
  plan.geometry = resize_geometry(plan.axes, plan.tables);
  return plan;
}

}  // namespace onnxtrain
