// MaxPool, float32, 1 to 3 spatial axes: each output the first maximal element of its window (-inf for a
// window wholly in the padding), as kernels/reference/pooling.cc; the (n, c) planes split over the
// threads. The Indices output, other dtypes and more axes go to the reference kernel.
#include <immintrin.h>

#include <cstring>
#include <limits>
#include <vector>

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

// One pass over the window's taps for `span` starts, as a loop the compiler vectorises.
ONNXTRAIN_CPU_INLINE void running_argmax_loop(const float* x, const int64_t* rows, int64_t row_count, int32_t first,
                                              int32_t span, int64_t kernel_width, int64_t dilation, float* best_value,
                                              int32_t* best) {
  const auto start = static_cast<int32_t>(rows[0] + first);
#pragma omp simd
  for (int32_t i = 0; i < span; ++i) {
    best[i] = start + i;
    best_value[i] = x[start + i];
  }
  for (int64_t r = 0; r < row_count; ++r)
    for (int64_t kw = r == 0 ? 1 : 0; kw < kernel_width; ++kw) {
      const auto base = static_cast<int32_t>(rows[r] + first + kw * dilation);
      const float* xs = x + base;
#pragma omp simd
      for (int32_t i = 0; i < span; ++i) {
        const float v = xs[i];
        const bool take = v > best_value[i];
        best_value[i] = take ? v : best_value[i];
        best[i] = take ? base + i : best[i];
      }
    }
}

}  // namespace

// Declared in max_pool_window.h: strict `>` keeps the first maximal element (NaN first included), as the
// scalar search does. Blocks of 16 starts whose loads stay inside the plane keep their running maximum
// and position in registers across the taps (GCC vector types: one AVX-512 register, two AVX2 ones); the
// loop above stores them to memory after every tap, and its masked stores stall the next tap's loads
// (3x slower on ResNet's stem pool at 32x32).
ONNXTRAIN_CPU_CLONES void cpu::running_argmax(const float* x, const int64_t* rows, int64_t row_count, int32_t first,
                                              int32_t span, int64_t readable, int64_t kernel_width, int64_t dilation,
                                              float* best_value, int32_t* best) {
  using Floats = float __attribute__((vector_size(64)));
  using Ints = int32_t __attribute__((vector_size(64)));
  const Ints lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  int32_t i0 = 0;
  for (; i0 < span && i0 + 16 <= readable; i0 += 16) {
    const auto start = static_cast<int32_t>(rows[0] + first + i0);
    Floats best_values;
    std::memcpy(&best_values, x + start, sizeof best_values);
    Ints positions = start + lane;
    for (int64_t r = 0; r < row_count; ++r)
      for (int64_t kw = r == 0 ? 1 : 0; kw < kernel_width; ++kw) {
        const auto base = static_cast<int32_t>(rows[r] + first + kw * dilation + i0);
        Floats v;
        std::memcpy(&v, x + base, sizeof v);
        const Ints take = v > best_values;
        best_values = take ? v : best_values;
        positions = take ? base + lane : positions;
      }
    std::memcpy(best_value + i0, &best_values, sizeof best_values);
    std::memcpy(best + i0, &positions, sizeof positions);
  }
  if (i0 < span)
    running_argmax_loop(x, rows, row_count, first + i0, span - i0, kernel_width, dilation, best_value + i0, best + i0);
}

// Declared in max_pool_window.h. A row's NaNs are searched as -inf (x86's max returns its second operand
// where either is NaN), which never wins: only the first tap decides whether the row starts with a NaN.
// Along a row, a lane starts at its first tap inside the input and takes any later tap that is greater;
// down the window rows, the same. The compares that take a tap are the only chain from tap to tap (a mask
// built in general registers from the compare cost 3x). Masked loads never read past the row. AVX-512
// intrinsics: GCC's vector extensions turn the two-register shuffle with a run-time index into scalar code.
__attribute__((target("avx512f"))) void cpu::narrow_plane_argmax(const float* x, const MaxPoolWindow& w,
                                                                 NarrowPlaneScratch& scratch, float* values,
                                                                 int32_t* best) {
  const int64_t width = w.input[2];
  const auto low_lanes = static_cast<__mmask16>(width >= 16 ? 0xFFFF : (1u << width) - 1);
  const auto high_lanes = static_cast<__mmask16>(width >= 32 ? 0xFFFF : width > 16 ? (1u << (width - 16)) - 1 : 0);
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512i first_column = _mm512_loadu_si512(w.narrow_first_column.data());
  const __mmask16 valid = w.narrow_valid;
  for (int64_t r = 0; r < w.in_rows(); ++r) {
    const float* row = x + r * width;
    const __m512 low = _mm512_maskz_loadu_ps(low_lanes, row);
    const __m512 high = _mm512_maskz_loadu_ps(high_lanes, row + 16);
    const __m512 first = _mm512_permutex2var_ps(low, first_column, high);
    scratch.leading_nan[static_cast<size_t>(r)] = _mm512_mask_cmp_ps_mask(valid, first, first, _CMP_UNORD_Q);
    const __m512 low_searched = _mm512_max_ps(low, minus_inf), high_searched = _mm512_max_ps(high, minus_inf);
    __m512 row_best =
        _mm512_mask_mov_ps(minus_inf, valid, _mm512_permutex2var_ps(low_searched, first_column, high_searched));
    __m512i column_best = first_column;
    for (int64_t kw = 1; kw < w.kernel[2]; ++kw) {
      const __m512i column = _mm512_loadu_si512(w.narrow_columns.data() + kw * 16);
      const __m512 v = _mm512_permutex2var_ps(low_searched, column, high_searched);
      const __mmask16 take = _mm512_mask_cmp_ps_mask(w.narrow_later[kw], v, row_best, _CMP_GT_OQ);
      row_best = _mm512_mask_mov_ps(row_best, take, v);
      column_best = _mm512_mask_mov_epi32(column_best, take, column);
    }
    _mm512_storeu_ps(scratch.values.data() + r * 16, row_best);
    _mm512_storeu_si512(scratch.columns.data() + r * 16, column_best);
  }
  const int64_t out_width = w.output[2];
  const auto out_lanes = static_cast<__mmask16>(out_width >= 16 ? 0xFFFF : (1u << out_width) - 1);
  for (int64_t o = 0; o + 1 < static_cast<int64_t>(w.narrow_row_begin.size()); ++o) {
    const size_t begin = w.narrow_row_begin[o], end = w.narrow_row_begin[o + 1];
    __m512 window_best = minus_inf;
    __m512i position = _mm512_set1_epi32(-1);
    if (begin < end) {
      const int32_t r = w.narrow_window_rows[begin];
      const __m512i row_start = _mm512_set1_epi32(static_cast<int32_t>(r * width));
      window_best = _mm512_loadu_ps(scratch.values.data() + r * 16);
      position = _mm512_mask_add_epi32(position, valid, row_start, _mm512_loadu_si512(scratch.columns.data() + r * 16));
      for (size_t i = begin + 1; i < end; ++i) {
        const int32_t next = w.narrow_window_rows[i];
        const __m512 v = _mm512_loadu_ps(scratch.values.data() + next * 16);
        const __mmask16 take = _mm512_cmp_ps_mask(v, window_best, _CMP_GT_OQ);
        window_best = _mm512_mask_mov_ps(window_best, take, v);
        position = _mm512_mask_add_epi32(position, take, _mm512_set1_epi32(static_cast<int32_t>(next * width)),
                                         _mm512_loadu_si512(scratch.columns.data() + next * 16));
      }
      // A NaN first in the window is its result.
      const __mmask16 leading_nan = scratch.leading_nan[static_cast<size_t>(r)];
      if (leading_nan) {
        const __m512i at = _mm512_add_epi32(row_start, first_column);
        position = _mm512_mask_mov_epi32(position, leading_nan, at);
        window_best = _mm512_mask_i32gather_ps(window_best, leading_nan, at, x, 4);
      }
    }
    if (values) _mm512_mask_storeu_ps(values + o * out_width, out_lanes, window_best);
    if (best) _mm512_mask_storeu_epi32(best + o * out_width, out_lanes, position);
  }
}

namespace {

class MaxPoolKernel final : public Kernel {
 public:
  MaxPoolKernel(const cpu::MaxPoolWindow& w, int64_t planes) : w_(w), planes_(planes) {}

  void run(Stream&, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const float* x = inputs[0].as<const float>();
    float* y = outputs[0].as<float>();
    const int64_t in_plane = w_.in_plane(), out_plane = w_.out_plane();
    cpu::parallel_for(planes_, 4096 / (out_plane + 1) + 1, [&](int64_t begin, int64_t end) {
      if (w_.narrow && !w_.two_by_two()) {
        cpu::NarrowPlaneScratch scratch(w_);
        for (int64_t p = begin; p < end; ++p)
          cpu::narrow_plane_argmax(x + p * in_plane, w_, scratch, y + p * out_plane, nullptr);
        return;
      }
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
