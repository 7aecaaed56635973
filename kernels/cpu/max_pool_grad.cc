// MaxPoolGrad(dY, X) -> dX, float32, 1 to 3 spatial axes: dX is zero but where each window's first
// maximal X element gets its dY added, as kernels/reference/pooling_grad.cc (which sums in double: with
// overlapping windows an element that wins several may differ in the last bit). The (n, c) planes split
// over the threads.
#include <cstring>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/losses_norm_common.h"
#include "kernels/cpu/max_pool_window.h"
#include "kernels/reference/pool_window.h"

namespace onnxtrain {
namespace {

class MaxPoolGradKernel final : public Kernel {
 public:
  MaxPoolGradKernel(const cpu::MaxPoolWindow& w, int64_t planes) : w_(w), planes_(planes) {}

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* dy = inputs[0].as<const float>();
    const float* x = inputs[1].as<const float>();
    float* dx = outputs[0].as<float>();
    const int64_t in_plane = w_.in_plane(), out_plane = w_.out_plane();
    cpu::parallel_for(planes_, 4096 / (out_plane + 1) + 1, [&](int64_t begin, int64_t end) {
      std::memset(dx + begin * in_plane, 0, static_cast<size_t>((end - begin) * in_plane) * sizeof(float));
      for (int64_t p = begin; p < end; ++p) {
        const float* dyp = dy + p * out_plane;
        float* dxp = dx + p * in_plane;
        w_.for_each_argmax(x + p * in_plane, [&](int64_t o, int64_t best) {
          if (best >= 0) dxp[best] += dyp[o];
        });
      }
    });
  }

 private:
  cpu::MaxPoolWindow w_;
  int64_t planes_;
};

std::unique_ptr<Kernel> make_max_pool_grad(const KernelSpec& spec) {
  std::unique_ptr<Kernel> reference = cpu::reference_kernel(spec);  // checks the spec as the reference does
  if (spec.inputs[0].dtype != DType::Float32 || spec.outputs[0].numel() == 0) return reference;
  const reference::PoolGeometry g = reference::read_pool_geometry(spec, spec.outputs[0], "dX", spec.inputs[0], "dY");
  cpu::MaxPoolWindow w;
  if (!cpu::MaxPoolWindow::of(g.window, w)) return reference;
  return std::make_unique<MaxPoolGradKernel>(w, g.planes);
}

}  // namespace

void register_cpu_max_pool_grad_kernels(KernelRegistry& registry) {
  registry.add(cpu::cpu_training_entry("MaxPoolGrad", {DType::Float32}, &make_max_pool_grad));
}

}  // namespace onnxtrain
