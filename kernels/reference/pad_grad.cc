// PadGrad (ai.onnxtrain): dX = zeros shaped x_shape, then dX[source(i)] += dY[i] for every dY position i,
// where source() is the element Pad read in its mode (reflect, edge, wrap; none for the constant border).
// The output's sizes are x_shape.
#include <algorithm>

#include "kernels/reference/copy.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {

namespace {

using namespace reference;

enum class PadMode { Constant, Reflect, Edge, Wrap };

// The input index that output position i (shifted by the begin pad) reads along an axis of `size`; -1 for
// the constant. The same mapping as the Pad kernel (kernels/reference/pad.cc).
int64_t source_index(int64_t i, int64_t size, PadMode mode) {
  if (i >= 0 && i < size) return i;
  if (mode == PadMode::Constant || size == 0) return -1;
  if (mode == PadMode::Edge) return i < 0 ? 0 : size - 1;
  if (mode == PadMode::Wrap) return ((i % size) + size) % size;
  if (size == 1) return 0;  // reflect: the mirror image repeats with period 2 * (size - 1)
  const int64_t period = 2 * (size - 1);
  i = ((i % period) + period) % period;
  return i < size ? i : period - i;
}

class PadGradKernel : public DataMovementKernel {
 public:
  explicit PadGradKernel(const KernelSpec& spec) : DataMovementKernel(spec) {
    require_inputs(spec, 3);
    dtype_ = require_dtype_in(spec, 0, kFloatDTypes);
    require_index_input(spec, 1, "x_shape");
    require_index_input(spec, 2, "pads");
    require_output(spec, 0, dtype_, require_output(spec, 0).sizes);
    const std::string mode = spec.attributes.get_string("mode", "constant");
    if (mode == "constant")
      mode_ = PadMode::Constant;
    else if (mode == "reflect")
      mode_ = PadMode::Reflect;
    else if (mode == "edge")
      mode_ = PadMode::Edge;
    else if (mode == "wrap")
      mode_ = PadMode::Wrap;
    else
      fail("unknown mode '" + mode + "' (expected constant, reflect, edge or wrap)");
  }

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &dy = inputs[0], &dx = outputs[0];
    const std::vector<int64_t>& in = dx.sizes;
    if (read_int_values(inputs[1]) != in) {
      fail("x_shape " + sizes_to_string(read_int_values(inputs[1])) + " differs from the output's sizes " +
           sizes_to_string(in));
    }
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
      const std::vector<int64_t> in_strides = row_major_strides(in);
      const int64_t total = dy.numel();
      std::vector<int64_t> index(rank, 0);
      for (int64_t flat = 0; flat < total; ++flat) {
        int64_t source = 0;
        for (int64_t k = 0; k < rank && source >= 0; ++k) {
          const int64_t i = source_index(index[k] - pads[k], in[k], mode_);
          source = i < 0 ? -1 : source + i * in_strides[k];
        }
        if (source >= 0) to[source] += from[flat];
        next_index(index, sizes);
      }
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
