// PadGrad (ai.onnxtrain): dX = zeros shaped x_shape, then dX[source(i)] += dY[i] for every dY position i,
// where source() is the element Pad read in its mode (reflect, edge, wrap; none for the constant border).
// The output's sizes are x_shape.
#include <algorithm>

#include "kernels/reference/copy.h"
#include "kernels/reference/pad_mode.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

class PadGradKernel : public DataMovementKernel {
 public:
  explicit PadGradKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    dtype_ = require_shape_grad_inputs(spec, 3, {"dY", "x_shape", "pads"});
    mode_ = read_pad_mode(spec);
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &dy = inputs[0], &dx = outputs[0];
    const std::vector<int64_t>& in = dx.sizes;
    require_x_shape(inputs[1], dx);
    const auto rank = static_cast<int64_t>(in.size());
    const std::vector<int64_t> pads = read_int_values(inputs[2]);
    if (static_cast<int64_t>(pads.size()) != 2 * rank) {
      fail("pads " + sizes_to_string(pads) + " must give a begin and an end for each of " + std::to_string(rank) +
           " axes");
    }
    std::vector<int64_t> sizes = in;
    for (int64_t k = 0; k < rank; ++k) sizes[k] += pads[k] + pads[k + rank];
    if (dy.sizes != sizes)
      fail("dY has sizes " + sizes_to_string(dy.sizes) + ", the pads give " + sizes_to_string(sizes));
    if ((mode_ == PadMode::Reflect || mode_ == PadMode::Wrap) && dy.numel() > 0) {
      for (int64_t k = 0; k < rank; ++k)
        if (in[k] == 0 && sizes[k] > 0) fail("cannot pad an empty axis in reflect or wrap mode");
    }
    dispatch_float(dtype_, [&](auto zero) {
      using T = decltype(zero);
      const T* from = dy.as<const T>();
      T* to = dx.as<T>();
      std::fill(to, to + dx.numel(), T(0));
      for_each_pad_source(in, sizes, pads, mode_, [&](int64_t flat, int64_t source) {
        if (source >= 0) to[source] += from[flat];
      });
    });
  }

 private:
  DType dtype_ = DType::Undefined;
  PadMode mode_ = PadMode::Constant;
};

}  // namespace

void register_reference_pad_grad_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("PadGrad", kFloatDTypes, make_kernel<PadGradKernel>));
}

}  // namespace onnxtrain
