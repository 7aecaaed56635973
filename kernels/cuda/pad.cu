// CUDA Pad (constant, reflect, edge and wrap modes, negative pads crop) and PadGrad (ai.onnxtrain).
// Before opset 11 the pads are attributes, resolved at prepare time; from opset 11 the pads (and from 18
// the axes) are device tensors that thread 0 of each block turns into begin pads in shared memory
// (resolve_pad_begins in strided_index.h); pads an executor keeps in host memory are resolved on the host
// at run time. Device pads that give other sizes than the allocated output raise the kernel's error flag
// (reported by its next run()) and leave the output unwritten. The constant is the constant_value input
// when it has an element (read where it lives), else the `value` attribute (before opset 11) or zero.
// PadGrad is deterministic without atomics: one thread per dX element sums the dY positions that read it
// (pad_grad_sum), in the reference's order.
#include "kernels/cuda/data_movement_common.cuh"
#include "kernels/reference/element_convert.h"
#include "kernels/reference/pad_mode.h"

namespace onnxtrain::cuda {

namespace {

using reference::kernel_fail;

struct PadLaunch {
  PadGeometry g;
  bool resolved = false;
  int64_t begins[kMaxRank] = {};  // when resolved
  const void* pads = nullptr;     // otherwise: device inputs bound at run time
  const void* axes = nullptr;
  bool pads_int64 = true, axes_int64 = true;
  int64_t axis_count = 0;
};

std::string pad_status_text(int status) {
  switch (status) {
    case kPadBadAxis:
      return "an axis out of range in the axes input";
    case kPadSizeMismatch:
      return "pads giving other sizes than the allocated output";
    default:
      return "invalid pads (status " + std::to_string(status) + ")";
  }
}

// The block's begin pads in shared memory; false when the pads were bad.
__device__ bool block_begins(const PadLaunch& p, int64_t* begins, int* flag) {
  __shared__ int status;
  if (threadIdx.x == 0) {
    if (p.resolved) {
      for (int k = 0; k < p.g.rank; ++k) begins[k] = p.begins[k];
      status = kPadOk;
    } else {
      status = resolve_pad_begins(p.g, p.pads, p.pads_int64, p.axes, p.axes_int64, p.axis_count, begins);
    }
    if (status != kPadOk && blockIdx.x == 0) raise_flag(flag, status);
  }
  __syncthreads();
  return status == kPadOk;
}

template <typename W>
__global__ void pad_kernel(const W* in, W* out, PadLaunch p, const W* constant_input, W constant, int64_t n,
                           int* flag) {
  __shared__ int64_t begins[kMaxRank];
  if (!block_begins(p, begins, flag)) return;
  const W fill = constant_input ? *constant_input : constant;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x) {
    const int64_t source = pad_source(i, p.g, begins);
    out[i] = source < 0 ? fill : in[source];
  }
}

template <typename T>
__global__ void pad_grad_kernel(const T* dy, T* dx, PadLaunch p, int64_t n, int* flag) {
  __shared__ int64_t begins[kMaxRank];
  if (!block_begins(p, begins, flag)) return;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{blockDim.x} * gridDim.x)
    dx[i] = pad_grad_sum(i, p.g, begins, dy);
}

// Points the launch at this run's pads (and axes). When they live in host memory (an executor may keep
// them there) the begin pads are resolved here instead, and bad pads throw at once.
void bind_pads(const KernelSpec& spec, PadLaunch& p, const TensorView& pads, const TensorView* axes) {
  p.pads = pads.data;
  p.pads_int64 = pads.dtype == DType::Int64;
  if (axes) {
    p.axes = axes->data;
    p.axes_int64 = axes->dtype == DType::Int64;
  }
  const bool pads_on_host = pads.numel() > 0 && on_host(pads);
  const bool axes_on_host = axes && axes->numel() > 0 && on_host(*axes);
  if (!pads_on_host && !axes_on_host) return;
  if (pads.numel() > 0 && axes && axes->numel() > 0 && pads_on_host != axes_on_host)
    kernel_fail(spec, "pads and axes must both be in host memory or both on the device");
  const int status = resolve_pad_begins(p.g, p.pads, p.pads_int64, p.axes, p.axes_int64, p.axis_count, p.begins);
  if (status != kPadOk) kernel_fail(spec, "the pads give " + pad_status_text(status));
  p.resolved = true;
}

PadGeometry pad_geometry(const KernelSpec& spec, const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  require_rank_at_most(spec, in.size(), "the input");
  if (in.size() != out.size())
    kernel_fail(spec, "the padded sizes " + sizes_text(out) + " have another rank than " + sizes_text(in));
  PadGeometry g;
  g.rank = static_cast<int>(in.size());
  g.mode = reference::read_pad_mode(spec);
  for (int k = 0; k < g.rank; ++k) {
    g.in[k] = in[k];
    g.out[k] = out[k];
  }
  row_major(g.rank, g.in, g.in_strides);
  return g;
}

class PadKernel : public Kernel {
 public:
  explicit PadKernel(const KernelSpec& spec)
      : spec_(spec), constant_(spec.inputs.empty() ? DType::Float32 : spec.inputs[0].dtype, {1}) {
    reference::require_inputs(spec, 1);
    const DType dtype = spec.inputs[0].dtype;
    const std::vector<int64_t>& in = spec.inputs[0].sizes;
    const std::vector<int64_t>& out = reference::require_output(spec, 0).sizes;
    reference::require_output(spec, 0, dtype, out);
    if (!dispatch_element_size(dtype_size(dtype), [](auto) {}))
      kernel_fail(spec, "unsupported dtype " + std::string(dtype_name(dtype)));
    launch_.g = pad_geometry(spec, in, out);
    const auto rank = static_cast<int64_t>(in.size());
    if (spec.opset < 11) {
      const std::string key = spec.opset <= 1 && spec.attributes.has("paddings") ? "paddings" : "pads";
      if (!spec.attributes.has(key)) kernel_fail(spec, "the " + key + " attribute is required");
      reference::store_double(TensorView::of(constant_), 0, spec.attributes.get_float("value", 0.0));
      const std::vector<int64_t> pads = spec.attributes.get_ints(key);
      if (static_cast<int64_t>(pads.size()) != 2 * rank)
        kernel_fail(spec, "pads " + sizes_text(pads) + " must give a begin and an end for each of " +
                              std::to_string(rank) + " axes");
      std::vector<int64_t> sizes = in;
      for (int64_t k = 0; k < rank; ++k) {
        launch_.begins[k] = pads[k];
        sizes[k] += pads[k] + pads[k + rank];
      }
      reference::require_output(spec, 0, dtype, sizes);
      launch_.resolved = true;
      return;
    }
    reference::require_inputs(spec, 2);
    reference::require_index_input(spec, 1, "pads");
    if (reference::has_input(spec, 2)) {
      if (spec.inputs[2].dtype != dtype)
        kernel_fail(spec, "constant_value has dtype " + std::string(dtype_name(spec.inputs[2].dtype)) + ", expected " +
                              std::string(dtype_name(dtype)) + " like the data");
      constant_input_ = spec.inputs[2].numel() > 0;
    }
    axes_input_ = spec.opset >= 18 && reference::has_input(spec, 3);
    launch_.axis_count = rank;
    if (axes_input_) {
      reference::require_index_input(spec, 3, "axes");
      launch_.axis_count = spec.inputs[3].numel();
      if (launch_.axis_count > rank)
        kernel_fail(spec,
                    "axes has " + std::to_string(launch_.axis_count) + " entries for rank " + std::to_string(rank));
    }
    if (spec.inputs[1].numel() != 2 * launch_.axis_count)
      kernel_fail(spec, "pads has " + std::to_string(spec.inputs[1].numel()) + " entries, expected " +
                            std::to_string(2 * launch_.axis_count) + " (a begin and an end for each of " +
                            std::to_string(launch_.axis_count) + " axes; input sizes " + sizes_text(in) + ")");
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    flag_.throw_if_raised(spec_, pad_status_text);
    const int64_t n = outputs[0].numel();
    if (n == 0) return;
    DeviceGuard guard(stream);
    PadLaunch p = launch_;
    if (!p.resolved) bind_pads(spec_, p, inputs[1], axes_input_ ? &inputs[3] : nullptr);
    dispatch_element_size(dtype_size(inputs[0].dtype), [&](auto word) {
      using W = decltype(word);
      W constant{};
      std::memcpy(&constant, constant_.raw(), sizeof(W));
      const W* constant_input = constant_input_ ? inputs[2].as<const W>() : nullptr;
      if (constant_input && on_host(inputs[2])) {  // read it here, the kernel gets the value
        std::memcpy(&constant, constant_input, sizeof(W));
        constant_input = nullptr;
      }
      pad_kernel<W><<<grid_for(n), kBlock, 0, native_stream(stream)>>>(inputs[0].as<const W>(), outputs[0].as<W>(), p,
                                                                       constant_input, constant, n, flag_.device_ptr());
      ONNXTRAIN_CUDA_CHECK_LAUNCH(pad_kernel<W>);
    });
  }

 private:
  KernelSpec spec_;
  PadLaunch launch_;
  Tensor constant_;  // zero, or the `value` attribute before opset 11, in the data's dtype
  bool constant_input_ = false, axes_input_ = false;
  DeviceErrorFlag flag_;
};

// PadGrad(dY, x_shape, pads) -> dX shaped x_shape (the allocated output); pads has 2 * rank entries.
class PadGradKernel : public Kernel {
 public:
  explicit PadGradKernel(const KernelSpec& spec) : spec_(spec) {
    dtype_ = reference::require_shape_grad_inputs(spec, 3, {"dY", "x_shape", "pads"});
    const std::vector<int64_t>& in = spec.outputs[0].sizes;
    const std::vector<int64_t>& padded = spec.inputs[0].sizes;
    launch_.g = pad_geometry(spec, in, padded);
    launch_.axis_count = static_cast<int64_t>(in.size());
    if (spec.inputs[2].numel() != 2 * launch_.axis_count)
      kernel_fail(spec, "pads has " + std::to_string(spec.inputs[2].numel()) +
                            " entries, expected a begin and an end for each of " + std::to_string(in.size()) + " axes");
    const PadMode mode = launch_.g.mode;
    if ((mode == PadMode::Reflect || mode == PadMode::Wrap) && spec.inputs[0].numel() > 0) {
      for (size_t k = 0; k < in.size(); ++k)
        if (in[k] == 0 && padded[k] > 0) kernel_fail(spec, "cannot pad an empty axis in reflect or wrap mode");
    }
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    flag_.throw_if_raised(spec_, pad_status_text);
    const int64_t n = outputs[0].numel();
    if (n == 0) return;
    DeviceGuard guard(stream);
    PadLaunch p = launch_;
    bind_pads(spec_, p, inputs[2], nullptr);
    reference::dispatch_float(dtype_, [&](auto zero) {
      using T = decltype(zero);
      pad_grad_kernel<T><<<grid_for(n), kBlock, 0, native_stream(stream)>>>(inputs[0].as<const T>(), outputs[0].as<T>(),
                                                                            p, n, flag_.device_ptr());
      ONNXTRAIN_CUDA_CHECK_LAUNCH(pad_grad_kernel<T>);
    });
  }

 private:
  KernelSpec spec_;
  DType dtype_ = DType::Undefined;
  PadLaunch launch_;
  DeviceErrorFlag flag_;
};

}  // namespace

void register_cuda_pad_kernels(KernelRegistry& registry) {
  registry.add(movement_entry("Pad", reference::kFixedSizeDTypes, &reference::make_kernel<PadKernel>));
  registry.add(
      movement_entry("PadGrad", reference::kFloatDTypes, &reference::make_kernel<PadGradKernel>, "ai.onnxtrain"));
}

}  // namespace onnxtrain::cuda
