// What the "cpu" MaxPool (max_pool.cc) and MaxPoolGrad (max_pool_grad.cc) share: the pool's window as
// three spatial axes (1-D and 2-D pools get leading axes of size 1) and the search of a window for its
// first maximal element, in window order, as the reference kernels pick it: the forward takes its value,
// the backward adds dY there. oneDNN's pooling on plain NCHW tensors is its scalar simple_nchw code
// (4.2 ms for the Fashion-MNIST CNN's first pool at batch 64, 81% of the step with the backward); these
// loop over each (n, c) plane with the window's range clipped to the input once per axis. Along the last
// axis, the windows wholly inside the input are searched 16 at a time in vector registers
// (running_argmax); only the border windows take the scalar search. ResNet's stem pool (3x3, stride 2,
// pads 1) on (16,64,112,112), one thread: 86.8 -> 7.6 ms forward, 91.2 -> 11.3 ms backward
// (cpu_losses_norm_bench --benchmark_filter=cpu/MaxPool, 2026-12-03).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "kernels/cpu/elementwise_isa.h"
#include "kernels/reference/window.h"

namespace onnxtrain::cpu {

// For `span` consecutive window starts from input position rows[0] + first (along the last axis): the
// first maximal element over the taps (rows[r] + first + kw·dilation + i) in window order, its value in
// best_value[i] and its position in best[i]. Vectorised across i (defined in max_pool.cc, with clones for
// AVX2 and AVX-512 picked at load time).
// Blocks of 16 starts are computed whole where `readable` (how many elements from the last tap's position
// of start 0 lie inside the plane) allows: best_value and best have room for span rounded up to 16.
void running_argmax(const float* x, const int64_t* rows, int64_t row_count, int32_t first, int32_t span,
                    int64_t readable, int64_t kernel_width, int64_t dilation, float* best_value, int32_t* best);

// Planes whose rows are at most kNarrowWidth wide and whose output rows at most 16 (ResNet's stem pool at
// 32x32 reads rows of 16) are searched separably in vector registers (narrow_plane_argmax, below).
inline constexpr int64_t kNarrowWidth = 32;
inline bool has_narrow_plane_argmax() { return elementwise::cpu_has_avx512f(); }

struct MaxPoolWindow {
  std::array<int64_t, 3> input{1, 1, 1}, output{1, 1, 1}, kernel{1, 1, 1};
  std::array<int64_t, 3> stride{1, 1, 1}, dilation{1, 1, 1}, pad_begin{0, 0, 0};
  int64_t in_plane() const { return input[0] * input[1] * input[2]; }
  int64_t out_plane() const { return output[0] * output[1] * output[2]; }

  // From the reference geometry of a pool with 1 to 3 spatial axes (false for more).
  static bool of(const reference::WindowGeometry& w, MaxPoolWindow& out) {
    const size_t n = w.spatial();
    if (n < 1 || n > 3) return false;
    for (size_t d = 0; d < n; ++d) {
      const size_t a = 3 - n + d;
      out.input[a] = w.input[d], out.output[a] = w.output[d], out.kernel[a] = w.kernel[d];
      out.stride[a] = w.strides[d], out.dilation[a] = w.dilations[d], out.pad_begin[a] = w.pad_begin[d];
    }
    if (out.kernel[0] * out.kernel[1] > kMaxRows || out.in_plane() >= (int64_t{1} << 31)) return false;
    out.compute_ranges();
    return true;
  }

  // Per axis and output position: the input position of the window's start and the kernel positions
  // [first, last) that fall inside the input, computed once (prepare), not per output element.
  struct AxisRange {
    int64_t start, first, last;
  };
  std::array<std::vector<AxisRange>, 3> ranges;

  // Output positions [interior_begin, interior_end) of the last axis whose windows lie inside the input
  // along it (empty when there are none).
  int64_t interior_begin = 0, interior_end = 0;
  // Planes searched by narrow_plane_argmax: per kw, the input column of each output column's tap
  // (kw·16 + output column) and the lanes inside at kw after an earlier tap (later); per output column
  // its first tap inside the input (-1 for none) and the lanes that have one (valid); per output row, the
  // input rows of its windows inside the input, in window order, as d·input[1] + h
  // (narrow_window_rows[narrow_row_begin[o], narrow_row_begin[o + 1])).
  bool narrow = false;
  std::vector<int32_t> narrow_columns;
  std::vector<uint16_t> narrow_later;
  std::array<int32_t, 16> narrow_first_column{};
  uint16_t narrow_valid = 0;
  std::vector<int32_t> narrow_window_rows;
  std::vector<size_t> narrow_row_begin;
  int64_t in_rows() const { return input[0] * input[1]; }

  void compute_ranges() {
    for (int a = 0; a < 3; ++a) {
      ranges[a].clear();
      for (int64_t o = 0; o < output[a]; ++o) {
        const int64_t start = o * stride[a] - pad_begin[a], step = dilation[a];
        const int64_t first = start >= 0 ? 0 : (-start + step - 1) / step;
        const int64_t last = std::min(kernel[a], input[a] - start > 0 ? (input[a] - start + step - 1) / step : 0);
        ranges[a].push_back({start, first, std::max(first, last)});
      }
    }
    narrow = input[2] <= kNarrowWidth && output[2] <= 16 && has_narrow_plane_argmax();
    if (narrow) compute_narrow_tables();
    interior_begin = output[2];
    interior_end = 0;
    for (int64_t o = 0; o < output[2]; ++o) {
      const AxisRange& r = ranges[2][o];
      if (r.first != 0 || r.last != kernel[2]) continue;
      interior_begin = std::min(interior_begin, o);
      interior_end = o + 1;
    }
    if (interior_end == 0) interior_begin = interior_end = 0;
  }

  // Calls visit(output offset, input offset of the window's first maximal element, or -1 for a window
  // wholly in the padding) for every output position of the plane `x`, in row-major order. The common
  // 2x2 window of stride 2 inside the input (CNNs' pools) takes the four elements directly.
  // A 2-D pool of 2x2 windows, stride 2, every window inside the input.
  bool two_by_two() const {
    return input[0] == 1 && kernel[0] == 1 && kernel[1] == 2 && kernel[2] == 2 && stride[1] == 2 && stride[2] == 2 &&
           dilation[1] == 1 && dilation[2] == 1 && pad_begin[1] == 0 && pad_begin[2] == 0 &&
           2 * output[1] <= input[1] && 2 * output[2] <= input[2];
  }

  template <typename Visit>
  void for_each_argmax(const float* x, Visit&& visit) const {
    if (two_by_two()) {
      const int64_t w = input[2];
      for (int64_t oh = 0, o = 0; oh < output[1]; ++oh)
        for (int64_t ow = 0; ow < output[2]; ++ow, ++o) {
          int64_t best = 2 * oh * w + 2 * ow;  // the window's elements in window order: a b / c d
          if (x[best + 1] > x[best]) best = best + 1;
          if (x[2 * oh * w + w + 2 * ow] > x[best]) best = 2 * oh * w + w + 2 * ow;
          if (x[2 * oh * w + w + 2 * ow + 1] > x[best]) best = 2 * oh * w + w + 2 * ow + 1;
          visit(o, best);
        }
      return;
    }
    int64_t o = 0;
    for (const AxisRange& d : ranges[0])
      for (const AxisRange& h : ranges[1]) {
        // The offsets of the window rows (kd, kh) inside the input, in window order.
        int64_t rows[kMaxRows];
        int64_t row_count = 0;
        for (int64_t kd = d.first; kd < d.last; ++kd)
          for (int64_t kh = h.first; kh < h.last; ++kh) rows[row_count++] = input_row(d, kd, h, kh) * input[2];
        const auto scalar = [&](int64_t ow) {
          const AxisRange& wr = ranges[2][ow];
          int64_t best = -1;
          for (int64_t r = 0; r < row_count; ++r)
            for (int64_t kw = wr.first; kw < wr.last; ++kw) {
              const int64_t at = rows[r] + wr.start + kw * dilation[2];
              if (best < 0 || x[at] > x[best]) best = at;
            }
          visit(o++, best);
        };
        int64_t ow = 0;
        for (; ow < std::min(interior_begin, output[2]); ++ow) scalar(ow);
        while (row_count > 0 && ow < interior_end) ow = argmax_chunk(x, rows, row_count, ow, visit, o);
        for (; ow < output[2]; ++ow) scalar(ow);
      }
  }

 private:
  // The input row (d·input[1] + h) that window row (kd, kh) of the windows at (d, h) reads.
  int64_t input_row(const AxisRange& d, int64_t kd, const AxisRange& h, int64_t kh) const {
    return (d.start + kd * dilation[0]) * input[1] + h.start + kh * dilation[1];
  }

  void compute_narrow_tables() {
    narrow_columns.assign(static_cast<size_t>(kernel[2]) * 16, 0);
    narrow_later.assign(static_cast<size_t>(kernel[2]), 0);
    narrow_first_column.fill(-1);
    uint16_t seen = 0;
    for (int64_t kw = 0; kw < kernel[2]; ++kw) {
      uint16_t inside = 0;
      for (int64_t ow = 0; ow < output[2]; ++ow) {
        const int64_t column = ranges[2][ow].start + kw * dilation[2];
        if (column < 0 || column >= input[2]) continue;
        narrow_columns[static_cast<size_t>(kw * 16 + ow)] = static_cast<int32_t>(column);
        inside |= static_cast<uint16_t>(1u << ow);
        if (!(seen & (1u << ow))) narrow_first_column[static_cast<size_t>(ow)] = static_cast<int32_t>(column);
      }
      narrow_later[static_cast<size_t>(kw)] = static_cast<uint16_t>(inside & seen);
      seen |= inside;
    }
    narrow_valid = seen;
    narrow_window_rows.clear();
    narrow_row_begin.assign(1, 0);
    for (const AxisRange& d : ranges[0])
      for (const AxisRange& h : ranges[1]) {
        for (int64_t kd = d.first; kd < d.last; ++kd)
          for (int64_t kh = h.first; kh < h.last; ++kh)
            narrow_window_rows.push_back(static_cast<int32_t>(input_row(d, kd, h, kh)));
        narrow_row_begin.push_back(narrow_window_rows.size());
      }
  }

  static constexpr int64_t kSpan = 64;       // window starts one vectorised chunk covers
  static constexpr int64_t kMaxRows = 1024;  // window rows (kd, kh) of one output row; `of` refuses more

  // Outputs from `ow` of one output row, whose windows lie inside the input along the last axis, as many
  // as have their window starts within kSpan consecutive input positions: the running maximum and its
  // position over the window's taps in window order, for every start in that range (stride 1, so the
  // loads are contiguous and the loop vectorises; a stride of s computes s times the windows needed and
  // keeps every s-th). Strict `>` keeps the first maximal element, NaN first included, as the scalar
  // search. Positions are int32 (`of` refuses planes of 2^31 elements). Returns the end.
  template <typename Visit>
  int64_t argmax_chunk(const float* x, const int64_t* rows, int64_t row_count, int64_t ow, Visit& visit,
                       int64_t& o) const {
    const int64_t s = stride[2];
    const int64_t end = std::min(interior_end, ow + (kSpan - 1) / s + 1);
    const int64_t span = (end - 1 - ow) * s + 1, first = ow * s - pad_begin[2];
    float best_value[kSpan + 16];
    int32_t best[kSpan + 16];
    const int64_t readable = in_plane() - (rows[row_count - 1] + first + (kernel[2] - 1) * dilation[2]);
    running_argmax(x, rows, row_count, static_cast<int32_t>(first), static_cast<int32_t>(span), readable, kernel[2],
                   dilation[2], best_value, best);
    for (int64_t i = 0; i < span; i += s) visit(o++, int64_t{best[i]});
    return end;
  }
};

// A plane of a narrow window (MaxPoolWindow::narrow) searched separably: first each input row, for every
// output column at once (one lane each), for the first maximal of that column's taps in the row, NaN
// skipped; then each output row's window rows, in window order, for the first maximal of those row
// results. That is the window's first maximal element in window order: strict `>` at both steps keeps the
// earlier row, and within it the earlier column. NaN never wins a comparison, so a window keeps a NaN only
// where it is its first element: the row search records whether the row's first tap was NaN, and the
// window takes it where that row is its first. An input row is searched once however many windows read
// it, and the rows' searches are independent: a search window by window chained its taps' compares.
// ResNet-18's stem pool at 32x32, batch 32, one thread (cpu_losses_norm_bench, interleaved, 2026-12-05):
// 0.67-0.87 -> 0.26-0.42 ms forward, 1.07-1.33 -> 0.37-0.54 ms backward, near this host's memory speed. Writes the
// window maxima to `values` (-inf for a window wholly in the padding) and their positions in the plane to `best` (-1
// there), each out_plane() long and each may be null. AVX-512 only (has_narrow_plane_argmax()); defined in max_pool.cc.
struct NarrowPlaneScratch {  // the row searches' results, 16 lanes per input row
  explicit NarrowPlaneScratch(const MaxPoolWindow& w)
      : values(static_cast<size_t>(w.in_rows()) * 16),
        columns(values.size()),
        leading_nan(static_cast<size_t>(w.in_rows())) {}
  std::vector<float> values;
  std::vector<int32_t> columns;
  std::vector<uint16_t> leading_nan;  // the lanes whose first tap in the row is NaN
};
void narrow_plane_argmax(const float* x, const MaxPoolWindow& w, NarrowPlaneScratch& scratch, float* values,
                         int32_t* best);

}  // namespace onnxtrain::cpu
