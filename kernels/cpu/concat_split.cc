// Concat and Split (every opset the reference kernels take) as byte-range copies: the output (Concat) or
// the input (Split) is an (outer, row) array whose rows are the per-tensor blocks side by side; the bytes
// are split evenly across the threads and each thread walks its range block by block with memcpy.
#include <algorithm>
#include <optional>

#include "kernels/cpu/cpu_kernels.h"
#include "kernels/cpu/data_movement.h"

namespace onnxtrain {

namespace {

using namespace cpu;
using reference::outer_inner;

constexpr int kSplitInputSince = 13;

// The blocks of one row: block i spans bytes [offsets[i], offsets[i + 1]) of the row and is row i of its
// own tensor (so its bytes in that tensor start at outer * (offsets[i + 1] - offsets[i])).
struct RowBlocks {
  int64_t outer = 0, row = 0;
  std::vector<int64_t> offsets;
  std::vector<std::byte*> tensors;  // the per-run pointer of each block's tensor

  // Joined == true: row bytes [b, e) of the joined array go to/from each block's tensor.
  template <bool kJoin>
  void run(std::byte* joined) const {
    const int64_t total = outer * row;
    if (total == 0) return;
    const size_t count = tensors.size();
    parallel_for(total, kCopyGrainBytes, [&](int64_t begin, int64_t end) {
      int64_t o = begin / row, r = begin % row;
      size_t i = static_cast<size_t>(std::upper_bound(offsets.begin(), offsets.end(), r) - offsets.begin()) - 1;
      for (int64_t pos = begin; pos < end;) {
        if (r == offsets[i + 1]) {  // the end of block i (or an empty block)
          if (++i == count) {
            i = 0;
            r = 0;
            ++o;
          }
          continue;
        }
        const int64_t block = offsets[i + 1] - offsets[i];
        const int64_t len = std::min(end - pos, offsets[i + 1] - r);
        std::byte* part = tensors[i] + o * block + (r - offsets[i]);
        if constexpr (kJoin) {
          std::memcpy(joined + pos, part, len);
        } else {
          std::memcpy(part, joined + pos, len);
        }
        pos += len;
        r += len;
      }
    });
  }
};

// Whether `parts` (each with its own extent along `axis`) join to `whole` along `axis`.
bool joins(const std::vector<const std::vector<int64_t>*>& parts, const std::vector<int64_t>& whole, int64_t axis) {
  int64_t along = 0;
  for (const std::vector<int64_t>* p : parts) {
    if (p->size() != whole.size()) return false;
    for (size_t k = 0; k < whole.size(); ++k)
      if (static_cast<int64_t>(k) != axis && (*p)[k] != whole[k]) return false;
    along += (*p)[axis];
  }
  return along == whole[axis];
}

RowBlocks row_blocks(const std::vector<const std::vector<int64_t>*>& parts, const std::vector<int64_t>& whole,
                     int64_t axis, size_t element) {
  RowBlocks b;
  const auto [outer, inner] = outer_inner(whole, axis);
  b.outer = outer;
  b.offsets.push_back(0);
  for (const std::vector<int64_t>* p : parts)
    b.offsets.push_back(b.offsets.back() + (*p)[axis] * inner * static_cast<int64_t>(element));
  b.row = b.offsets.back();
  b.tensors.resize(parts.size());
  return b;
}

class ConcatKernel final : public CpuDataMovementKernel {
 public:
  explicit ConcatKernel(const KernelSpec& spec) : CpuDataMovementKernel(spec) {
    axis_ = reference::normalized_axis(spec, spec.attributes.get_int("axis", 1),
                                       static_cast<int64_t>(spec.inputs[0].sizes.size()));
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    if (key_.changed(inputs, outputs, {})) {
      std::vector<const std::vector<int64_t>*> parts;
      for (const TensorView& in : inputs) parts.push_back(&in.sizes);
      valid_ = joins(parts, outputs[0].sizes, axis_);
      if (valid_) blocks_ = row_blocks(parts, outputs[0].sizes, axis_, reference::element_bytes(inputs[0].dtype));
    }
    if (!valid_) return run_reference(stream, inputs, outputs);
    for (size_t i = 0; i < inputs.size(); ++i) blocks_.tensors[i] = reference::bytes_of(inputs[i]);
    blocks_.run<true>(reference::bytes_of(outputs[0]));
  }

 private:
  int64_t axis_ = 0;
  RunKey key_;
  bool valid_ = false;
  RowBlocks blocks_;
};

class SplitKernel final : public CpuDataMovementKernel {
 public:
  explicit SplitKernel(const KernelSpec& spec) : CpuDataMovementKernel(spec) {
    axis_ = reference::normalized_axis(spec, spec.attributes.get_int("axis", 0),
                                       static_cast<int64_t>(spec.inputs[0].sizes.size()));
    if (spec.opset < kSplitInputSince && spec.attributes.has("split")) split_ = spec.attributes.get_ints("split");
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const bool split_input = spec_.opset >= kSplitInputSince;
    if (split_input ? key_.changed(inputs, outputs, {1}) : key_.changed(inputs, outputs, {})) {
      std::vector<const std::vector<int64_t>*> parts;
      for (const TensorView& out : outputs) parts.push_back(&out.sizes);
      valid_ = joins(parts, inputs[0].sizes, axis_);
      std::optional<std::vector<int64_t>> split = split_;
      if (const TensorView* given = reference::optional_input(inputs, 1); given && split_input)
        split = reference::read_int_values(*given);
      if (valid_ && split) {  // a given split must agree with the outputs' extents
        valid_ = split->size() == outputs.size();
        for (size_t i = 0; valid_ && i < outputs.size(); ++i) valid_ = (*split)[i] == outputs[i].sizes[axis_];
      }
      if (valid_) blocks_ = row_blocks(parts, inputs[0].sizes, axis_, reference::element_bytes(inputs[0].dtype));
    }
    if (!valid_) return run_reference(stream, inputs, outputs);
    for (size_t i = 0; i < outputs.size(); ++i) blocks_.tensors[i] = reference::bytes_of(outputs[i]);
    blocks_.run<false>(reference::bytes_of(inputs[0]));
  }

 private:
  int64_t axis_ = 0;
  std::optional<std::vector<int64_t>> split_;
  RunKey key_;
  bool valid_ = false;
  RowBlocks blocks_;
};

}  // namespace

void register_cpu_concat_split_kernels(KernelRegistry& registry) {
  registry.add(cpu_entry("Concat", reference::kFixedSizeDTypes, reference::make_kernel<ConcatKernel>));
  registry.add(cpu_entry("Split", reference::kFixedSizeDTypes, reference::make_kernel<SplitKernel>));
}

}  // namespace onnxtrain
