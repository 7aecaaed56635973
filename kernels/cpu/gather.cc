// Gather (every opset the reference kernel takes) and GatherGrad (ai.onnxtrain). Gather copies whole rows
// (the elements after `axis`) with memcpy, split by rows over the threads: the embedding case, (V, D) data
// gathered by (N, S) ids, is N * S row copies of D elements. GatherGrad zeroes dX, then adds dY's rows into
// the rows its indices name; the threads split the columns (and the blocks before `axis`), never the
// indices, so repeated indices never race and every element sums in the reference kernel's order.
#include <algorithm>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/data_movement.h"

namespace onnxtrain {

namespace {

using namespace cpu;

// Elements before `axis`, along it, and after it.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};

AxisSplit split_at(const std::vector<int64_t>& sizes, int64_t axis) {
  AxisSplit s{reference::product_of(sizes, 0, axis), sizes[axis], reference::product_of(sizes, axis + 1)};
  return s;
}

// Sizes of Gather's output (GatherGrad's dY): data sizes with `axis` replaced by the indices' sizes.
std::vector<int64_t> gathered_sizes(const std::vector<int64_t>& sizes, const std::vector<int64_t>& indices,
                                    int64_t axis) {
  std::vector<int64_t> out(sizes.begin(), sizes.begin() + axis);
  out.insert(out.end(), indices.begin(), indices.end());
  out.insert(out.end(), sizes.begin() + axis + 1, sizes.end());
  return out;
}

// Whether every index lies in [-n, n).
template <typename I>
bool indices_in_range(const I* indices, int64_t count, int64_t n) {
  bool bad = false;
#pragma omp simd reduction(| : bad)
  for (int64_t j = 0; j < count; ++j) bad |= (indices[j] < -n) | (indices[j] >= n);
  return !bad;
}

bool indices_in_range(const TensorView& indices, int64_t n) {
  return indices.dtype == DType::Int32 ? indices_in_range(indices.as<const int32_t>(), indices.numel(), n)
                                       : indices_in_range(indices.as<const int64_t>(), indices.numel(), n);
}

template <typename I>
int64_t wrapped(I index, int64_t n) {
  return index < 0 ? index + n : index;
}

class GatherKernel final : public CpuDataMovementKernel {
 public:
  explicit GatherKernel(const KernelSpec& spec) : CpuDataMovementKernel(spec) {
    axis_ = reference::normalized_axis(spec, spec.attributes.get_int("axis", 0),
                                       static_cast<int64_t>(spec.inputs[0].sizes.size()));
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &data = inputs[0], &indices = inputs[1], &out = outputs[0];
    if (key_.changed(inputs, outputs, {})) {
      split_ = split_at(data.sizes, axis_);
      valid_ = out.sizes == gathered_sizes(data.sizes, indices.sizes, axis_);
    }
    if (!valid_ || !indices_in_range(indices, split_.n)) return run_reference(stream, inputs, outputs);
    const size_t element = reference::element_bytes(data.dtype);
    if (indices.dtype == DType::Int32) {
      gather(indices.as<const int32_t>(), indices.numel(), data.data, out.data, element);
    } else {
      gather(indices.as<const int64_t>(), indices.numel(), data.data, out.data, element);
    }
  }

 private:
  template <typename I>
  void gather(const I* indices, int64_t count, const void* data, void* out, size_t element) const {
    const auto [outer, n, inner] = split_;
    const int64_t rows = outer * count;
    if (rows == 0 || inner == 0) return;
    if (inner == 1) {  // single elements: a typed loop
      dispatch_bytes(element, [&](auto zero) {
        using T = decltype(zero);
        const T* from = static_cast<const T*>(data);
        T* to = static_cast<T*>(out);
        parallel_for(rows, kCopyGrainBytes / sizeof(T), [&](int64_t begin, int64_t end) {
          int64_t o = begin / count, j = begin % count;
          for (int64_t r = begin; r < end; ++r) {
            to[r] = from[o * n + wrapped(indices[j], n)];
            if (++j == count) j = 0, ++o;
          }
        });
      });
      return;
    }
    const int64_t row_bytes = inner * static_cast<int64_t>(element);
    const auto* from = static_cast<const std::byte*>(data);
    auto* to = static_cast<std::byte*>(out);
    parallel_for(rows, std::max<int64_t>(1, kCopyGrainBytes / row_bytes), [&](int64_t begin, int64_t end) {
      int64_t o = begin / count, j = begin % count;
      for (int64_t r = begin; r < end; ++r) {
        std::memcpy(to + r * row_bytes, from + (o * n + wrapped(indices[j], n)) * row_bytes, row_bytes);
        if (++j == count) j = 0, ++o;
      }
    });
  }

  int64_t axis_ = 0;
  RunKey key_;
  bool valid_ = false;
  AxisSplit split_;
};

class GatherGradKernel final : public CpuDataMovementKernel {
 public:
  explicit GatherGradKernel(const KernelSpec& spec) : CpuDataMovementKernel(spec) {
    axis_ = reference::normalized_axis(spec, spec.attributes.get_int("axis", 0),
                                       static_cast<int64_t>(spec.outputs[0].sizes.size()));
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const TensorView &dy = inputs[0], &indices = inputs[2], &dx = outputs[0];
    if (key_.changed(inputs, outputs, {1})) {
      split_ = split_at(dx.sizes, axis_);
      valid_ = reference::read_int_values(inputs[1]) == dx.sizes &&
               dy.sizes == gathered_sizes(dx.sizes, indices.sizes, axis_);
    }
    if (!valid_ || !indices_in_range(indices, split_.n)) return run_reference(stream, inputs, outputs);
    reference::dispatch_float(dx.dtype, [&](auto zero) {
      using T = decltype(zero);
      if (indices.dtype == DType::Int32) {
        scatter_add(indices.as<const int32_t>(), indices.numel(), dy.as<const T>(), dx.as<T>());
      } else {
        scatter_add(indices.as<const int64_t>(), indices.numel(), dy.as<const T>(), dx.as<T>());
      }
    });
  }

 private:
  template <typename I, typename T>
  void scatter_add(const I* indices, int64_t count, const T* dy, T* dx) const {
    const auto [outer, n, inner] = split_;
    parallel_zero(dx, outer * n * inner * static_cast<int64_t>(sizeof(T)));
    if (outer * count * inner == 0) return;
    // Work items: (block before the axis, column range); column ranges of whole cache lines.
    constexpr int64_t kLine = 64 / sizeof(T);
    const int64_t threads = omp_get_max_threads();
    int64_t columns = inner;
    if (outer < threads && outer * count * inner >= 16 * 1024) {
      const int64_t chunks = std::min((threads + outer - 1) / outer, (inner + kLine - 1) / kLine);
      columns = ((inner + chunks - 1) / chunks + kLine - 1) / kLine * kLine;
    }
    const int64_t column_chunks = (inner + columns - 1) / columns;
    const int64_t items = outer * column_chunks;
    const int64_t grain = std::max<int64_t>(1, 16 * 1024 / std::max<int64_t>(1, count * columns));
    parallel_for(items, grain, [&](int64_t begin, int64_t end) {
      for (int64_t item = begin; item < end; ++item) {
        const int64_t o = item / column_chunks, k0 = item % column_chunks * columns;
        const int64_t width = std::min(columns, inner - k0);
        for (int64_t j = 0; j < count; ++j) {
          const T* from = dy + (o * count + j) * inner + k0;
          T* to = dx + (o * n + wrapped(indices[j], n)) * inner + k0;
#pragma omp simd
          for (int64_t k = 0; k < width; ++k) to[k] += from[k];
        }
      }
    });
  }

  int64_t axis_ = 0;
  RunKey key_;
  bool valid_ = false;
  AxisSplit split_;
};

}  // namespace

void register_cpu_gather_kernels(KernelRegistry& registry) {
  registry.add(cpu_entry("Gather", reference::kFixedSizeDTypes, reference::make_kernel<GatherKernel>));
  registry.add(cpu_training_entry("GatherGrad", reference::kFloatDTypes, reference::make_kernel<GatherGradKernel>));
}

}  // namespace onnxtrain
