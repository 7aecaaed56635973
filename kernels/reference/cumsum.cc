// CumSum (opset 11, 14): running sums along the axis given by the scalar input `axis` (int32 or int64,
// read at run time), inclusive or `exclusive`, forward or `reverse`. Sums accumulate in the element type,
// in order along the axis.
#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class CumSumKernel : public DataMovementKernel {
 public:
  explicit CumSumKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 2);
    require_index_input(spec, 1, "axis");
    if (spec.inputs[1].numel() != 1) fail("axis must be a scalar, got sizes " + sizes_to_string(spec.inputs[1].sizes));
    require_output_dtype(spec, 0, spec.inputs[0].dtype);
    if (spec.inputs[0].sizes.empty()) fail("x must have rank >= 1, got a scalar");
    exclusive_ = spec.attributes.get_int("exclusive", 0) != 0;
    reverse_ = spec.attributes.get_int("reverse", 0) != 0;
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &x = inputs[0], &out = outputs[0];
    require_output_sizes(out, x.sizes);
    const auto rank = static_cast<int64_t>(x.sizes.size());
    const int64_t requested = read_int_values(inputs[1]).at(0);
    const std::optional<int64_t> axis = normalized_axis(requested, rank);
    if (!axis) fail("axis " + std::to_string(requested) + " is out of range for x of rank " + std::to_string(rank));
    const bool known = dispatch_numeric(x.dtype, [&](auto zero) { sum<decltype(zero)>(x, out, *axis); });
    if (!known) fail("unsupported dtype " + std::string(dtype_name(x.dtype)));
  }

 private:
  template <typename T>
  void sum(const TensorView& x, const TensorView& out, int64_t axis) const {
    const auto [outer, inner] = outer_inner(x.sizes, axis);
    const int64_t n = x.sizes[axis];
    const T* in = x.as<const T>();
    T* to = out.as<T>();
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        T running{};
        for (int64_t step = 0; step < n; ++step) {
          const int64_t at = (o * n + (reverse_ ? n - 1 - step : step)) * inner + i;
          const T value = in[at];  // read first: out may alias x
          if (exclusive_) to[at] = running;
          running = static_cast<T>(running + value);
          if (!exclusive_) to[at] = running;
        }
      }
  }

  bool exclusive_ = false, reverse_ = false;
};

}  // namespace

void register_reference_cumsum_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("CumSum", {DType::Float32, DType::Float64, DType::Int32, DType::Int64},
                               make_kernel<CumSumKernel>));
}

}  // namespace onnxtrain
