// CUDA Reshape, Flatten, Squeeze, Unsqueeze, Identity (one device-to-device copy of the input's bytes),
// Concat and Split (one cudaMemcpy2DAsync per part: a part is `outer` rows of a contiguous block), and
// register_cuda_data_movement_kernels, which registers every data-movement family. All sizes come
// from prepare; shape/split inputs (device tensors) only repeat what the allocated outputs already say.
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/data_movement_common.cuh"

namespace onnxtrain::cuda {

namespace {

using reference::kernel_fail;

// Enqueues a block copy of elements `element` bytes wide (nothing when it moves no bytes), as
// block_copy_kind says: 2-D copies only where cudaMemcpy2DAsync accepts the pitches.
void copy_block(const BlockCopy& b, const void* src, void* dst, size_t element, cudaStream_t stream) {
  const BlockCopyKind kind = block_copy_kind(b, static_cast<int64_t>(element));
  if (kind == BlockCopyKind::Empty) return;
  const auto* from = static_cast<const std::byte*>(src) + b.src_offset * element;
  auto* to = static_cast<std::byte*>(dst) + b.dst_offset * element;
  const size_t row_bytes = static_cast<size_t>(b.width) * element;
  switch (kind) {
    case BlockCopyKind::Flat:
      ONNXTRAIN_CUDA_CHECK(
          cudaMemcpyAsync(to, from, static_cast<size_t>(b.rows) * row_bytes, cudaMemcpyDeviceToDevice, stream));
      return;
    case BlockCopyKind::RowByRow:  // few rows: each is over 2 GiB apart
      for (int64_t r = 0; r < b.rows; ++r) {
        ONNXTRAIN_CUDA_CHECK(cudaMemcpyAsync(to + r * b.dst_pitch * element, from + r * b.src_pitch * element,
                                             row_bytes, cudaMemcpyDeviceToDevice, stream));
      }
      return;
    default:
      ONNXTRAIN_CUDA_CHECK(cudaMemcpy2DAsync(to, b.dst_pitch * element, from, b.src_pitch * element, row_bytes, b.rows,
                                             cudaMemcpyDeviceToDevice, stream));
  }
}

class ByteCopyKernel : public Kernel {
 public:
  explicit ByteCopyKernel(const KernelSpec& spec) {
    reference::require_inputs(spec, 1);
    reference::require_output_dtype(spec, 0, spec.inputs[0].dtype);
    if (spec.inputs[0].numel() != spec.outputs[0].numel()) {
      kernel_fail(spec, "input sizes " + sizes_text(spec.inputs[0].sizes) + " and output sizes " +
                            sizes_text(spec.outputs[0].sizes) + " hold different element counts");
    }
    bytes_ = static_cast<size_t>(spec.inputs[0].numel()) * dtype_size(spec.inputs[0].dtype);
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    if (bytes_ == 0 || inputs[0].data == outputs[0].data) return;
    DeviceGuard guard(stream);
    ONNXTRAIN_CUDA_CHECK(
        cudaMemcpyAsync(outputs[0].data, inputs[0].data, bytes_, cudaMemcpyDeviceToDevice, native_stream(stream)));
  }

 private:
  size_t bytes_ = 0;
};

std::unique_ptr<Kernel> make_reshape(const KernelSpec& spec) {
  if (spec.opset < 5) {
    if (!spec.attributes.has("shape")) kernel_fail(spec, "the shape attribute is required");
  } else {
    reference::require_inputs(spec, 2);
    reference::require_index_input(spec, 1, "shape");
  }
  return std::make_unique<ByteCopyKernel>(spec);
}

std::unique_ptr<Kernel> make_flatten(const KernelSpec& spec) {
  reference::require_inputs(spec, 1);
  const auto rank = static_cast<int64_t>(spec.inputs[0].sizes.size());
  int64_t axis = spec.attributes.get_int("axis", 1);
  if (axis < -rank || axis > rank)  // the split point may equal the rank
    kernel_fail(spec, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  if (axis < 0) axis += rank;
  int64_t rows = 1, columns = 1;
  for (int64_t k = 0; k < rank; ++k) (k < axis ? rows : columns) *= spec.inputs[0].sizes[k];
  reference::require_output(spec, 0, spec.inputs[0].dtype, {rows, columns});
  return std::make_unique<ByteCopyKernel>(spec);
}

// The outer and inner element counts around `axis` of `sizes`.
std::pair<int64_t, int64_t> outer_inner(const std::vector<int64_t>& sizes, int64_t axis) {
  return reference::outer_inner(sizes, axis);
}

class ConcatKernel : public Kernel {
 public:
  explicit ConcatKernel(const KernelSpec& spec) : element_(0) {
    if (spec.inputs.empty()) kernel_fail(spec, "at least one input is required");
    reference::require_inputs(spec, spec.inputs.size());
    const DType dtype = spec.inputs[0].dtype;
    const std::vector<int64_t>& first = spec.inputs[0].sizes;
    const auto rank = static_cast<int64_t>(first.size());
    if (rank == 0) kernel_fail(spec, "cannot concatenate scalars");
    if (spec.opset >= 4 && !spec.attributes.has("axis")) kernel_fail(spec, "the axis attribute is required");
    const int64_t axis = reference::normalized_axis(spec, spec.attributes.get_int("axis", 1), rank);
    std::vector<int64_t> out_sizes = first, axis_sizes;
    out_sizes[axis] = 0;
    for (size_t i = 0; i < spec.inputs.size(); ++i) {
      const TensorDesc& in = spec.inputs[i];
      if (in.dtype != dtype)
        kernel_fail(spec, "input " + std::to_string(i) + " has dtype " + std::string(dtype_name(in.dtype)) +
                              ", input 0 has " + std::string(dtype_name(dtype)));
      if (static_cast<int64_t>(in.sizes.size()) != rank)
        kernel_fail(spec, "input " + std::to_string(i) + " has rank " + std::to_string(in.sizes.size()) +
                              ", input 0 has " + std::to_string(rank));
      for (int64_t k = 0; k < rank; ++k)
        if (k != axis && in.sizes[k] != first[k])
          kernel_fail(spec, "input " + std::to_string(i) + " has sizes " + sizes_text(in.sizes) +
                                ", which differ from " + sizes_text(first) + " outside axis " + std::to_string(axis));
      out_sizes[axis] += in.sizes[axis];
      axis_sizes.push_back(in.sizes[axis]);
    }
    reference::require_output(spec, 0, dtype, out_sizes);
    auto [outer, inner] = outer_inner(out_sizes, axis);
    blocks_ = concat_blocks(outer, inner, axis_sizes);
    element_ = dtype_size(dtype);
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    DeviceGuard guard(stream);
    for (size_t i = 0; i < blocks_.size(); ++i)
      copy_block(blocks_[i], inputs[i].data, outputs[0].data, element_, native_stream(stream));
  }

 private:
  std::vector<BlockCopy> blocks_;
  size_t element_;
};

class SplitKernel : public Kernel {
 public:
  explicit SplitKernel(const KernelSpec& spec) : element_(0) {
    reference::require_inputs(spec, 1);
    if (spec.outputs.empty()) kernel_fail(spec, "at least one output is required");
    const std::vector<int64_t>& in = spec.inputs[0].sizes;
    const auto rank = static_cast<int64_t>(in.size());
    const int64_t axis = reference::normalized_axis(spec, spec.attributes.get_int("axis", 0), rank);
    if (spec.opset >= 13 && reference::has_input(spec, 1)) reference::require_index_input(spec, 1, "split");
    // The chunk sizes are the outputs' (a run-time split input lives on the device and must agree with
    // them, as shape inference made it); a split attribute (before opset 13) is checked here.
    std::vector<int64_t> chunks;
    int64_t total = 0;
    for (size_t i = 0; i < spec.outputs.size(); ++i) {
      const TensorDesc& out = reference::require_output(spec, i);
      std::vector<int64_t> expected = in;
      expected[axis] = out.sizes.size() == in.size() ? out.sizes[axis] : -1;
      reference::require_output(spec, i, spec.inputs[0].dtype, expected);
      chunks.push_back(expected[axis]);
      total += expected[axis];
    }
    if (spec.opset < 13 && spec.attributes.has("split") && spec.attributes.get_ints("split") != chunks)
      kernel_fail(spec, "split " + sizes_text(spec.attributes.get_ints("split")) +
                            " differs from the outputs' sizes along axis " + std::to_string(axis) + ", " +
                            sizes_text(chunks));
    if (total != in[axis])
      kernel_fail(spec, "the outputs take " + std::to_string(total) + " elements along axis " + std::to_string(axis) +
                            " but the input has " + std::to_string(in[axis]));
    auto [outer, inner] = outer_inner(in, axis);
    blocks_ = split_blocks(outer, inner, chunks);
    element_ = dtype_size(spec.inputs[0].dtype);
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    DeviceGuard guard(stream);
    for (size_t i = 0; i < blocks_.size(); ++i)
      copy_block(blocks_[i], inputs[0].data, outputs[i].data, element_, native_stream(stream));
  }

 private:
  std::vector<BlockCopy> blocks_;
  size_t element_;
};

}  // namespace

void register_cuda_copy_concat_kernels(KernelRegistry& registry) {
  const std::vector<DType>& all = reference::kFixedSizeDTypes;
  registry.add(movement_entry("Reshape", all, &make_reshape));
  registry.add(movement_entry("Flatten", all, &make_flatten));
  registry.add(movement_entry("Squeeze", all, &reference::make_kernel<ByteCopyKernel>));
  registry.add(movement_entry("Unsqueeze", all, &reference::make_kernel<ByteCopyKernel>));
  registry.add(movement_entry("Identity", all, &reference::make_kernel<ByteCopyKernel>));
  registry.add(movement_entry("Concat", all, &reference::make_kernel<ConcatKernel>));
  registry.add(movement_entry("Split", all, &reference::make_kernel<SplitKernel>));
}

}  // namespace onnxtrain::cuda

namespace onnxtrain {

void register_cuda_data_movement_kernels(KernelRegistry& registry) {
  cuda::register_cuda_shape_constant_kernels(registry);
  cuda::register_cuda_copy_concat_kernels(registry);
  cuda::register_cuda_transpose_expand_kernels(registry);
  cuda::register_cuda_slice_kernels(registry);
  cuda::register_cuda_gather_kernels(registry);
  cuda::register_cuda_cumsum_kernels(registry);
  cuda::register_cuda_top_k_kernels(registry);
  cuda::register_cuda_trilu_kernels(registry);
  cuda::register_cuda_pad_kernels(registry);
  cuda::register_cuda_resize_kernels(registry);
  cuda::register_cuda_gather_elements_kernels(registry);
  cuda::register_cuda_scatter_elements_kernels(registry);
  cuda::register_cuda_gather_nd_kernels(registry);
  cuda::register_cuda_scatter_nd_kernels(registry);
}

}  // namespace onnxtrain
