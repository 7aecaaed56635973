// GatherGrad (ai.onnxtrain): dX = zeros shaped x_shape, then dX[o, indices[j], i] += dY[o, j, i] along
// `axis` (repeated indices accumulate, negative ones count from the end). The output's sizes are x_shape.
#include <algorithm>

#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class GatherGradKernel : public DataMovementKernel {
 public:
  explicit GatherGradKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    dtype_ = require_shape_grad_inputs(spec, 3, {"dY", "x_shape", "indices"});
    const auto rank = static_cast<int64_t>(spec.outputs[0].sizes.size());
    if (rank == 0) fail("x_shape must have rank >= 1");
    axis_ = normalized_axis(spec, spec.attributes.get_int("axis", 0), rank);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &dy = inputs[0], &dx = outputs[0];
    require_x_shape(inputs[1], dx);
    const std::vector<int64_t>& sizes = dx.sizes;
    std::vector<int64_t> dy_sizes(sizes.begin(), sizes.begin() + axis_);
    dy_sizes.insert(dy_sizes.end(), inputs[2].sizes.begin(), inputs[2].sizes.end());
    dy_sizes.insert(dy_sizes.end(), sizes.begin() + axis_ + 1, sizes.end());
    if (dy.sizes != dy_sizes)
      fail("dY has sizes " + sizes_to_string(dy.sizes) + ", expected " + sizes_to_string(dy_sizes));

    const std::vector<int64_t> indices = read_int_values(inputs[2]);
    const int64_t n = sizes[axis_];
    for (size_t j = 0; j < indices.size(); ++j) {
      if (indices[j] < -n || indices[j] >= n) {
        fail("index " + std::to_string(indices[j]) + " (position " + std::to_string(j) + ") is out of range for axis " +
             std::to_string(axis_) + " of size " + std::to_string(n));
      }
    }
    dispatch_float(dtype_, [&](auto zero) {
      using T = decltype(zero);
      scatter_add<T>(dy.as<const T>(), dx.as<T>(), indices, n, product_of(sizes, 0, axis_),
                     product_of(sizes, axis_ + 1), dx.numel());
    });
  }

 private:
  template <typename T>
  static void scatter_add(const T* dy, T* dx, const std::vector<int64_t>& indices, int64_t n, int64_t outer,
                          int64_t inner, int64_t total) {
    std::fill(dx, dx + total, T(0));
    const auto count = static_cast<int64_t>(indices.size());
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < count; ++j) {
        const int64_t i = indices[j] < 0 ? indices[j] + n : indices[j];
        const T* from = dy + (o * count + j) * inner;
        T* to = dx + (o * n + i) * inner;
        for (int64_t k = 0; k < inner; ++k) to[k] += from[k];
      }
    }
  }

  DType dtype_ = DType::Undefined;
  int64_t axis_ = 0;
};

}  // namespace

void register_reference_gather_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("GatherGrad", kFloatDTypes, make_kernel<GatherGradKernel>));
}

}  // namespace onnxtrain
