// RNN, GRU and LSTM in float32 on the CPU: each direction in turn (recurrent_steps.h), its input side one
// product over all steps, each step a product of the state by Rᵀ and the gates in vectorised exp.
#include "kernels/onednn/onednn_common.h"
#include "kernels/onednn/onednn_kernels.h"
#include "kernels/onednn/recurrent_steps.h"

namespace onnxtrain {
namespace {

using namespace onednn::recurrent;

class RecurrentKernel final : public Kernel {
 public:
  explicit RecurrentKernel(RecurrentGeometry g) : g_(std::move(g)) {}
  void run(Stream&, std::span<const TensorView> in, std::span<const TensorView> out) override {
    const Operands operands = reference::recurrent_operands<float>(g_, in);
    auto output = [&](size_t i) { return reference::has_view(out, i) ? out[i].as<float>() : nullptr; };
    float* reserve = g_.reserve ? output(reference::kRecReserveOutput) : nullptr;
    for (int64_t d = 0; d < g_.cell.directions; ++d) {
      Tape tape = reserve ? tape_of(g_, d, reserve) : Tape{};
      forward_direction(g_, operands, d, output(0), output(1), output(2), reserve ? &tape : nullptr);
    }
  }

 private:
  RecurrentGeometry g_;
};

std::unique_ptr<Kernel> make_onednn_recurrent(const KernelSpec& spec) {
  const auto checked = reference::check_recurrent(spec, /*backward=*/false);
  if (checked.dtype != DType::Float32) reference::kernel_fail(spec, "the oneDNN kernel runs float32 only");
  return std::make_unique<RecurrentKernel>(checked.geometry);
}

}  // namespace

void register_onednn_recurrent_kernels(KernelRegistry& registry) {
  for (const char* op : {"RNN", "GRU", "LSTM"}) registry.add(onednn::onednn_entry(op, &make_onednn_recurrent));
}

}  // namespace onnxtrain
