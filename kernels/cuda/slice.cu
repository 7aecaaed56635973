// CUDA Slice and SliceGrad (ai.onnxtrain). Slice before opset 10 takes starts/ends/axes from attributes:
// the StridedMap is resolved at prepare time. From opset 10 they are device tensors: thread 0 of every
// block resolves them (resolve_slice in strided_index.h, numpy clamping, negative steps) into shared
// memory, so nothing is read back to the host (inputs an executor keeps in host memory are resolved on
// the host at run time instead). Arguments that are invalid, or that give other sizes than
// the allocated output (dY for SliceGrad), leave the output unwritten and raise the kernel's error flag,
// reported by its next run(). SliceGrad zero-fills dX, then writes each dY element where Slice read it
// (distinct positions, so no races and no atomics).
#include "kernels/cuda/data_movement_common.cuh"
#include "kernels/reference/slice_view.h"

namespace onnxtrain::cuda {

namespace {

using reference::kernel_fail;

// What a launch needs to know where the slice reads: a map resolved on the host, or the device inputs.
struct SliceLaunch {
  bool resolved = false;
  StridedMap map;  // when resolved
  SliceArgs args;  // otherwise: device pointers filled at run time
  int rank = 0;
  int64_t sizes[kMaxRank] = {};     // of the tensor being sliced (x / dX)
  int64_t expected[kMaxRank] = {};  // of the slice (Slice's output / dY)
};

std::string slice_status_text(int status) {
  switch (status) {
    case kSliceBadAxis:
      return "an axis out of range in the axes input";
    case kSliceRepeatedAxis:
      return "an axis repeated in the axes input";
    case kSliceZeroStep:
      return "a step of 0 in the steps input";
    case kSliceSizeMismatch:
      return "starts/ends/steps inputs giving other sizes than the allocated slice";
    default:
      return "an invalid slice (status " + std::to_string(status) + ")";
  }
}

// The block's map in shared memory (resolved by thread 0); false when the arguments were bad.
__device__ bool block_slice_map(const SliceLaunch& p, StridedMap& map, int* flag) {
  __shared__ int status;
  if (threadIdx.x == 0) {
    if (p.resolved) {
      map = p.map;
      status = kSliceOk;
    } else {
      status = resolve_slice(p.rank, p.sizes, p.expected, p.args, map);
    }
    if (status != kSliceOk && blockIdx.x == 0) raise_flag(flag, status);
  }
  __syncthreads();
  return status == kSliceOk;
}

// Slice: out[i] = x[map.source(i)].
template <typename W>
__global__ void slice_kernel(const W* x, W* out, SliceLaunch p, int64_t n, int* flag) {
  __shared__ alignas(StridedMap) unsigned char storage[sizeof(StridedMap)];  // no constructor on shared memory
  StridedMap& map = *reinterpret_cast<StridedMap*>(storage);
  if (!block_slice_map(p, map, flag)) return;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x)
    out[i] = x[map.source(i)];
}

// SliceGrad: dx[map.source(i)] = dy[i] (dx zero-filled before).
template <typename W>
__global__ void slice_scatter_kernel(const W* dy, W* dx, SliceLaunch p, int64_t n, int* flag) {
  __shared__ alignas(StridedMap) unsigned char storage[sizeof(StridedMap)];
  StridedMap& map = *reinterpret_cast<StridedMap*>(storage);
  if (!block_slice_map(p, map, flag)) return;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x)
    dx[map.source(i)] = dy[i];
}

// Prepare-time part shared by Slice and SliceGrad: input indices of starts/ends/axes/steps (axes and
// steps optional), the sliced tensor's sizes `whole` and the slice's sizes `part`.
SliceLaunch prepare_launch(const KernelSpec& spec, size_t first_index_input, const std::vector<int64_t>& whole,
                           const std::vector<int64_t>& part) {
  require_rank_at_most(spec, whole.size(), "the sliced tensor");
  if (part.size() != whole.size())
    kernel_fail(spec, "the slice has sizes " + sizes_text(part) + ", of another rank than " + sizes_text(whole));
  SliceLaunch p;
  p.rank = static_cast<int>(whole.size());
  for (int k = 0; k < p.rank; ++k) {
    p.sizes[k] = whole[k];
    p.expected[k] = part[k];
  }
  static const char* kNames[] = {"starts", "ends", "axes", "steps"};
  const int64_t count = spec.inputs[first_index_input].numel();
  for (size_t j = 0; j < 4; ++j) {
    const size_t i = first_index_input + j;
    if (!reference::has_input(spec, i)) continue;
    reference::require_index_input(spec, i, kNames[j]);
    if (spec.inputs[i].numel() != count)
      kernel_fail(spec, std::string(kNames[j]) + " has " + std::to_string(spec.inputs[i].numel()) +
                            " entries, starts has " + std::to_string(count));
  }
  p.args.count = count;
  return p;
}

// Points the launch's args at this run's index inputs. When they live in host memory (an executor may
// keep them there) the slice is resolved here instead, and bad arguments throw at once.
void bind_args(const KernelSpec& spec, SliceLaunch& p, std::span<const TensorView> inputs, size_t first) {
  int on_host_count = 0, present = 0;
  auto bind = [&](size_t j, const void*& ptr, bool& is64) {
    const TensorView* view = reference::optional_input(inputs, first + j);
    ptr = view ? view->data : nullptr;
    is64 = view && view->dtype == DType::Int64;
    if (view && view->numel() > 0) {
      ++present;
      on_host_count += on_host(*view);
    }
  };
  bind(0, p.args.starts, p.args.starts_int64);
  bind(1, p.args.ends, p.args.ends_int64);
  bind(2, p.args.axes, p.args.axes_int64);
  bind(3, p.args.steps, p.args.steps_int64);
  if (on_host_count == 0) return;
  if (on_host_count != present)
    kernel_fail(spec, "starts, ends, axes and steps must all be in host memory or all on the device");
  if (const int status = resolve_slice(p.rank, p.sizes, p.expected, p.args, p.map); status != kSliceOk)
    kernel_fail(spec, "the slice has " + slice_status_text(status));
  p.resolved = true;
}

class SliceKernel : public Kernel {
 public:
  explicit SliceKernel(const KernelSpec& spec) : spec_(spec) {
    reference::require_inputs(spec, 1);
    const std::vector<int64_t>& x = spec.inputs[0].sizes;
    const TensorDesc& out = reference::require_output(spec, 0);
    reference::require_output(spec, 0, spec.inputs[0].dtype, out.sizes);
    if (!dispatch_element_size(dtype_size(spec.inputs[0].dtype), [](auto) {}))
      kernel_fail(spec, "unsupported dtype " + std::string(dtype_name(spec.inputs[0].dtype)));
    if (spec.opset >= 10) {
      reference::require_inputs(spec, 3);
      launch_ = prepare_launch(spec, 1, x, out.sizes);
      return;
    }
    // Attributes: resolve now, with the reference's checks and messages.
    if (!spec.attributes.has("starts") || !spec.attributes.has("ends"))
      kernel_fail(spec, "the starts and ends attributes are required");
    require_rank_at_most(spec, x.size(), "the input");
    const std::vector<int64_t> starts = spec.attributes.get_ints("starts"), ends = spec.attributes.get_ints("ends");
    std::vector<int64_t> axes = spec.attributes.get_ints("axes");
    if (!spec.attributes.has("axes"))
      for (size_t j = 0; j < starts.size(); ++j) axes.push_back(static_cast<int64_t>(j));
    const reference::SliceView v =
        reference::slice_view(spec, x, starts, ends, axes, std::vector<int64_t>(starts.size(), 1));
    reference::require_output(spec, 0, spec.inputs[0].dtype, v.sizes);
    launch_.resolved = true;
    launch_.map.rank = static_cast<int>(x.size());
    launch_.map.base = v.base;
    for (size_t k = 0; k < x.size(); ++k) {
      launch_.map.sizes[k] = v.sizes[k];
      launch_.map.strides[k] = v.strides[k];
    }
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    flag_.throw_if_raised(spec_, slice_status_text);
    const int64_t n = outputs[0].numel();
    if (n == 0) return;
    DeviceGuard guard(stream);
    SliceLaunch p = launch_;
    if (!p.resolved) bind_args(spec_, p, inputs, 1);
    dispatch_element_size(dtype_size(inputs[0].dtype), [&](auto word) {
      using W = decltype(word);
      slice_kernel<W><<<grid_for(n), kBlock, 0, native_stream(stream)>>>(inputs[0].as<const W>(), outputs[0].as<W>(), p,
                                                                         n, flag_.device_ptr());
      ONNXTRAIN_CUDA_CHECK_LAUNCH(slice_kernel<W>);
    });
  }

 private:
  KernelSpec spec_;
  SliceLaunch launch_;
  DeviceErrorFlag flag_;
};

// SliceGrad(dY, x_shape, starts, ends, axes?, steps?) -> dX shaped x_shape (the allocated output).
class SliceGradKernel : public Kernel {
 public:
  explicit SliceGradKernel(const KernelSpec& spec) : spec_(spec) {
    reference::require_shape_grad_inputs(spec, 4, {"dY", "x_shape", "starts", "ends", "axes", "steps"});
    launch_ = prepare_launch(spec, 2, spec.outputs[0].sizes, spec.inputs[0].sizes);
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    flag_.throw_if_raised(spec_, slice_status_text);
    const TensorView &dy = inputs[0], &dx = outputs[0];
    const size_t element = dtype_size(dx.dtype);
    DeviceGuard guard(stream);
    if (dx.numel() > 0)
      ONNXTRAIN_CUDA_CHECK(
          cudaMemsetAsync(dx.data, 0, static_cast<size_t>(dx.numel()) * element, native_stream(stream)));
    const int64_t n = dy.numel();
    if (n == 0) return;
    SliceLaunch p = launch_;
    bind_args(spec_, p, inputs, 2);
    dispatch_element_size(element, [&](auto word) {
      using W = decltype(word);
      slice_scatter_kernel<W>
          <<<grid_for(n), kBlock, 0, native_stream(stream)>>>(dy.as<const W>(), dx.as<W>(), p, n, flag_.device_ptr());
      ONNXTRAIN_CUDA_CHECK_LAUNCH(slice_scatter_kernel<W>);
    });
  }

 private:
  KernelSpec spec_;
  SliceLaunch launch_;
  DeviceErrorFlag flag_;
};

}  // namespace

void register_cuda_slice_kernels(KernelRegistry& registry) {
  registry.add(movement_entry("Slice", reference::kFixedSizeDTypes, &reference::make_kernel<SliceKernel>));
  registry.add(
      movement_entry("SliceGrad", reference::kFloatDTypes, &reference::make_kernel<SliceGradKernel>, "ai.onnxtrain"));
}

}  // namespace onnxtrain::cuda
