// Expand and Tile (every opset the reference kernels take) as one StridedCopy each, planned again only when
// the sizes or the shape/repeats values change: a broadcast dim reads with stride 0, so an expanded row is
// a fill and a repeated block a memcpy.
#include <algorithm>
#include <optional>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/data_movement.h"

namespace onnxtrain {

namespace {

using namespace cpu;
using reference::row_major_strides;

class ExpandKernel final : public CpuCopyKernel {
 public:
  explicit ExpandKernel(const KernelSpec& spec) : CpuCopyKernel(spec) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    run_copy(stream, inputs, outputs, key_.changed(inputs, outputs, {1}), [&] {
      const std::vector<int64_t>& in = inputs[0].sizes;
      const std::vector<int64_t> shape = reference::read_int_values(inputs[1]);
      const std::optional<std::vector<int64_t>> sizes = reference::broadcast_sizes(in, shape);
      return sizes && std::none_of(shape.begin(), shape.end(), [](int64_t s) { return s < 0; }) &&
             *sizes == outputs[0].sizes &&
             StridedCopy::plan(reference::element_bytes(inputs[0].dtype), *sizes,
                               reference::broadcast_strides(in, *sizes), row_major_strides(*sizes), 0, 0, copy_);
    });
  }
};

class TileKernel final : public CpuCopyKernel {
 public:
  explicit TileKernel(const KernelSpec& spec) : CpuCopyKernel(spec) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    run_copy(stream, inputs, outputs, key_.changed(inputs, outputs, {1}), [&] {
      return plan(inputs[0].sizes, reference::read_int_values(inputs[1]), outputs[0].sizes,
                  reference::element_bytes(inputs[0].dtype));
    });
  }

 private:
  // Output dim k of size repeats[k] * in[k] is the pair (copy, i): the output viewed as (r0, s0, r1, s1, ...)
  // reads the input with strides (0, stride0, 0, stride1, ...).
  bool plan(const std::vector<int64_t>& in, const std::vector<int64_t>& repeats, const std::vector<int64_t>& out,
            size_t element) {
    if (repeats.size() != in.size() || out.size() != in.size()) return false;
    const std::vector<int64_t> in_strides = row_major_strides(in);
    std::vector<int64_t> sizes, strides;
    for (size_t k = 0; k < in.size(); ++k) {
      if (repeats[k] < 0 || out[k] != in[k] * repeats[k]) return false;
      sizes.insert(sizes.end(), {repeats[k], in[k]});
      strides.insert(strides.end(), {0, in_strides[k]});
    }
    return StridedCopy::plan(element, sizes, strides, row_major_strides(sizes), 0, 0, copy_);
  }
};

}  // namespace

void register_cpu_expand_tile_kernels(KernelRegistry& registry) {
  registry.add(cpu_entry("Expand", reference::kFixedSizeDTypes, reference::make_kernel<ExpandKernel>));
  registry.add(cpu_entry("Tile", reference::kFixedSizeDTypes, reference::make_kernel<TileKernel>));
}

}  // namespace onnxtrain
