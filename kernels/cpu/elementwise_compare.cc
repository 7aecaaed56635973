// "cpu" kernels of the comparisons Equal, Less, LessOrEqual, Greater, GreaterOrEqual (float32 inputs,
// bool output), And (bool) and Where (bool condition, X/Y of any fixed-size dtype, copied as 1/2/4/8-byte
// words), on the BroadcastPlan engine: the ones the gradient rules emit. Bool elements are bytes, any
// non-zero byte true, and results are 0 or 1, like the reference kernels. Other dtypes run the reference.
// Or, Xor and Not stay on the reference kernels: no harness case (tests/gradient_cases/) has them, and
// every fast kernel must be compared with the reference there (GradientCoverage).
#include <cstring>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/elementwise_broadcast.h"

namespace onnxtrain {
namespace {

using namespace cpu;
using namespace cpu::elementwise;

struct EqualOp {
  uint8_t operator()(float a, float b) const { return a == b; }
};
struct LessOp {
  uint8_t operator()(float a, float b) const { return a < b; }
};
struct LessOrEqualOp {
  uint8_t operator()(float a, float b) const { return a <= b; }
};
struct GreaterOp {
  uint8_t operator()(float a, float b) const { return a > b; }
};
struct GreaterOrEqualOp {
  uint8_t operator()(float a, float b) const { return a >= b; }
};
struct AndOp {
  uint8_t operator()(uint8_t a, uint8_t b) const { return (a != 0) & (b != 0); }
};

template <typename Op>
std::unique_ptr<Kernel> make_comparison(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = elementwise_reference_kernel(spec);  // validates dtypes and sizes
  if (spec.inputs[0].dtype != DType::Float32) return fallback;
  return make_binary_kernel<float, float, uint8_t>(spec, Op{}, kCheapGrain, std::move(fallback));
}

template <typename Op>
std::unique_ptr<Kernel> make_logical(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = elementwise_reference_kernel(spec);
  return make_binary_kernel<uint8_t, uint8_t, uint8_t>(spec, Op{}, kCheapGrain, std::move(fallback));
}

// Where over words W of X's element size.
template <typename W>
class WhereKernel final : public Kernel {
  static W select(uint8_t condition, W x, W y) {
    const W mask = W{0} - static_cast<W>(condition != 0);
    return static_cast<W>((x & mask) | (y & ~mask));
  }

 public:
  explicit WhereKernel(BroadcastPlan plan) : plan_(plan) {}
  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const auto* c = inputs[0].as<const uint8_t>();
    const W* x = static_cast<const W*>(inputs[1].data);
    const W* y = static_cast<const W*>(inputs[2].data);
    W* out = static_cast<W*>(outputs[0].data);
    const bool sc = plan_.contiguous(0), sx = plan_.contiguous(1), sy = plan_.contiguous(2);
    plan_.for_each_segment(kCheapGrain, [&](const int64_t* offsets, int64_t o, int64_t n) {
      const uint8_t* cs = c + offsets[0];
      const W* xs = x + offsets[1];
      const W* ys = y + offsets[2];
      W* r = out + o;
      if (sc) {  // selects by bit masks, which GCC vectorises (a conditional load it does not)
        const W xv = *xs, yv = *ys;
        if (sx && sy) {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) r[i] = select(cs[i], xs[i], ys[i]);
        } else if (sx) {  // Y one value (a mask fill)
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) r[i] = select(cs[i], xs[i], yv);
        } else if (sy) {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) r[i] = select(cs[i], xv, ys[i]);
        } else {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i) r[i] = select(cs[i], xv, yv);
        }
      } else {  // one condition for the whole segment: a copy or a fill
        const W* source = *cs != 0 ? xs : ys;
        if (*cs != 0 ? sx : sy) {
          std::memcpy(r, source, static_cast<size_t>(n) * sizeof(W));
        } else {
          const W v = *source;
          for (int64_t i = 0; i < n; ++i) r[i] = v;
        }
      }
    });
  }

 private:
  BroadcastPlan plan_;
};

std::unique_ptr<Kernel> make_where(const KernelSpec& spec) {
  std::unique_ptr<Kernel> fallback = elementwise_reference_kernel(spec);
  BroadcastPlan plan(spec.outputs[0].sizes, {spec.inputs[0].sizes, spec.inputs[1].sizes, spec.inputs[2].sizes});
  if (!plan.supported()) return fallback;
  switch (dtype_size(spec.inputs[1].dtype)) {
    case 1:
      return std::make_unique<WhereKernel<uint8_t>>(plan);
    case 2:
      return std::make_unique<WhereKernel<uint16_t>>(plan);
    case 4:
      return std::make_unique<WhereKernel<uint32_t>>(plan);
    case 8:
      return std::make_unique<WhereKernel<uint64_t>>(plan);
    default:
      return fallback;
  }
}

}  // namespace

void register_cpu_elementwise_compare_kernels(KernelRegistry& registry) {
  const std::vector<DType> f32 = {DType::Float32};
  registry.add(cpu::cpu_entry("Equal", f32, &make_comparison<EqualOp>));
  registry.add(cpu::cpu_entry("Less", f32, &make_comparison<LessOp>));
  registry.add(cpu::cpu_entry("LessOrEqual", f32, &make_comparison<LessOrEqualOp>));
  registry.add(cpu::cpu_entry("Greater", f32, &make_comparison<GreaterOp>));
  registry.add(cpu::cpu_entry("GreaterOrEqual", f32, &make_comparison<GreaterOrEqualOp>));
  registry.add(cpu::cpu_entry("And", {DType::Bool}, &make_logical<AndOp>));
  registry.add(cpu::cpu_entry("Where", {DType::Bool}, &make_where));
}

}  // namespace onnxtrain
