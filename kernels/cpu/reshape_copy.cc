// Reshape, Flatten, Squeeze, Unsqueeze and Identity: the output holds the input's bytes under new sizes.
// The first run with given sizes (and shape values) goes through the reference kernel, which checks them;
// later runs with the same facts are one memcpy, split across the threads for large tensors.
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/data_movement.h"

namespace onnxtrain {

namespace {

using namespace cpu;

constexpr int kReshapeInputSince = 5;

class ByteCopyKernel final : public CpuDataMovementKernel {
 public:
  explicit ByteCopyKernel(const KernelSpec& spec) : CpuDataMovementKernel(spec) {
    shape_input_ = spec.op_type == "Reshape" && spec.opset >= kReshapeInputSince;
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const bool changed = shape_input_ ? key_.changed(inputs, outputs, {1}) : key_.changed(inputs, outputs, {});
    if (changed || !checked_) {
      checked_ = false;
      run_reference(stream, inputs, outputs);  // checks the sizes (throws on a mismatch) and copies
      checked_ = true;
      return;
    }
    parallel_copy(outputs[0].data, inputs[0].data,
                  inputs[0].numel() * static_cast<int64_t>(reference::element_bytes(inputs[0].dtype)));
  }

 private:
  bool shape_input_ = false;
  RunKey key_;
  bool checked_ = false;
};

}  // namespace

void register_cpu_reshape_kernels(KernelRegistry& registry) {
  for (const char* op : kReshapeOps)
    registry.add(cpu_entry(op, reference::kFixedSizeDTypes, reference::make_kernel<ByteCopyKernel>));
}

}  // namespace onnxtrain
