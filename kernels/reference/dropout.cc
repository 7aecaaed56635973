// Dropout. Inference (training_mode false or absent, every opset before 12, or ratio 0): Y = X and a mask
// of all true. Training: element i is kept where u_i >= ratio, u_i = dropout_draw(stream seed, o + i)·2^-53
// (o: the stream's draw_offset, where this run's rows start in the mini-batch),
// the Philox4x32-10 draw of kernels/philox.h for the stream seed random_stream_seed(`seed` attribute (0
// without one), the stream's run index), and Y = X·mask/(1-ratio): each run of a session draws a fresh
// mask, the same one for the same run index whatever ran before (kernels/kernel.h), and the same one on
// every backend (the "cpu" and CUDA kernels call the same functions). The masks cannot match NumPy's or
// ONNX Runtime's RNG: tests of training mode compare Y with X·mask/(1-ratio) for the mask the kernel
// returns, not with stored numbers. The mask is bool from opset 10 and X's type before.
#include <cstring>

#include "kernels/philox.h"
#include "kernels/reference/nn_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

struct DropoutConfig {
  bool ratio_is_input = false;  // opset 12+: ratio and training_mode are inputs
  double attribute_ratio = 0.5;
  DType mask_dtype = DType::Undefined;  // Undefined when the mask is not requested
};

double scalar_as_double(const TensorView& v) { return to_doubles(v).at(0); }

template <typename T>
void dropout(const DropoutConfig& c, uint64_t stream_seed, uint64_t offset, std::span<const TensorView> inputs,
             std::span<const TensorView> outputs) {
  const T* x = inputs[0].as<const T>();
  T* y = outputs[0].as<T>();
  const int64_t count = inputs[0].numel();
  double ratio = c.attribute_ratio;
  bool training = false;
  if (c.ratio_is_input) {
    if (has_view(inputs, 1)) ratio = scalar_as_double(inputs[1]);
    if (has_view(inputs, 2)) training = *inputs[2].as<const uint8_t>() != 0;
  }
  if (training && !(ratio >= 0 && ratio < 1)) {
    throw Error("Dropout kernel: ratio must be in [0, 1), got " + std::to_string(ratio));
  }
  std::vector<uint8_t> keep(static_cast<size_t>(count), 1);
  if (training && ratio > 0) {
    for (size_t i = 0; i < keep.size(); ++i) keep[i] = dropout_keeps(dropout_draw(stream_seed, offset + i), ratio);
  }
  const double scale = training ? 1.0 / (1.0 - ratio) : 1.0;
  for (int64_t i = 0; i < count; ++i) y[i] = keep[i] ? static_cast<T>(static_cast<double>(x[i]) * scale) : T(0);
  if (c.mask_dtype == DType::Undefined || !has_view(outputs, 1)) return;
  if (c.mask_dtype == DType::Bool) {
    std::memcpy(outputs[1].data, keep.data(), keep.size());
  } else {
    store_doubles(outputs[1], std::vector<double>(keep.begin(), keep.end()));
  }
}

std::unique_ptr<Kernel> make_dropout(const KernelSpec& spec) {
  const DType dtype = require_same_float_dtype(spec, {0});
  const TensorDesc& x = spec.inputs[0];
  if (require_output(spec, 0, "output").sizes != x.sizes) kernel_fail(spec, "output must have the input's shape");
  DropoutConfig c;
  c.ratio_is_input = spec.opset >= 12;
  if (!c.ratio_is_input) {
    if (has_input(spec, 1) || has_input(spec, 2))
      kernel_fail(spec, "ratio is an attribute before opset 12, not an input");
    c.attribute_ratio = spec.attributes.get_float("ratio", 0.5);
  } else {
    if (has_input(spec, 1) && (!is_float32_or_64(spec.inputs[1].dtype) || spec.inputs[1].numel() != 1)) {
      kernel_fail(spec, "ratio must be a float32 or float64 scalar in the reference kernel");
    }
    if (has_input(spec, 2) && (spec.inputs[2].dtype != DType::Bool || spec.inputs[2].numel() != 1)) {
      kernel_fail(spec, "training_mode must be a bool scalar");
    }
  }
  if (has_output(spec, 1)) {
    const TensorDesc& mask = spec.outputs[1];
    if (mask.sizes != x.sizes || (mask.dtype != DType::Bool && !is_float32_or_64(mask.dtype))) {
      kernel_fail(spec, "mask must have the input's shape and be bool (or the input's type before opset 10)");
    }
    c.mask_dtype = mask.dtype;
  }
  const auto seed = static_cast<uint64_t>(spec.attributes.get_int("seed", 0));
  return make_float_kernel(spec, dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [c, seed](Stream& stream, std::span<const TensorView> in, std::span<const TensorView> out) {
          dropout<T>(c, random_stream_seed(seed, stream.run_index()), stream.draw_offset(in[0].numel()), in, out);
        });
  });
}

}  // namespace

void register_reference_dropout_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Dropout", kFloatDTypes, &make_dropout));
}

}  // namespace onnxtrain
