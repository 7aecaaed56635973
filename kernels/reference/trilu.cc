// Trilu (opset 14): keeps the upper (upper=1) or lower triangle of each matrix in the last two dims, from
// diagonal k (the optional int64 scalar input, default 0); elements outside it become zero.
#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class TriluKernel : public DataMovementKernel {
 public:
  explicit TriluKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_input_count(spec, 1, 2);
    if (has_input(spec, 1)) {
      require_index_input(spec, 1, "k");
      if (spec.inputs[1].numel() != 1) fail("k must be a scalar, got sizes " + sizes_to_string(spec.inputs[1].sizes));
    }
    require_output_dtype(spec, 0, spec.inputs[0].dtype);
    if (spec.inputs[0].sizes.size() < 2)
      fail("x must have rank >= 2, got sizes " + sizes_to_string(spec.inputs[0].sizes));
    upper_ = spec.attributes.get_int("upper", 1) != 0;
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &x = inputs[0], &out = outputs[0];
    require_output_sizes(out, x.sizes);
    const TensorView* k_input = optional_input(inputs, 1);
    const int64_t k = k_input ? read_int_values(*k_input).at(0) : 0;
    const size_t rank = x.sizes.size();
    const int64_t rows = x.sizes[rank - 2], cols = x.sizes[rank - 1], total = x.numel();
    const size_t element = element_bytes(x.dtype);
    for (int64_t at = 0; at < total; ++at) {
      const int64_t i = at / cols % rows, j = at % cols;
      const bool kept = upper_ ? j - i >= k : j - i <= k;
      auto* to = static_cast<std::byte*>(out.data) + at * element;
      if (kept)
        std::memmove(to, static_cast<const std::byte*>(x.data) + at * element, element);
      else
        std::memset(to, 0, element);
    }
  }

 private:
  bool upper_ = true;
};

}  // namespace

void register_reference_trilu_kernels(KernelRegistry& registry) {
  registry.add(reference_entry("Trilu", with_bool(kArithmeticDTypes), make_kernel<TriluKernel>));
}

}  // namespace onnxtrain
