// Resize, Upsample and ResizeGrad on the CPU threads. Where only the last two axes are resized (images:
// every other axis maps each position to itself with weight 1), each (…, H, W) plane is one 2-D pass:
// output rows split over the threads forward, whole planes backward (each dX plane gathers from its own
// dY plane by adding in dY's row-major order). The sums run in the reference's order with the same
// products (graph/resize_sampling.h, kernels/resize_gather.h), so the bits are the reference's. Other
// resizes run the reference's per-element math with the elements split over the threads. The reference
// kernels, one element at a time, took 38 of 51 ms of a small UNet's training step (training_step_profile).
#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/losses_norm_common.h"
#include "kernels/resize_plan.h"

namespace onnxtrain {

namespace {

// Whether axis k's taps read each output position's own input position with weight 1.
bool identity_axis(const ResizePlan& plan, int k) {
  const ResizeAxis& a = plan.axes[k];
  if (a.in != a.out) return false;
  for (int64_t o = 0; o < a.out; ++o) {
    const ResizeTaps& t = plan.tables.taps[plan.tables.tap_offset[k] + o];
    if (t.extrapolated || t.count != 1 || t.index[0] != o || t.weight[0] != 1.0) return false;
  }
  return true;
}

// Planes of the last two axes when every axis before them is an identity; 0 otherwise.
int64_t planes_of(const ResizePlan& plan) {
  const int rank = plan.geometry.rank;
  if (rank < 2) return 0;
  int64_t planes = 1;
  for (int k = 0; k < rank - 2; ++k) {
    if (!identity_axis(plan, k)) return 0;
    planes *= plan.axes[k].in;
  }
  return planes;
}

template <typename T>
void resize_planes(const ResizePlan& plan, int64_t planes, const T* x, T* y, double extrapolation_value) {
  const int rank = plan.geometry.rank;
  const ResizeAxis &ah = plan.axes[rank - 2], &aw = plan.axes[rank - 1];
  const ResizeTaps* th = &plan.tables.taps[plan.tables.tap_offset[rank - 2]];
  const ResizeTaps* tw = &plan.tables.taps[plan.tables.tap_offset[rank - 1]];
  const auto fill = static_cast<T>(extrapolation_value);
  cpu::parallel_for(planes * ah.out, 4096 / (aw.out + 1) + 1, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t plane = row / ah.out, oh = row % ah.out;
      const T* xp = x + plane * ah.in * aw.in;
      T* yr = y + row * aw.out;
      const ResizeTaps& h = th[oh];
      for (int64_t ow = 0; ow < aw.out; ++ow) {
        const ResizeTaps& w = tw[ow];
        if (h.extrapolated || w.extrapolated) {
          yr[ow] = fill;
          continue;
        }
        double sum = 0.0;
        for (int i = 0; i < h.count; ++i) {
          const T* xr = xp + h.index[i] * aw.in;
          for (int j = 0; j < w.count; ++j) sum += h.weight[i] * w.weight[j] * static_cast<double>(xr[w.index[j]]);
        }
        yr[ow] = static_cast<T>(sum);
      }
    }
  });
}

template <typename T>
void resize_grad_planes(const ResizePlan& plan, int64_t planes, const T* dy, T* dx) {
  const int rank = plan.geometry.rank;
  const ResizeAxis &ah = plan.axes[rank - 2], &aw = plan.axes[rank - 1];
  const ResizeTaps* th = &plan.tables.taps[plan.tables.tap_offset[rank - 2]];
  const ResizeTaps* tw = &plan.tables.taps[plan.tables.tap_offset[rank - 1]];
  cpu::parallel_for(planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t plane = begin; plane < end; ++plane) {
      T* dxp = dx + plane * ah.in * aw.in;
      const T* dyp = dy + plane * ah.out * aw.out;
      std::fill(dxp, dxp + ah.in * aw.in, T(0));
      for (int64_t oh = 0; oh < ah.out; ++oh) {
        const ResizeTaps& h = th[oh];
        if (h.extrapolated) continue;
        for (int64_t ow = 0; ow < aw.out; ++ow) {
          const ResizeTaps& w = tw[ow];
          if (w.extrapolated) continue;
          const auto d = static_cast<double>(dyp[oh * aw.out + ow]);
          for (int i = 0; i < h.count; ++i)
            for (int j = 0; j < w.count; ++j)
              dxp[h.index[i] * aw.in + w.index[j]] += static_cast<T>(h.weight[i] * w.weight[j] * d);
        }
      }
    }
  });
}

class CpuResizeKernel final : public Kernel {
 public:
  explicit CpuResizeKernel(const KernelSpec& spec) : spec_(spec), sampling_(resize_sampling_of(spec)) {
    reference_ = cpu::reference_kernel(spec);  // checks the spec as the reference does
    gradient_ = spec.op_type == "ResizeGrad";
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &in = inputs[0], &out = outputs[0];
    const ResizePlan plan = plan_resize(spec_, sampling_, gradient_ ? out.sizes : in.sizes, inputs);
    if (plan.output_sizes() != (gradient_ ? in.sizes : out.sizes)) return reference_->run(stream, inputs, outputs);
    const int64_t planes = planes_of(plan);
    reference::dispatch_float(in.dtype, [&](auto zero) {
      using T = decltype(zero);
      const T* from = in.as<const T>();
      T* to = out.as<T>();
      if (planes > 0 && gradient_) return resize_grad_planes(plan, planes, from, to);
      if (planes > 0) return resize_planes(plan, planes, from, to, sampling_.extrapolation_value);
      const ResizeTaps* taps = plan.tables.taps.data();
      cpu::parallel_for(out.numel(), 4096, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          to[i] = gradient_ ? resize_gradient(plan.geometry, taps, plan.tables.reach.data(), from, i)
                            : resize_value(plan.geometry, taps, from, i, sampling_.extrapolation_value);
        }
      });
    });
  }

 private:
  KernelSpec spec_;
  ResizeSampling sampling_;
  std::unique_ptr<Kernel> reference_;  // reports sizes that disagree, in the reference's words
  bool gradient_ = false;
};

std::unique_ptr<Kernel> make_resize(const KernelSpec& spec) { return std::make_unique<CpuResizeKernel>(spec); }

}  // namespace

void register_cpu_resize_kernels(KernelRegistry& registry) {
  const std::vector<DType> dtypes = {DType::Float32, DType::Float64};
  registry.add(cpu::cpu_entry("Resize", dtypes, &make_resize));
  registry.add(cpu::cpu_entry("Upsample", dtypes, &make_resize));
  registry.add(cpu::cpu_training_entry("ResizeGrad", dtypes, &make_resize));
}

}  // namespace onnxtrain
