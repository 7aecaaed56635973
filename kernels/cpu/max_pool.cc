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

// The 2x2 window of stride 2 inside the input, vectorised: `v > r ? v : r` keeps the first maximal value
// (NaN as the reference treats it) and is the x86 max instruction's own definition, so the compiler emits it.
ONNXTRAIN_CPU_CLONES void max_pool_2x2(const float* x, int64_t width, int64_t out_height, int64_t out_width, float* y) {
  for (int64_t oh = 0; oh < out_height; ++oh) {
    const float* top = x + 2 * oh * width;
    const float* bottom = top + width;
    float* row = y + oh * out_width;
#pragma omp simd
    for (int64_t ow = 0; ow < out_width; ++ow) {
      float r = top[2 * ow];
      r = top[2 * ow + 1] > r ? top[2 * ow + 1] : r;
      r = bottom[2 * ow] > r ? bottom[2 * ow] : r;
      r = bottom[2 * ow + 1] > r ? bottom[2 * ow + 1] : r;
      row[ow] = r;
    }
  }
}

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
        if (w_.two_by_two()) {
          max_pool_2x2(xp, w_.input[2], w_.output[1], w_.output[2], yp);
          continue;
        }
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
