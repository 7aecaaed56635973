// MaxPool, float32, 1 to 3 spatial axes: each output the first maximal element of its window (-inf for a
// window wholly in the padding), as kernels/reference/pooling.cc; the (n, c) planes split over the
// threads. The Indices output, other dtypes and more axes go to the reference kernel.
#include <limits>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/losses_norm_common.h"
#include "kernels/cpu/max_pool_window.h"
#include "kernels/reference/pool_window.h"

namespace onnxtrain {
namespace {

class MaxPoolKernel final : public Kernel {
 public:
  MaxPoolKernel(const cpu::MaxPoolWindow& w, int64_t planes) : w_(w), planes_(planes) {}

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* x = inputs[0].as<const float>();
    float* y = outputs[0].as<float>();
    const int64_t in_plane = w_.in_plane(), out_plane = w_.out_plane();
    cpu::parallel_for(planes_, 4096 / (out_plane + 1) + 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const float* xp = x + p * in_plane;
        float* yp = y + p * out_plane;
        w_.for_each_argmax(xp, [&](int64_t o, int64_t best) {
          yp[o] = best >= 0 ? xp[best] : -std::numeric_limits<float>::infinity();
        });
      }
    });
  }

 private:
  cpu::MaxPoolWindow w_;
  int64_t planes_;
};

std::unique_ptr<Kernel> make_max_pool(const KernelSpec& spec) {
  std::unique_ptr<Kernel> reference = cpu::reference_kernel(spec);  // checks the spec as the reference does
  const bool indices = spec.outputs.size() > 1 && spec.outputs[1].present();
  if (spec.inputs[0].dtype != DType::Float32 || spec.inputs[0].numel() == 0 || indices) return reference;
  const reference::PoolGeometry g = reference::read_pool_geometry(spec, spec.inputs[0], "X", spec.outputs[0], "Y");
  cpu::MaxPoolWindow w;
  if (!cpu::MaxPoolWindow::of(g.window, w)) return reference;
  return std::make_unique<MaxPoolKernel>(w, g.planes);
}

}  // namespace

void register_cpu_max_pool_kernels(KernelRegistry& registry) {
  registry.add(cpu::cpu_entry("MaxPool", {DType::Float32}, &make_max_pool));
}

}  // namespace onnxtrain
