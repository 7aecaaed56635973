// Pad (every opset and mode the reference kernel takes) and PadGrad (ai.onnxtrain), planned again only when
// the sizes or the pads/axes values change. The plan collapses dims Pad leaves alone, tabulates once per dim
// which input index each output index reads (pad_mode.h's rule), and keeps the last dim as a left border,
// a contiguous interior (one memcpy per row) and a right border. Pad runs over output rows; PadGrad over
// dX rows, each summing the dY rows that read it (inverse tables), in the reference kernel's order; in
// constant mode without crops dX is dY's interior, one StridedCopy.
#include <algorithm>
#include <optional>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/data_movement.h"
#include "kernels/reference/element_convert.h"
#include "kernels/reference/pad_mode.h"

namespace onnxtrain {

namespace {

using namespace cpu;
using reference::PadMode;

constexpr int kPadInputsSince = 11;
constexpr int kAxesSince = 18;
constexpr int kPadMaxRank = 32;

struct PadGeometry {
  int rank = 0;  // collapsed dims; the last is the row
  std::vector<int64_t> in, out;
  // Outer dims: source[k][i] = the input element offset (index * input stride) output index i reads, -1 for
  // the constant; readers[k] lists, for each input index x, the output indices reading it (increasing),
  // from readers_at[k][x] to readers_at[k][x + 1].
  std::vector<std::vector<int64_t>> source, readers, readers_at;
  // The last dim: output [lo, hi) reads input [lo - begin, hi - begin); left/right: the input index of
  // output [0, lo) and [hi, out), -1 for the constant.
  int64_t begin = 0, lo = 0, hi = 0;
  std::vector<int64_t> left, right;

  int64_t in_rows() const { return reference::product_of(in, 0, rank - 1); }
  int64_t out_rows() const { return reference::product_of(out, 0, rank - 1); }

  // false when more than kPadMaxRank dims remain.
  bool build(const std::vector<int64_t>& in_sizes, const std::vector<int64_t>& out_sizes,
             const std::vector<int64_t>& begins, PadMode mode) {
    struct Dim {
      int64_t in, out, begin;
    };
    std::vector<Dim> dims;
    for (size_t k = 0; k < in_sizes.size(); ++k) {
      const Dim d{in_sizes[k], out_sizes[k], begins[k]};
      const bool untouched = d.begin == 0 && d.out == d.in;
      const bool previous_untouched = !dims.empty() && dims.back().begin == 0 && dims.back().out == dims.back().in;
      if (!dims.empty() && untouched && (previous_untouched || mode == PadMode::Constant)) {
        dims.back() = {dims.back().in * d.in, dims.back().out * d.in, dims.back().begin * d.in};
      } else {
        dims.push_back(d);
      }
    }
    if (dims.empty()) dims.push_back({1, 1, 0});  // a scalar
    if (dims.size() > kPadMaxRank) return false;
    rank = static_cast<int>(dims.size());
    in.clear();
    out.clear();
    for (const Dim& d : dims) {
      in.push_back(d.in);
      out.push_back(d.out);
    }
    const std::vector<int64_t> strides = reference::row_major_strides(in);
    source.assign(rank - 1, {});
    readers.assign(rank - 1, {});
    readers_at.assign(rank - 1, {});
    for (int k = 0; k + 1 < rank; ++k) {
      std::vector<int64_t> index(dims[k].out);
      readers_at[k].assign(dims[k].in + 1, 0);
      for (int64_t i = 0; i < dims[k].out; ++i) {
        index[i] = reference::pad_source_index(i - dims[k].begin, dims[k].in, mode);
        source[k].push_back(index[i] < 0 ? -1 : index[i] * strides[k]);
        if (index[i] >= 0) ++readers_at[k][index[i] + 1];
      }
      for (int64_t x = 0; x < dims[k].in; ++x) readers_at[k][x + 1] += readers_at[k][x];
      readers[k].resize(readers_at[k].back());
      std::vector<int64_t> fill(readers_at[k].begin(), readers_at[k].end() - 1);
      for (int64_t i = 0; i < dims[k].out; ++i)
        if (index[i] >= 0) readers[k][fill[index[i]]++] = i;
    }
    const Dim& last = dims.back();
    begin = last.begin;
    lo = std::clamp<int64_t>(last.begin, 0, last.out);
    hi = std::max(lo, std::clamp<int64_t>(last.begin + last.in, 0, last.out));
    left.clear();
    right.clear();
    for (int64_t i = 0; i < lo; ++i) left.push_back(reference::pad_source_index(i - begin, last.in, mode));
    for (int64_t i = hi; i < last.out; ++i) right.push_back(reference::pad_source_index(i - begin, last.in, mode));
    return true;
  }
};

class PadKernel final : public CpuDataMovementKernel {
 public:
  explicit PadKernel(const KernelSpec& spec) : CpuDataMovementKernel(spec) {
    mode_ = reference::read_pad_mode(spec);
    if (spec.opset < kPadInputsSince) {
      pads_attribute_ = spec.opset <= 1 && spec.attributes.has("paddings") ? "paddings" : "pads";
      Tensor constant(spec.inputs[0].dtype, {1});
      reference::store_double(TensorView::of(constant), 0, spec.attributes.get_float("value", 0.0));
      std::memcpy(&constant_, constant.raw(), reference::element_bytes(spec.inputs[0].dtype));
    }
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const bool from_inputs = spec_.opset >= kPadInputsSince;
    if (from_inputs ? key_.changed(inputs, outputs, {1, 3}) : key_.changed(inputs, outputs, {})) {
      valid_ = false;
      valid_ = plan(inputs, outputs[0].sizes);
    }
    if (!valid_) return run_reference(stream, inputs, outputs);
    const size_t element = reference::element_bytes(inputs[0].dtype);
    uint64_t constant = constant_;
    if (const TensorView* given = from_inputs ? reference::optional_input(inputs, 2) : nullptr;
        given && given->numel() > 0) {
      std::memcpy(&constant, given->data, element);
    }
    dispatch_bytes(element, [&](auto zero) {
      using T = decltype(zero);
      T value;
      std::memcpy(&value, &constant, sizeof(T));
      pad(inputs[0].as<const T>(), outputs[0].as<T>(), value);
    });
  }

 private:
  bool plan(std::span<const TensorView> inputs, const std::vector<int64_t>& out) {
    const std::vector<int64_t>& in = inputs[0].sizes;
    const auto rank = static_cast<int64_t>(in.size());
    const bool from_inputs = spec_.opset >= kPadInputsSince;
    const std::vector<int64_t> pads =
        from_inputs ? reference::read_int_values(inputs[1]) : spec_.attributes.get_ints(pads_attribute_);
    std::vector<int64_t> axes;
    const TensorView* axes_input =
        from_inputs && spec_.opset >= kAxesSince ? reference::optional_input(inputs, 3) : nullptr;
    if (axes_input) {
      for (int64_t axis : reference::read_int_values(*axes_input)) {
        const std::optional<int64_t> normalized = reference::normalized_axis(axis, rank);
        if (!normalized) return false;
        axes.push_back(*normalized);
      }
    } else {
      for (int64_t k = 0; k < rank; ++k) axes.push_back(k);
    }
    if (pads.size() != 2 * axes.size()) return false;
    std::vector<int64_t> begins(rank, 0), sizes = in;
    for (size_t j = 0; j < axes.size(); ++j) {
      begins[axes[j]] = pads[j];
      sizes[axes[j]] += pads[j] + pads[j + axes.size()];
      if (sizes[axes[j]] < 0) return false;
    }
    return sizes == out && geometry_.build(in, sizes, begins, mode_);
  }

  template <typename T>
  void pad(const T* x, T* y, T value) const {
    const PadGeometry& g = geometry_;
    const int outer = g.rank - 1;
    const int64_t width = g.out.back(), rows = g.out_rows();
    if (width == 0 || rows == 0) return;
    const int64_t lo = g.lo, hi = g.hi, shift = g.lo - g.begin;
    const int64_t* left = g.left.data();
    const int64_t* right = g.right.data();
    const int64_t* source[kPadMaxRank];
    for (int k = 0; k < outer; ++k) source[k] = g.source[k].data();
    const int64_t grain = std::max<int64_t>(1, kCopyGrainBytes / (width * static_cast<int64_t>(sizeof(T))));
    parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
      int64_t index[kPadMaxRank];
      for (int64_t flat = begin, k = outer - 1; k >= 0; --k) {
        index[k] = flat % g.out[k];
        flat /= g.out[k];
      }
      for (int64_t r = begin; r < end; ++r) {
        T* row = y + r * width;
        int64_t offset = 0;
        for (int k = 0; k < outer && offset >= 0; ++k)
          offset = source[k][index[k]] < 0 ? -1 : offset + source[k][index[k]];
        if (offset < 0) {
#pragma omp simd
          for (int64_t i = 0; i < width; ++i) row[i] = value;
        } else {
          const T* from = x + offset;
          for (int64_t i = 0; i < lo; ++i) row[i] = left[i] < 0 ? value : from[left[i]];
          if (hi > lo) std::memcpy(row + lo, from + shift, (hi - lo) * sizeof(T));
          for (int64_t i = hi; i < width; ++i) row[i] = right[i - hi] < 0 ? value : from[right[i - hi]];
        }
        for (int k = outer - 1; k >= 0; --k) {
          if (++index[k] < g.out[k]) break;
          index[k] = 0;
        }
      }
    });
  }

  PadMode mode_ = PadMode::Constant;
  std::string pads_attribute_ = "pads";
  uint64_t constant_ = 0;  // the bytes of the `value` attribute (before opset 11) or zero
  RunKey key_;
  bool valid_ = false;
  PadGeometry geometry_;
};

class PadGradKernel final : public CpuDataMovementKernel {
 public:
  explicit PadGradKernel(const KernelSpec& spec) : CpuDataMovementKernel(spec) {
    mode_ = reference::read_pad_mode(spec);
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &dy = inputs[0], &dx = outputs[0];
    if (key_.changed(inputs, outputs, {1, 2})) {
      valid_ = false;
      valid_ = plan(inputs, dx.sizes);
    }
    if (!valid_) return run_reference(stream, inputs, outputs);
    if (crop_) return crop_->run(dy.data, dx.data);
    reference::dispatch_float(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      pad_grad(dy.as<const T>(), dx.as<T>());
    });
  }

 private:
  bool plan(std::span<const TensorView> inputs, const std::vector<int64_t>& in) {
    if (reference::read_int_values(inputs[1]) != in) return false;
    const auto rank = static_cast<int64_t>(in.size());
    const std::vector<int64_t> pads = reference::read_int_values(inputs[2]);
    if (static_cast<int64_t>(pads.size()) != 2 * rank) return false;
    std::vector<int64_t> sizes = in;
    for (int64_t k = 0; k < rank; ++k) sizes[k] += pads[k] + pads[k + rank];
    if (inputs[0].sizes != sizes) return false;
    if ((mode_ == PadMode::Reflect || mode_ == PadMode::Wrap) && inputs[0].numel() > 0) {
      for (int64_t k = 0; k < rank; ++k)
        if (in[k] == 0 && sizes[k] > 0) return false;
    }
    // Constant mode without crops: dX is the interior of dY, one strided copy (bit-exact but for a -0 in dY,
    // which stays -0 where the reference kernel's 0 + dY gives +0).
    crop_.reset();
    if (mode_ == PadMode::Constant && std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p >= 0; })) {
      const std::vector<int64_t> dy_strides = reference::row_major_strides(sizes);
      int64_t base = 0;
      for (int64_t k = 0; k < rank; ++k) base += pads[k] * dy_strides[k];
      crop_.emplace();
      if (StridedCopy::plan(reference::element_bytes(inputs[0].dtype), in, dy_strides, reference::row_major_strides(in),
                            base, 0, *crop_))
        return true;
      crop_.reset();
    }
    return geometry_.build(in, sizes, std::vector<int64_t>(pads.begin(), pads.begin() + rank), mode_);
  }

  // dX row by dX row: zero it, then add every dY row that reads it (the product of the outer dims' reader
  // lists, in increasing dY order), each row's border and interior elements in increasing dY order.
  template <typename T>
  void pad_grad(const T* dy, T* dx) const {
    const PadGeometry& g = geometry_;
    const int outer = g.rank - 1;
    const int64_t width = g.in.back(), dy_width = g.out.back(), rows = g.in_rows();
    if (width == 0 || rows == 0) return;
    const int64_t lo = g.lo, hi = g.hi, shift = g.lo - g.begin;
    int64_t dy_row_stride[kPadMaxRank];  // dY rows per step of outer dim k
    const int64_t *readers_at[kPadMaxRank], *readers[kPadMaxRank];
    for (int64_t k = outer - 1, stride = 1; k >= 0; --k) {
      dy_row_stride[k] = stride;
      stride *= g.out[k];
      readers_at[k] = g.readers_at[k].data();
      readers[k] = g.readers[k].data();
    }
    const int64_t* left = g.left.data();
    const int64_t* right = g.right.data();
    const int64_t grain = std::max<int64_t>(1, 16 * 1024 / std::max<int64_t>(1, dy_width));
    parallel_for(rows, grain, [&](int64_t begin, int64_t end) {
      int64_t index[kPadMaxRank], pick[kPadMaxRank], first[kPadMaxRank], count[kPadMaxRank];
      for (int64_t flat = begin, k = outer - 1; k >= 0; --k) {
        index[k] = flat % g.in[k];
        flat /= g.in[k];
      }
      for (int64_t r = begin; r < end; ++r) {
        T* to = dx + r * width;
        std::fill(to, to + width, T(0));
        bool any = true;
        for (int k = 0; k < outer; ++k) {
          first[k] = readers_at[k][index[k]];
          count[k] = readers_at[k][index[k] + 1] - first[k];
          pick[k] = 0;
          any = any && count[k] > 0;
        }
        while (any) {
          int64_t dy_row = 0;
          for (int k = 0; k < outer; ++k) dy_row += readers[k][first[k] + pick[k]] * dy_row_stride[k];
          const T* from = dy + dy_row * dy_width;
          for (int64_t i = 0; i < lo; ++i)
            if (left[i] >= 0) to[left[i]] += from[i];
          T* interior = to + shift;
          const T* read = from + lo;
#pragma omp simd
          for (int64_t i = 0; i < hi - lo; ++i) interior[i] += read[i];
          for (int64_t i = hi; i < dy_width; ++i)
            if (right[i - hi] >= 0) to[right[i - hi]] += from[i];
          int k = outer - 1;  // the next combination, the last dim fastest
          for (; k >= 0; --k) {
            if (++pick[k] < count[k]) break;
            pick[k] = 0;
          }
          any = k >= 0;
        }
        for (int k = outer - 1; k >= 0; --k) {
          if (++index[k] < g.in[k]) break;
          index[k] = 0;
        }
      }
    });
  }

  PadMode mode_ = PadMode::Constant;
  RunKey key_;
  bool valid_ = false;
  std::optional<StridedCopy> crop_;  // constant mode without crops
  PadGeometry geometry_;
};

}  // namespace

void register_cpu_pad_kernels(KernelRegistry& registry) {
  registry.add(cpu_entry("Pad", reference::kFixedSizeDTypes, reference::make_kernel<PadKernel>));
  registry.add(cpu_training_entry("PadGrad", reference::kFloatDTypes, reference::make_kernel<PadGradKernel>));
}

}  // namespace onnxtrain
