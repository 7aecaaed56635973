// MaxPoolGrad(dY, X) -> dX, float32, 1 to 3 spatial axes: dX is zero but where each window's first
// maximal X element gets its dY added, as kernels/reference/pooling_grad.cc (which sums in double: with
// overlapping windows an element that wins several may differ in the last bit). The (n, c) planes split
// over the threads; 2x2 windows of stride 2 have a pass of their own (max_pool_grad_2x2).
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/losses_norm_common.h"
#include "kernels/cpu/max_pool_window.h"
#include "kernels/reference/pool_window.h"

namespace onnxtrain {
namespace {

// The 2x2 windows of stride 2 inside the input (MaxPoolWindow::two_by_two: a CNN's pools): no input
// element is in two windows, so dX is written in one pass, the window's first maximal element getting dY
// and the other three zero, and the rows and columns no window covers zero. for_each_argmax's window at
// a time, with dX zeroed first, took 12% of a gpipe stage's time on the Fashion-MNIST CNN.
//
// kLanes windows of a row pair at a time: a loop of constant trip count, which vectorises into one pass,
// in float selects only (bool logic or an index kept GCC's loop scalar). A row's last windows are the
// last kLanes again, overlapping windows already done (they are written with the same values): the
// compiler's scalar remainder loop, with its branches, cost as much as the rest on the CNN's rows of 14
// and 7 windows, and padded copies of them more.
template <int kLanes>
ONNXTRAIN_CPU_INLINE void max_pool_grad_2x2_block(const float* top, const float* bottom, const float* g, float* dtop,
                                                  float* dbottom) {
#pragma omp simd
  for (int i = 0; i < kLanes; ++i) {
    // The first maximal of a b / c d, as for_each_argmax picks it (a NaN never wins a comparison).
    const float a = top[2 * i], b = top[2 * i + 1], c = bottom[2 * i], d = bottom[2 * i + 1];
    const float ab = b > a ? b : a;
    const float abc = c > ab ? c : ab;
    const float v = g[i];
    const float unless_d = d > abc ? 0.0f : v;
    const float unless_cd = c > ab ? 0.0f : unless_d;
    dbottom[2 * i + 1] = d > abc ? v : 0.0f;
    dbottom[2 * i] = c > ab ? unless_d : 0.0f;
    dtop[2 * i + 1] = b > a ? unless_cd : 0.0f;
    dtop[2 * i] = b > a ? 0.0f : unless_cd;
  }
}

template <int kLanes>
ONNXTRAIN_CPU_INLINE void max_pool_grad_2x2_row(const float* top, const float* bottom, const float* g, float* dtop,
                                                float* dbottom, int64_t out_width) {
  int64_t ow = 0;
  for (; ow + kLanes <= out_width; ow += kLanes)
    max_pool_grad_2x2_block<kLanes>(top + 2 * ow, bottom + 2 * ow, g + ow, dtop + 2 * ow, dbottom + 2 * ow);
  if (ow < out_width) {
    ow = out_width - kLanes;
    max_pool_grad_2x2_block<kLanes>(top + 2 * ow, bottom + 2 * ow, g + ow, dtop + 2 * ow, dbottom + 2 * ow);
  }
}

ONNXTRAIN_CPU_CLONES void max_pool_grad_2x2(const float* x, const float* dy, int64_t height, int64_t width,
                                            int64_t out_height, int64_t out_width, float* dx) {
  for (int64_t oh = 0; oh < out_height; ++oh) {
    const float* top = x + 2 * oh * width;
    const float* bottom = top + width;
    float* dtop = dx + 2 * oh * width;
    float* dbottom = dtop + width;
    const float* g = dy + oh * out_width;
    if (out_width >= 16) {
      max_pool_grad_2x2_row<16>(top, bottom, g, dtop, dbottom, out_width);
    } else if (out_width >= 8) {
      max_pool_grad_2x2_row<8>(top, bottom, g, dtop, dbottom, out_width);
    } else if (out_width >= 4) {
      max_pool_grad_2x2_row<4>(top, bottom, g, dtop, dbottom, out_width);
    } else {
      max_pool_grad_2x2_row<1>(top, bottom, g, dtop, dbottom, out_width);
    }
    for (int64_t w = 2 * out_width; w < width; ++w) dtop[w] = dbottom[w] = 0.0f;
  }
  std::memset(dx + 2 * out_height * width, 0, static_cast<size_t>((height - 2 * out_height) * width) * sizeof(float));
}

class MaxPoolGradKernel final : public Kernel {
 public:
  MaxPoolGradKernel(const cpu::MaxPoolWindow& w, int64_t planes) : w_(w), planes_(planes) {}

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* dy = inputs[0].as<const float>();
    const float* x = inputs[1].as<const float>();
    float* dx = outputs[0].as<float>();
    const int64_t in_plane = w_.in_plane(), out_plane = w_.out_plane();
    cpu::parallel_for(planes_, 4096 / (out_plane + 1) + 1, [&](int64_t begin, int64_t end) {
      if (w_.two_by_two()) {
        for (int64_t p = begin; p < end; ++p) {
          max_pool_grad_2x2(x + p * in_plane, dy + p * out_plane, w_.input[1], w_.input[2], w_.output[1], w_.output[2],
                            dx + p * in_plane);
        }
        return;
      }
      if (w_.narrow) {
        // Each plane zeroed just before its sums land, in L1 (the whole range zeroed first was read back
        // from L3).
        cpu::NarrowPlaneScratch scratch(w_);
        std::vector<int32_t> best(static_cast<size_t>(out_plane));
        for (int64_t p = begin; p < end; ++p) {
          cpu::narrow_plane_argmax(x + p * in_plane, w_, scratch, nullptr, best.data());
          const float* dyp = dy + p * out_plane;
          float* dxp = dx + p * in_plane;
          std::memset(dxp, 0, static_cast<size_t>(in_plane) * sizeof(float));
          for (int64_t o = 0; o < out_plane; ++o)
            if (best[static_cast<size_t>(o)] >= 0) dxp[best[static_cast<size_t>(o)]] += dyp[o];
        }
        return;
      }
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
