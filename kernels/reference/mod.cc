// Mod (opset 10, 13): the elementwise remainder with numpy broadcasting over float32/float64 and the
// integer types, fmod 0 (integers: the divisor's sign) or 1 (the dividend's, C's fmod); the math is
// graph/onnx_mod.h's, which the constant folder uses too. An integer divisor of 0 is an error naming the
// node, at run time (the values are not known before).
#include <string>

#include "graph/onnx_mod.h"
#include "kernels/reference/elementwise_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

std::unique_ptr<Kernel> make_mod_kernel(const KernelSpec& spec) {
  require_input_count(spec, 2, 2);
  const DType dtype = require_dtype_in(spec, 0, kArithmeticDTypes);
  require_same_dtype(spec, 1, 0);
  const int64_t fmod = spec.attributes.get_int("fmod", 0);
  if (fmod != 0 && fmod != 1) kernel_fail(spec, "attribute fmod must be 0 or 1, got " + std::to_string(fmod));
  if (is_floating(dtype) && fmod == 0) kernel_fail(spec, "floating-point inputs need fmod=1");
  const std::vector<int64_t> out = broadcast_sizes_or_fail(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
  require_output(spec, 0, dtype, out);
  const std::vector<std::vector<int64_t>> strides = {broadcast_strides(spec.inputs[0].sizes, out),
                                                     broadcast_strides(spec.inputs[1].sizes, out)};
  return make_closure_kernel([spec, dtype, out, strides, fmod](auto inputs, auto outputs) {
    dispatch_arithmetic(dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* a = inputs[0].template as<T>();
      const T* b = inputs[1].template as<T>();
      T* y = outputs[0].template as<T>();
      for_each_broadcast(out, strides, [&](int64_t i, const std::vector<int64_t>& offset) {
        const T divisor = b[offset[1]];
        if (std::is_integral_v<T> && divisor == 0) kernel_fail(spec, "integer modulo by zero");
        y[i] = onnx_mod(a[offset[0]], divisor, fmod != 0);
      });
    });
  });
}

}  // namespace

void register_reference_mod_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Mod", kArithmeticDTypes, &make_mod_kernel));
}

}  // namespace onnxtrain
