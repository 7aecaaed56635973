// The numpy-broadcasting engine of the "cpu" elementwise kernels (Add … Where, PRelu): at prepare time the
// output shape and each input's strides (0 where it broadcasts) are coalesced into as few dims as
// possible; at run time the flat output range is split across threads and walked as contiguous segments
// of the innermost dim, in which every input either steps by one element or stays on one (scalar
// broadcast). The odometer over the outer dims advances once per segment, never per element.
//
//   BroadcastPlan plan(out_sizes, {a.sizes, b.sizes});
//   plan.for_each_segment(/*grain=*/32768, [&](const int64_t* in_offsets, int64_t out_offset, int64_t n) {
//     binary_segment(a + in_offsets[0], plan.contiguous(0), b + in_offsets[1], plan.contiguous(1),
//                    y + out_offset, n, op);
//   });
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/cpu_common.h"
#include "kernels/cpu/elementwise_isa.h"
#include "kernels/onednn/reference_fallback.h"

namespace onnxtrain::cpu::elementwise {  // a namespace of its own: other cpu families have helpers too

class BroadcastPlan {
 public:
  static constexpr int kMaxInputs = 3;
  static constexpr int kMaxOuterDims = 8;

  // `inputs` broadcast onto `out` (numpy rules, already checked by the caller).
  BroadcastPlan(const std::vector<int64_t>& out, const std::vector<std::vector<int64_t>>& inputs)
      : inputs_(static_cast<int>(inputs.size())) {
    const size_t rank = out.size();
    std::vector<std::vector<int64_t>> strides(inputs.size(), std::vector<int64_t>(rank, 0));
    for (size_t k = 0; k < inputs.size(); ++k) {
      const std::vector<int64_t>& in = inputs[k];
      int64_t stride = 1;
      for (size_t i = in.size(); i-- > 0;) {
        strides[k][rank - in.size() + i] = in[i] == 1 ? 0 : stride;
        stride *= in[i];
      }
    }
    // Innermost first: drop size-1 dims, merge a dim into the one inside it when every input allows it.
    std::vector<int64_t> sizes;  // innermost first
    std::vector<std::vector<int64_t>> merged(inputs.size());
    for (size_t d = rank; d-- > 0;) {
      if (out[d] == 1) continue;
      bool merge = !sizes.empty();
      for (size_t k = 0; merge && k < inputs.size(); ++k) merge = strides[k][d] == merged[k].back() * sizes.back();
      if (merge) {
        sizes.back() *= out[d];
        continue;
      }
      sizes.push_back(out[d]);
      for (size_t k = 0; k < inputs.size(); ++k) merged[k].push_back(strides[k][d]);
    }
    numel_ = 1;
    for (int64_t s : out) numel_ *= s;
    if (sizes.empty()) {  // a scalar (or all sizes 1)
      sizes.push_back(1);
      for (auto& m : merged) m.push_back(0);
    }
    inner_ = sizes[0];
    for (size_t k = 0; k < inputs.size(); ++k) contiguous_[k] = merged[k][0] != 0;
    outer_rank_ = static_cast<int>(sizes.size()) - 1;
    supported_ = outer_rank_ <= kMaxOuterDims && inputs.size() <= kMaxInputs;
    if (!supported_) return;
    for (int d = 0; d < outer_rank_; ++d) {  // outermost first
      const size_t from = sizes.size() - 1 - static_cast<size_t>(d);
      outer_sizes_[d] = sizes[from];
      for (size_t k = 0; k < inputs.size(); ++k) outer_strides_[k][d] = merged[k][from];
    }
  }

  // False when the coalesced shape has more dims (or the op more inputs) than the engine takes.
  bool supported() const { return supported_; }
  int64_t numel() const { return numel_; }
  int64_t inner() const { return inner_; }
  int outer_rank() const { return outer_rank_; }
  // Whether input k steps through the innermost dim (else it stays on one element there).
  bool contiguous(int k) const { return contiguous_[k]; }

  // Calls fn(in_offsets, out_offset, n) for contiguous output segments covering every element, from
  // OpenMP threads in chunks of at least `grain` elements; in_offsets[k] is input k's element offset.
  template <typename Fn>
  void for_each_segment(int64_t grain, Fn&& fn) const {
    parallel_for(numel_, grain, [&](int64_t begin, int64_t end) {
      std::array<int64_t, kMaxOuterDims> index{};
      std::array<int64_t, kMaxInputs> base{};
      int64_t row = begin / inner_;
      int64_t col = begin - row * inner_;
      for (int d = outer_rank_ - 1; d >= 0; --d) {  // one division per dim per chunk
        index[d] = row % outer_sizes_[d];
        row /= outer_sizes_[d];
        for (int k = 0; k < inputs_; ++k) base[k] += index[d] * outer_strides_[k][d];
      }
      std::array<int64_t, kMaxInputs> offsets{};
      for (int64_t pos = begin; pos < end;) {
        const int64_t n = std::min(inner_ - col, end - pos);
        for (int k = 0; k < inputs_; ++k) offsets[k] = base[k] + (contiguous_[k] ? col : 0);
        fn(offsets.data(), pos, n);
        pos += n;
        col = 0;
        for (int d = outer_rank_ - 1; d >= 0; --d) {  // odometer over the outer dims
          for (int k = 0; k < inputs_; ++k) base[k] += outer_strides_[k][d];
          if (++index[d] < outer_sizes_[d]) break;
          for (int k = 0; k < inputs_; ++k) base[k] -= outer_strides_[k][d] * outer_sizes_[d];
          index[d] = 0;
        }
      }
    });
  }

 private:
  int inputs_ = 0;
  bool supported_ = true;
  int64_t numel_ = 0;
  int64_t inner_ = 1;
  int outer_rank_ = 0;
  std::array<bool, kMaxInputs> contiguous_{};
  std::array<int64_t, kMaxOuterDims> outer_sizes_{};
  std::array<std::array<int64_t, kMaxOuterDims>, kMaxInputs> outer_strides_{};
};

// c ? p : q by bit masks. GCC (under its default -ftrapping-math) does not vectorise a `?:` whose arm
// has a floating-point operation of its own; with this both arms are computed and the loop vectorises.
inline float select_float(bool c, float p, float q) {
  const uint32_t mask = uint32_t{0} - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(p) & mask) | (std::bit_cast<uint32_t>(q) & ~mask));
}

// y[i] = op(a[i], b[i]) over one segment, with a and/or b held on one element when not contiguous.
template <typename A, typename B, typename Y, typename Op>
__attribute__((always_inline)) inline void binary_segment_loops(const A* a, bool a_contiguous, const B* b,
                                                                bool b_contiguous, Y* y, int64_t n, const Op& op) {
  if (a_contiguous && b_contiguous) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = op(a[i], b[i]);
  } else if (a_contiguous) {
    const B bv = *b;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = op(a[i], bv);
  } else if (b_contiguous) {
    const A av = *a;
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) y[i] = op(av, b[i]);
  } else {
    const Y v = op(*a, *b);
    for (int64_t i = 0; i < n; ++i) y[i] = v;
  }
}

template <typename A, typename B, typename Y, typename Op>
ONNXTRAIN_ELEMENTWISE_AVX2 void binary_segment_avx2(const A* a, bool a_contiguous, const B* b, bool b_contiguous, Y* y,
                                                    int64_t n, const Op& op) {
  binary_segment_loops(a, a_contiguous, b, b_contiguous, y, n, op);
}

template <typename A, typename B, typename Y, typename Op>
inline void binary_segment(const A* a, bool a_contiguous, const B* b, bool b_contiguous, Y* y, int64_t n,
                           const Op& op) {
  if (use_avx2) return binary_segment_avx2(a, a_contiguous, b, b_contiguous, y, n, op);
  binary_segment_loops(a, a_contiguous, b, b_contiguous, y, n, op);
}

// Elements per thread chunk: memory-bound ops need big chunks to be worth a thread; transcendental
// ones (pow, log, erf) smaller.
inline constexpr int64_t kCheapGrain = 32768;
inline constexpr int64_t kMathGrain = 4096;

// The reference kernel for a configuration the cpu kernel does not take (other dtypes, odd ranks).
inline std::unique_ptr<Kernel> elementwise_reference_kernel(const KernelSpec& spec) {
  return onednn::reference_kernel(spec);
}

// A prepared two-input broadcasting kernel: y = op(a, b), elements A, B -> Y (float -> bool for the
// comparisons, bytes for the logical ops).
template <typename A, typename B, typename Y, typename Op>
class BinaryKernel final : public Kernel {
 public:
  BinaryKernel(BroadcastPlan plan, Op op, int64_t grain) : plan_(plan), op_(op), grain_(grain) {}
  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const A* a = inputs[0].as<const A>();
    const B* b = inputs[1].as<const B>();
    Y* y = outputs[0].as<Y>();
    const bool ca = plan_.contiguous(0), cb = plan_.contiguous(1);
    plan_.for_each_segment(grain_, [&](const int64_t* offsets, int64_t out, int64_t n) {
      binary_segment(a + offsets[0], ca, b + offsets[1], cb, y + out, n, op_);
    });
  }

 private:
  BroadcastPlan plan_;
  Op op_;
  int64_t grain_;
};

// The BinaryKernel of spec (inputs 0 and 1 onto output 0), or `fallback` when the plan cannot take it.
template <typename A, typename B, typename Y, typename Op>
std::unique_ptr<Kernel> make_binary_kernel(const KernelSpec& spec, Op op, int64_t grain,
                                           std::unique_ptr<Kernel> fallback) {
  BroadcastPlan plan(spec.outputs[0].sizes, {spec.inputs[0].sizes, spec.inputs[1].sizes});
  if (!plan.supported()) return fallback;
  return std::make_unique<BinaryKernel<A, B, Y, Op>>(plan, op, grain);
}

}  // namespace onnxtrain::cpu::elementwise
