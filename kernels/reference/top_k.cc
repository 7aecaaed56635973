// TopK (opset 1, 10, 11): along `axis`, the K largest (largest = 1) or smallest elements and their int64
// indices, in the order kernels/top_k_order.h defines (NaN as the largest value, equal values by the lower
// index). K is the attribute k (opset 1) or input 1 read at run time.
#include <algorithm>
#include <numeric>

#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"
#include "kernels/top_k_order.h"

namespace onnxtrain {

namespace {

using namespace reference;

class TopKKernel : public DataMovementKernel {
 public:
  explicit TopKKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    if (spec.inputs.empty()) fail("expected input X");
    if (spec.inputs.size() > 1) require_index_input(spec, 1, "K");
    require_output_dtype(spec, 0, spec.inputs[0].dtype);
    require_output_dtype(spec, 1, DType::Int64);
    const auto rank = static_cast<int64_t>(spec.inputs[0].sizes.size());
    if (rank == 0) fail("X must have rank >= 1, got a scalar");
    axis_ = normalized_axis(spec, spec.attributes.get_int("axis", -1), rank);
    largest_ = spec.attributes.get_int("largest", 1) != 0;
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView& x = inputs[0];
    const int64_t k =
        inputs.size() > 1 && inputs[1].present() ? read_int_values(inputs[1]).at(0) : spec_.attributes.get_int("k", -1);
    const int64_t n = x.sizes[axis_];
    if (k < 0 || k > n) {
      fail("K " + std::to_string(k) + " is out of range for the " + std::to_string(n) + " elements along axis " +
           std::to_string(axis_) + " of X " + sizes_to_string(x.sizes));
    }
    std::vector<int64_t> out_sizes = x.sizes;
    out_sizes[axis_] = k;
    require_output_sizes(outputs[0], out_sizes, 0);
    require_output_sizes(outputs[1], out_sizes, 1);
    const bool known =
        dispatch_numeric(x.dtype, [&](auto zero) { select<decltype(zero)>(x, outputs[0], outputs[1], k); });
    if (!known) fail("unsupported dtype " + std::string(dtype_name(x.dtype)));
  }

 private:
  template <typename T>
  void select(const TensorView& x, const TensorView& values, const TensorView& indices, int64_t k) const {
    const auto [outer, inner] = outer_inner(x.sizes, axis_);
    const int64_t n = x.sizes[axis_];
    const T* in = x.as<const T>();
    T* top = values.as<T>();
    int64_t* where = indices.as<int64_t>();
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const auto at = [&](int64_t j) { return in[(o * n + j) * inner + i]; };
        std::iota(order.begin(), order.end(), int64_t{0});
        std::partial_sort(order.begin(), order.begin() + k, order.end(),
                          [&](int64_t a, int64_t b) { return top_k_comes_before(at(a), a, at(b), b, largest_); });
        for (int64_t j = 0; j < k; ++j) {
          top[(o * k + j) * inner + i] = at(order[j]);
          where[(o * k + j) * inner + i] = order[j];
        }
      }
  }

  int64_t axis_ = 0;
  bool largest_ = true;
};

}  // namespace

void register_reference_top_k_kernels(KernelRegistry& registry) {
  registry.add(
      reference_entry("TopK", {DType::Float32, DType::Float64, DType::Int32, DType::Int64}, make_kernel<TopKKernel>));
}

}  // namespace onnxtrain
