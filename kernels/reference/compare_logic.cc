// Reference kernels for the comparisons Equal, Less, LessOrEqual, Greater, GreaterOrEqual (bool output,
// Equal also on bool inputs), the logical Not, And, Or, Xor (bool), IsNaN (float32/float64) and Where (a
// bool condition picking from X or Y of any fixed-size dtype). All broadcast like numpy; the comparison and logic math
// is kernels/elementwise_functors.h's, shared with the CUDA kernels.
#include <cmath>
#include <cstring>

#include "kernels/elementwise_functors.h"
#include "kernels/reference/elementwise_common.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename Compare>
std::unique_ptr<Kernel> make_comparison(const KernelSpec& spec, const std::vector<DType>& allowed) {
  require_input_count(spec, 2, 2);
  const DType dtype = require_dtype_in(spec, 0, allowed);
  require_same_dtype(spec, 1, 0);
  const std::vector<int64_t> out = broadcast_sizes_or_fail(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
  require_output(spec, 0, DType::Bool, out);
  const std::vector<std::vector<int64_t>> strides = {broadcast_strides(spec.inputs[0].sizes, out),
                                                     broadcast_strides(spec.inputs[1].sizes, out)};
  return make_closure_kernel([dtype, out, strides](auto inputs, auto outputs) {
    if (dtype == DType::Bool) {
      for_each_broadcast(out, strides, [&](int64_t i, const std::vector<int64_t>& offset) {
        write_bool(outputs[0], i, Compare()(read_bool(inputs[0], offset[0]), read_bool(inputs[1], offset[1])));
      });
      return;
    }
    dispatch_arithmetic(dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* a = inputs[0].template as<T>();
      const T* b = inputs[1].template as<T>();
      for_each_broadcast(out, strides, [&](int64_t i, const std::vector<int64_t>& offset) {
        write_bool(outputs[0], i, Compare()(a[offset[0]], b[offset[1]]));
      });
    });
  });
}

template <typename Logic>
std::unique_ptr<Kernel> make_logical(const KernelSpec& spec) {
  require_input_count(spec, 2, 2);
  require_dtype_in(spec, 0, {DType::Bool});
  require_dtype_in(spec, 1, {DType::Bool});
  const std::vector<int64_t> out = broadcast_sizes_or_fail(spec, spec.inputs[0].sizes, spec.inputs[1].sizes);
  require_output(spec, 0, DType::Bool, out);
  const std::vector<std::vector<int64_t>> strides = {broadcast_strides(spec.inputs[0].sizes, out),
                                                     broadcast_strides(spec.inputs[1].sizes, out)};
  return make_closure_kernel([out, strides](auto inputs, auto outputs) {
    for_each_broadcast(out, strides, [&](int64_t i, const std::vector<int64_t>& offset) {
      write_bool(outputs[0], i, Logic()(read_bool(inputs[0], offset[0]), read_bool(inputs[1], offset[1])));
    });
  });
}

std::unique_ptr<Kernel> make_not(const KernelSpec& spec) {
  require_input_count(spec, 1, 1);
  require_dtype_in(spec, 0, {DType::Bool});
  require_output(spec, 0, DType::Bool, spec.inputs[0].sizes);
  return make_closure_kernel([](auto inputs, auto outputs) {
    for (int64_t i = 0; i < outputs[0].numel(); ++i) write_bool(outputs[0], i, !read_bool(inputs[0], i));
  });
}

std::unique_ptr<Kernel> make_is_nan(const KernelSpec& spec) {
  require_input_count(spec, 1, 1);
  require_dtype_in(spec, 0, {DType::Float32, DType::Float64});
  require_output(spec, 0, DType::Bool, spec.inputs[0].sizes);
  const bool single = spec.inputs[0].dtype == DType::Float32;
  return make_closure_kernel([single](auto inputs, auto outputs) {
    for (int64_t i = 0; i < outputs[0].numel(); ++i) {
      const bool nan = single ? std::isnan(inputs[0].template as<const float>()[i])
                              : std::isnan(inputs[0].template as<const double>()[i]);
      write_bool(outputs[0], i, nan);
    }
  });
}

// Where copies whole elements, so any dtype with a fixed size works.
std::unique_ptr<Kernel> make_where(const KernelSpec& spec) {
  require_input_count(spec, 3, 3);
  require_dtype_in(spec, 0, {DType::Bool});
  if (!has_input(spec, 1) || !has_input(spec, 2)) kernel_fail(spec, "X and Y are required");
  const DType dtype = spec.inputs[1].dtype;
  if (dtype_size(dtype) == 0)
    kernel_fail(spec, "X has dtype " + std::string(dtype_name(dtype)) + ", not a fixed-size type");
  require_same_dtype(spec, 2, 1);
  const std::vector<int64_t> out = broadcast_sizes_or_fail(
      spec, broadcast_sizes_or_fail(spec, spec.inputs[0].sizes, spec.inputs[1].sizes), spec.inputs[2].sizes);
  require_output(spec, 0, dtype, out);
  std::vector<std::vector<int64_t>> strides;
  for (const TensorDesc& in : spec.inputs) strides.push_back(broadcast_strides(in.sizes, out));
  const size_t element = dtype_size(dtype);
  return make_closure_kernel([out, strides, element](auto inputs, auto outputs) {
    const auto* x = static_cast<const std::byte*>(inputs[1].data);
    const auto* y = static_cast<const std::byte*>(inputs[2].data);
    auto* result = static_cast<std::byte*>(outputs[0].data);
    for_each_broadcast(out, strides, [&](int64_t i, const std::vector<int64_t>& offset) {
      const std::byte* source = read_bool(inputs[0], offset[0]) ? x + offset[1] * element : y + offset[2] * element;
      std::memcpy(result + i * element, source, element);
    });
  });
}

}  // namespace

void register_reference_compare_logic_kernels(KernelRegistry& registry) {
  const std::vector<DType> equal_dtypes = with_bool(kArithmeticDTypes);
  registry.add(reference_entry("Equal", equal_dtypes, [](const KernelSpec& s) {
    return make_comparison<elementwise::Equal>(s, with_bool(kArithmeticDTypes));
  }));
  registry.add(reference_entry("Less", kArithmeticDTypes, [](const KernelSpec& s) {
    return make_comparison<elementwise::Less>(s, kArithmeticDTypes);
  }));
  registry.add(reference_entry("LessOrEqual", kArithmeticDTypes, [](const KernelSpec& s) {
    return make_comparison<elementwise::LessOrEqual>(s, kArithmeticDTypes);
  }));
  registry.add(reference_entry("Greater", kArithmeticDTypes, [](const KernelSpec& s) {
    return make_comparison<elementwise::Greater>(s, kArithmeticDTypes);
  }));
  registry.add(reference_entry("GreaterOrEqual", kArithmeticDTypes, [](const KernelSpec& s) {
    return make_comparison<elementwise::GreaterOrEqual>(s, kArithmeticDTypes);
  }));
  registry.add(reference_entry("Not", {DType::Bool}, &make_not));
  registry.add(reference_entry("And", {DType::Bool}, &make_logical<elementwise::And>));
  registry.add(reference_entry("Or", {DType::Bool}, &make_logical<elementwise::Or>));
  registry.add(reference_entry("Xor", {DType::Bool}, &make_logical<elementwise::Xor>));
  registry.add(reference_entry("IsNaN", {DType::Float32, DType::Float64}, &make_is_nan));
  registry.add(reference_entry("Where", {DType::Bool}, &make_where));
}

}  // namespace onnxtrain
