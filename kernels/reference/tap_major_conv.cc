// TapMajorConv and TapMajorConvGrad (ai.onnxtrain; graph/ops/training/tap_major_conv.cc), float32/64: the
// reference Conv and ConvGrad kernels on W (M, C, k...) permuted from Wt (k..., C, M) at each run, dW
// permuted back. The test oracle of the oneDNN kernels (kernels/onednn/tap_product_conv.h), and their
// fallback for geometries they do not take.
#include <vector>

#include "graph/autodiff/tap_major_conv_weights.h"
#include "graph/op_schema.h"
#include "kernels/reference/kernel_plumbing.h"
#include "kernels/reference/reference_kernels.h"

namespace onnxtrain {
namespace {

class ModelLayoutKernel final : public Kernel {
 public:
  // `weight`: the index of Wt among the inputs; `weight_gradient`: the output that is dWt (or -1).
  ModelLayoutKernel(const KernelSpec& spec, const char* domain, const char* op_type, size_t weight, int weight_gradient)
      : weight_(weight), weight_gradient_(weight_gradient) {
    const DType dtype = spec.inputs[weight].dtype;
    if (dtype != DType::Float32 && dtype != DType::Float64)
      throw Error(spec.op_type + " is built for float32 and float64");
    element_ = dtype_size(dtype);
    if (spec.attributes.get_int("group", 1) != 1) throw Error(spec.op_type + " is built for one group");
    KernelSpec inner = spec;
    inner.domain = domain;
    inner.op_type = op_type;
    if (inner.domain.empty()) inner.opset = 17;
    w_sizes_ = model_layout_sizes(spec.inputs[weight].sizes);
    if (w_sizes_.empty()) throw Error(spec.op_type + ": a tap-major weight has rank 3 or more");
    inner.inputs[weight].sizes = w_sizes_;
    if (weight_gradient >= 0) inner.outputs[static_cast<size_t>(weight_gradient)].sizes = w_sizes_;
    const KernelEntry* entry = KernelRegistry::builtin().find(domain, op_type, DeviceKind::Cpu, dtype, "reference");
    ONNXTRAIN_CHECK(entry != nullptr, std::string("no reference kernel for ") + op_type);
    inner_ = entry->prepare(inner);
    for (size_t d = 2; d < w_sizes_.size(); ++d) taps_ *= w_sizes_[d];
    w_.resize(static_cast<size_t>(w_sizes_[0] * w_sizes_[1] * taps_) * element_);
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    std::vector<TensorView> in(inputs.begin(), inputs.end()), out(outputs.begin(), outputs.end());
    permute_conv_weight(inputs[weight_].data, w_.data(), element_, w_sizes_[0], w_sizes_[1], taps_, false);
    in[weight_].data = w_.data();
    in[weight_].sizes = w_sizes_;
    const bool has_dw = weight_gradient_ >= 0 && static_cast<size_t>(weight_gradient_) < outputs.size() &&
                        outputs[static_cast<size_t>(weight_gradient_)].data != nullptr;
    std::vector<std::byte> dw(has_dw ? w_.size() : 0);
    if (has_dw) {
      out[static_cast<size_t>(weight_gradient_)].data = dw.data();
      out[static_cast<size_t>(weight_gradient_)].sizes = w_sizes_;
    }
    inner_->run(stream, in, out);
    if (has_dw)
      permute_conv_weight(dw.data(), outputs[static_cast<size_t>(weight_gradient_)].data, element_, w_sizes_[0],
                          w_sizes_[1], taps_, true);
  }

 private:
  size_t weight_;
  int weight_gradient_;
  std::vector<int64_t> w_sizes_;
  int64_t taps_ = 1;
  size_t element_ = 0;
  std::vector<std::byte> w_;  // W in the model's layout
  std::unique_ptr<Kernel> inner_;
};

std::unique_ptr<Kernel> make_tap_major_conv(const KernelSpec& spec) {
  return std::make_unique<ModelLayoutKernel>(spec, "", "Conv", 1, -1);  // (X, Wt[, B]) -> Y
}

std::unique_ptr<Kernel> make_tap_major_conv_grad(const KernelSpec& spec) {
  return std::make_unique<ModelLayoutKernel>(spec, kTrainingDomain, "ConvGrad", 2, 1);  // (dY, X, Wt) -> dX, dWt, dB
}

}  // namespace

void register_reference_tap_major_conv_kernels(KernelRegistry& registry) {
  registry.add(reference_training_entry("TapMajorConv", kFloatDTypes, &make_tap_major_conv));
  registry.add(reference_training_entry("TapMajorConvGrad", kFloatDTypes, &make_tap_major_conv_grad));
}

}  // namespace onnxtrain
