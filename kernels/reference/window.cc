#include "kernels/reference/window.h"

#include <algorithm>

#include "kernels/reference/nn_common.h"

namespace onnxtrain::reference {

static std::vector<int64_t> read_axis_values(const KernelSpec& spec, const char* name, size_t count, int64_t fallback,
                                             int64_t min_value) {
  const std::vector<int64_t> values = spec.attributes.get_ints(name, std::vector<int64_t>(count, fallback));
  if (values.size() != count) {
    kernel_fail(spec, std::string(name) + " has " + std::to_string(values.size()) + " values, expected " +
                          std::to_string(count));
  }
  for (int64_t v : values) {
    if (v < min_value)
      kernel_fail(spec, std::string(name) + " must be >= " + std::to_string(min_value) + ", got " + std::to_string(v));
  }
  return values;
}

WindowGeometry read_window_geometry(const KernelSpec& spec, const std::vector<int64_t>& input,
                                    const std::vector<int64_t>& output, const std::vector<int64_t>& kernel) {
  const size_t n = kernel.size();
  if (input.size() != n || output.size() != n) {
    kernel_fail(spec, "kernel has " + std::to_string(n) + " spatial dims but the input has " +
                          std::to_string(input.size()) + " and the output " + std::to_string(output.size()));
  }
  for (int64_t k : kernel) {
    if (k < 1) kernel_fail(spec, "kernel sizes must be >= 1, got " + sizes_to_string(kernel));
  }
  WindowGeometry w;
  w.input = input;
  w.output = output;
  w.kernel = kernel;
  w.strides = read_axis_values(spec, "strides", n, 1, 1);
  w.dilations = read_axis_values(spec, "dilations", n, 1, 1);
  w.auto_pad = spec.attributes.get_string("auto_pad", "NOTSET");
  if (w.auto_pad != "NOTSET" && w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER" && w.auto_pad != "VALID") {
    kernel_fail(spec, "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '" + w.auto_pad + "'");
  }
  if (spec.attributes.has("pads")) w.auto_pad = "NOTSET";
  const std::vector<int64_t> pads = read_axis_values(spec, "pads", 2 * n, 0, 0);
  w.pad_begin.assign(n, 0);
  w.pad_end.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    if (w.auto_pad == "NOTSET") {
      w.pad_begin[i] = pads[i];
      w.pad_end[i] = pads[i + n];
    } else if (w.auto_pad != "VALID") {
      const int64_t dilated = (kernel[i] - 1) * w.dilations[i] + 1;
      const int64_t total = std::max<int64_t>(0, (output[i] - 1) * w.strides[i] + dilated - input[i]);
      w.pad_begin[i] = w.auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      w.pad_end[i] = total - w.pad_begin[i];
    }
  }
  return w;
}

std::vector<int64_t> spatial_sizes(const KernelSpec& spec, const TensorDesc& desc, const std::string& what) {
  if (desc.sizes.size() < 3) {
    kernel_fail(spec, what + " must be (N,C,D1,...) with at least one spatial dim, got " + sizes_to_string(desc.sizes));
  }
  return {desc.sizes.begin() + 2, desc.sizes.end()};
}

}  // namespace onnxtrain::reference
