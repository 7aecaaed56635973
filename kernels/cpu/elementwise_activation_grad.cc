// "cpu" kernel of ai.onnxtrain::ActivationGrad(dY, X[, dY2]) -> dX, float32: the derivative functors of
// kernels/elementwise_derivatives.h over the flat tensor split across threads, with Erf's and Selu's exp
// from libmvec (elementwise_vector_math.h). The registry's default for ActivationGrad is the oneDNN
// kernel (kernels/onednn/eltwise_backward.cc); it prepares this one for the activations oneDNN 2.6 lacks
// (Selu, Erf, HardSigmoid, and Clip with torch.clamp's gradient at the bounds), and every one with a second
// part dY2 of the gradient (added in the derivative's pass: three reads and a write where a Sum and then the
// derivative made four reads and two writes). Other dtypes run the reference kernel.
#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise_broadcast.h"
#include "kernels/cpu/elementwise_vector_math.h"
#include "kernels/cpu/losses_norm_common.h"
#include "kernels/elementwise_derivatives.h"

namespace onnxtrain {
namespace {

using namespace cpu;
using namespace cpu::elementwise;
using derivatives::Activation;

// Relu's gradient of a gradient in two parts: dx = y > 0 ? a + b : 0 (ReluGrad of the sum, as a Sum and
// then ActivationGrad compute it), one pass, cloned for AVX-512 and AVX2. dx may share a's or b's buffer.
ONNXTRAIN_CPU_CLONES void relu_grad_of_sum(const float* a, const float* b, const float* y, float* dx, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dx[i] = derivatives::ReluGrad<float>{}(a[i] + b[i], y[i]);
}

class ActivationGradKernel final : public Kernel {
 public:
  ActivationGradKernel(Activation activation, const derivatives::ActivationParams& params)
      : activation_(activation), params_(params) {}

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* dy = inputs[0].as<const float>();
    const float* x = inputs[1].as<const float>();
    const float* dy2 = inputs.size() > 2 && inputs[2].data ? inputs[2].as<const float>() : nullptr;
    float* dx = outputs[0].as<float>();
    parallel_for(outputs[0].numel(), kMathGrain, [&](int64_t begin, int64_t end) {
      const int64_t n = end - begin;
      if (!dy2) {
        grad_chunk(dy + begin, x + begin, dx + begin, n);
      } else if (activation_ == Activation::Relu) {  // a ResNet block's output (graph/autodiff/rules/add.cc)
        relu_grad_of_sum(dy + begin, dy2 + begin, x + begin, dx + begin, n);
      } else {  // the sum into dX, then the derivative in place
        binary_segment(dy + begin, true, dy2 + begin, true, dx + begin, n, [](float a, float b) { return a + b; });
        grad_chunk(dx + begin, x + begin, dx + begin, n);
      }
    });
  }

 private:
  static constexpr int64_t kBlock = 512;

  // dx = dy·f'(x) over n elements (dx may share dy's buffer).
  void grad_chunk(const float* dy, const float* x, float* dx, int64_t n) const {
    if (activation_ == Activation::Erf || activation_ == Activation::Selu) {
      for (int64_t i = 0; i < n; i += kBlock) exp_block(dy + i, x + i, dx + i, std::min(kBlock, n - i));
      return;
    }
    if (activation_ == Activation::HardSigmoid) {  // HardSigmoidGrad as a select that vectorises
      const auto alpha = static_cast<float>(params_.alpha), beta = static_cast<float>(params_.beta);
      binary_segment(dy, true, x, true, dx, n, [alpha, beta](float g, float v) {
        const float z = alpha * v + beta;
        return select_float((z > 0.0f) & (z < 1.0f), g * alpha, 0.0f);
      });
      return;
    }
    if (activation_ == Activation::Clip) {  // ClipGrad as a select that vectorises
      const auto lo = static_cast<float>(params_.alpha), hi = static_cast<float>(params_.beta);
      binary_segment(dy, true, x, true, dx, n,
                     [lo, hi](float g, float v) { return select_float((v >= lo) & (v <= hi), g, 0.0f); });
      return;
    }
    derivatives::with_activation_grad<float>(activation_, params_, [&](auto grad) {
      binary_segment(dy, true, x, true, dx, n, grad);  // grad(dy, x)
    });
  }

  // Erf: dy·(2/√π)·exp(-x²); Selu: dy·γ, or dy·γ·α·exp(x) for x <= 0 (the functors' expressions), with
  // the exps of a block from libmvec into a stack buffer (dX may share dY's buffer).
  void exp_block(const float* dy, const float* x, float* dx, int64_t n) const {
    alignas(64) float e[kBlock];
    if (activation_ == Activation::Erf) {
      binary_segment(x, true, x, true, e, n, [](float u, float v) { return -u * v; });
      vector_exp(e, e, n);
      const float c = 1.12837916709551257390f;
      binary_segment(dy, true, e, true, dx, n, [c](float g, float v) { return g * c * v; });
      return;
    }
    vector_exp(x, e, n);
    const auto alpha = static_cast<float>(params_.alpha), gamma = static_cast<float>(params_.gamma);
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) {
      dx[i] = select_float(x[i] > 0.0f, dy[i] * gamma, dy[i] * gamma * alpha * e[i]);
    }
  }

  Activation activation_;
  derivatives::ActivationParams params_;
};

std::unique_ptr<Kernel> make_activation_grad(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = elementwise_reference_kernel(spec);  // validates sizes and attributes
  if (spec.inputs[0].dtype != DType::Float32) return fallback;
  const Activation a = *derivatives::activation_from_name(spec.attributes.get_string("activation", ""));
  return std::make_unique<ActivationGradKernel>(a, derivatives::activation_params(a, spec.attributes));
}

}  // namespace

void register_cpu_elementwise_activation_grad_kernels(KernelRegistry& registry) {
  registry.add(cpu::cpu_training_entry("ActivationGrad", {DType::Float32}, &make_activation_grad));
}

}  // namespace onnxtrain
