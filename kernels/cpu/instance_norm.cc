// InstanceNormalization, float32: each (n, c) plane of X (N,C,D1..Dn) normalised by its own mean and
// population variance, then scale[c]·x̂ + B[c], as kernels/reference/instance_norm.cc. The planes are
// split over the threads; per plane, two vectorised passes accumulate Σx and Σ(x - mean)² in double (as
// the reference does, so a large mean costs no precision), and a third writes (x - mean)·a + B[c] with
// a = scale[c]/sqrt(var + epsilon).
#include <cmath>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/losses_norm_common.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain {
namespace {

ONNXTRAIN_CPU_CLONES void normalize_plane(const float* x, int64_t count, double epsilon, float scale, float bias,
                                          float* y) {
  const cpu::PlaneMoments m = cpu::plane_moments(x, count, epsilon);
  const float mean = static_cast<float>(m.mean);
  const float a = static_cast<float>(static_cast<double>(scale) * m.inv_std);
#pragma omp simd
  for (int64_t i = 0; i < count; ++i) y[i] = (x[i] - mean) * a + bias;
}

class InstanceNormKernel final : public Kernel {
 public:
  explicit InstanceNormKernel(const reference::PlaneGeometry& g) : g_(g) {}

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* x = inputs[0].as<const float>();
    const float* scale = inputs[1].as<const float>();
    const float* bias = inputs[2].as<const float>();
    float* y = outputs[0].as<float>();
    const int64_t plane = g_.plane, channels = g_.channels;
    cpu::parallel_for(g_.batch * channels, cpu::kPlaneGrain / plane + 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const int64_t c = p % channels;
        normalize_plane(x + p * plane, plane, g_.epsilon, scale[c], bias[c], y + p * plane);
      }
    });
  }

 private:
  reference::PlaneGeometry g_;
};

std::unique_ptr<Kernel> make_instance_norm(const KernelSpec& spec) {
  std::unique_ptr<Kernel> reference = cpu::reference_kernel(spec);  // checks the spec as the reference does
  if (spec.inputs[0].dtype != DType::Float32 || spec.inputs[0].numel() == 0) return reference;
  return std::make_unique<InstanceNormKernel>(reference::read_plane_geometry(spec, spec.inputs[0].sizes));
}

}  // namespace

void register_cpu_instance_norm_kernels(KernelRegistry& registry) {
  registry.add(cpu::cpu_entry("InstanceNormalization", {DType::Float32}, &make_instance_norm));
}

}  // namespace onnxtrain
