// ai.onnxtrain::InstanceNormalizationGrad(dY, X, scale) → dX, dScale, dBias (each optional), float32, as
// kernels/reference/instance_norm_grad.cc: per (n, c) plane with its own mean and inv_std,
//   dx = scale·inv_std·(dy − Σdy/P − x̂·Σ(dy·x̂)/P), dScale[c] = Σ_n Σ dy·x̂, dBias[c] = Σ_n Σ dy.
// The planes are split over the threads; per plane a vectorised pass in double finds the mean, a second
// Σ(x − mean)², Σdy and Σdy·(x − mean) (also double), a third writes dX (float). The per-plane sums go to a buffer of
// the kernel and are added over the batch afterwards, so the result does not depend on the thread count. One kernel
// object must not run on two threads at once (that buffer is its own).
#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/losses_norm_common.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain {
namespace {

// Σdy and Σdy·x̂ of one plane into sums[0..1]; dx of the plane when dx is not null.
ONNXTRAIN_CPU_CLONES void plane_grad(const float* dy, const float* x, int64_t count, double epsilon, float scale,
                                     double* sums, float* dx) {
  double sum_x = 0;
#pragma omp simd reduction(+ : sum_x)
  for (int64_t i = 0; i < count; ++i) sum_x += static_cast<double>(x[i]);
  const double p = static_cast<double>(count);
  const double mean = sum_x / p;
  double squares = 0, sum_dy = 0, sum_dy_xc = 0;  // Σ(x - mean)², Σdy, Σdy·(x - mean)
#pragma omp simd reduction(+ : squares, sum_dy, sum_dy_xc)
  for (int64_t i = 0; i < count; ++i) {
    const double d = static_cast<double>(dy[i]), xc = static_cast<double>(x[i]) - mean;
    squares += xc * xc;
    sum_dy += d;
    sum_dy_xc += d * xc;
  }
  const double inv_std = 1.0 / std::sqrt(squares / p + epsilon);
  const double sum_dy_xhat = sum_dy_xc * inv_std;
  sums[0] = sum_dy;
  sums[1] = sum_dy_xhat;
  if (!dx) return;
  // dx = factor·(dy − Σdy/P − (x − mean)·inv_std·Σdy·x̂/P)
  const float factor = static_cast<float>(static_cast<double>(scale) * inv_std);
  const float shift = static_cast<float>(sum_dy / p);
  const float slope = static_cast<float>(inv_std * sum_dy_xhat / p);
  const float mean_f = static_cast<float>(mean);
#pragma omp simd
  for (int64_t i = 0; i < count; ++i) dx[i] = factor * (dy[i] - shift - (x[i] - mean_f) * slope);
}

class InstanceNormGradKernel final : public Kernel {
 public:
  explicit InstanceNormGradKernel(const reference::PlaneGeometry& g)
      : g_(g), sums_(static_cast<size_t>(2 * g.batch * g.channels)) {}

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* dy = inputs[0].as<const float>();
    const float* x = inputs[1].as<const float>();
    const float* scale = inputs[2].as<const float>();
    float* dx = reference::has_view(outputs, 0) ? outputs[0].as<float>() : nullptr;
    const int64_t plane = g_.plane, channels = g_.channels;
    cpu::parallel_for(g_.batch * channels, cpu::kPlaneGrain / plane + 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        plane_grad(dy + p * plane, x + p * plane, plane, g_.epsilon, scale[p % channels], &sums_[2 * p],
                   dx ? dx + p * plane : nullptr);
      }
    });
    for (size_t o = 1; o < 3; ++o) {
      if (!reference::has_view(outputs, o)) continue;
      float* out = outputs[o].as<float>();
      const size_t which = o == 1 ? 1 : 0;  // dScale: Σdy·x̂, dBias: Σdy
      for (int64_t c = 0; c < channels; ++c) {
        double total = 0;
        for (int64_t n = 0; n < g_.batch; ++n) total += sums_[2 * (n * channels + c) + which];
        out[c] = static_cast<float>(total);
      }
    }
  }

 private:
  reference::PlaneGeometry g_;
  std::vector<double> sums_;  // per plane: Σdy, Σdy·x̂
};

std::unique_ptr<Kernel> make_instance_norm_grad(const KernelSpec& spec) {
  std::unique_ptr<Kernel> reference = cpu::reference_kernel(spec);  // checks the spec as the reference does
  const TensorDesc& x = spec.inputs[1];
  if (spec.inputs[0].dtype != DType::Float32 || x.numel() == 0) return reference;
  return std::make_unique<InstanceNormGradKernel>(reference::read_plane_geometry(spec, x.sizes));
}

}  // namespace

void register_cpu_instance_norm_grad_kernels(KernelRegistry& registry) {
  registry.add(cpu::cpu_training_entry("InstanceNormalizationGrad", {DType::Float32}, &make_instance_norm_grad));
}

}  // namespace onnxtrain
