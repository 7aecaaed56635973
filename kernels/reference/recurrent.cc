// RNN, GRU and LSTM: each direction in turn over the steps (recurrent_forward.h), accumulating in double.
#include "kernels/reference/recurrent_forward.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

using namespace reference;

template <typename T>
void recurrent(const RecurrentGeometry& g, std::span<const TensorView> in, std::span<const TensorView> out) {
  const RecurrentOperands<T> operands = recurrent_operands<T>(g, in);
  auto output = [&](size_t i) { return has_view(out, i) ? out[i].as<T>() : nullptr; };
  for (int64_t d = 0; d < g.cell.directions; ++d) {
    RecurrentTape tape;
    recurrent_forward_direction<T>(g, operands, d, output(0), output(1), output(2), g.reserve ? &tape : nullptr);
    if (g.reserve) pack_tape(g, d, tape, output(kRecReserveOutput));
  }
}

std::unique_ptr<Kernel> make_recurrent(const KernelSpec& spec) {
  const auto checked = check_recurrent(spec, /*backward=*/false);
  const RecurrentGeometry g = checked.geometry;
  return make_float_kernel(spec, checked.dtype, [&](auto zero) {
    using T = decltype(zero);
    return make_closure_kernel(
        [g](std::span<const TensorView> in, std::span<const TensorView> out) { recurrent<T>(g, in, out); });
  });
}

}  // namespace

void register_reference_recurrent_kernels(KernelRegistry& registry) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) registry.add(reference_entry(op, kFloatDTypes, &make_recurrent));
}

}  // namespace onnxtrain
