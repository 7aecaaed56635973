// cuDNN pooling, float32: MaxPool (CUDNN_POOLING_MAX_DETERMINISTIC), AveragePool (count_include_pad 1:
// CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING, 0: ..._EXCLUDE_PADDING), GlobalAveragePool, GlobalMaxPool,
// and ai.onnxtrain MaxPoolGrad(dY, X) / AveragePoolGrad(dY, x_shape) -> dX.
// Windows map onto cuDNN's symmetric pads as in conv.cc (cudnn_window). What cuDNN cannot express -
// asymmetric pads, odd SAME pads, ceil_mode overhangs, dilations, AveragePool's count_include_pad over
// a ceil_mode overhang, MaxPool's Indices output - runs the direct kernels of pooling_direct.cu
// (cudnn_direct_pooling.h: the reference's rules, one thread per output or per input element) for 1 to 3
// spatial dims; beyond that the problem fails at prepare naming the attribute. MaxPoolGrad always runs
// the direct kernel: on tied maxima (ReLU zeros in a window are common) the reference gives dY to the
// first maximum in window order, and cuDNN does not document which one it picks. Average pooling's
// backward reads neither Y nor X, so AveragePoolGrad passes dY and dX in their places. Global pools use the whole plane
// as the window: the native (H,W) or (D,H,W) window for 2 or 3 spatial dims, else the plane as one axis.
#include "kernels/cuda/cuda_kernels.h"

#if ONNXTRAIN_HAVE_CUDNN

#include "kernels/cuda/cudnn_common.h"
#include "kernels/cuda/cudnn_direct_pooling.h"
#include "kernels/reference/pool_window.h"

namespace onnxtrain {
namespace cuda {
// pooling_direct.cu, enqueued on `stream`; `indices` and (average pooling) `x` may be null.
void launch_direct_pool_forward(const DirectPool& p, const float* x, float* y, int64_t* indices, cudaStream_t stream);
void launch_direct_pool_backward(const DirectPool& p, const float* x, const float* dy, float* dx, cudaStream_t stream);
// MaxPool's backward in two passes (max_pool2d_in_two_passes): `winners` holds planes·out_plane ints.
void launch_max_pool2d_backward(const DirectPool& p, const float* x, const float* dy, float* dx, int* winners,
                                cudaStream_t stream);
}  // namespace cuda
namespace {

using namespace cuda;
using reference::kernel_fail;

enum class PoolPass { Forward, MaxGrad, AverageGrad };

// cuDNN forward pooling, or (`average_grad`) AveragePoolGrad.
class CudnnPool final : public Kernel {
 public:
  // unpooled/pooled: X (dX) and Y (dY) dims.
  CudnnPool(bool average_grad, cudnnPoolingMode_t mode, const CudnnWindow& window, const std::vector<int>& unpooled,
            const std::vector<int>& pooled, bool empty)
      : average_grad_(average_grad), pool_(mode, window), x_(unpooled), y_(pooled), empty_(empty) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    DeviceGuard guard(stream);
    const float one = 1.0f, zero = 0.0f;
    if (empty_) {  // no windows: dX is all zeros, Y has no elements
      if (average_grad_ && outputs[0].numel() > 0) {
        ONNXTRAIN_CUDA_CHECK(
            cudaMemsetAsync(outputs[0].data, 0, static_cast<size_t>(outputs[0].numel()) * 4, native_stream(stream)));
      }
      return;
    }
    cudnnHandle_t handle = cudnn_handle(stream);
    if (!average_grad_) {
      ONNXTRAIN_CUDNN_CHECK(
          cudnnPoolingForward(handle, pool_.get(), &one, x_.get(), inputs[0].data, &zero, y_.get(), outputs[0].data));
      return;
    }
    ONNXTRAIN_CUDNN_CHECK(cudnnPoolingBackward(handle, pool_.get(), &one, y_.get(), inputs[0].data, y_.get(),
                                               inputs[0].data, x_.get(), outputs[0].data, &zero, x_.get(),
                                               outputs[0].data));
  }

 private:
  bool average_grad_;
  PoolingDescriptor pool_;
  TensorDescriptor x_, y_;
  bool empty_;
};

// Pooling computed directly (cudnn_direct_pooling.h): forward, or with `backward` the grads.
class DirectPoolKernel final : public Kernel {
 public:
  DirectPoolKernel(const DirectPool& pool, bool backward) : pool_(pool), backward_(backward) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    DeviceGuard guard(stream);
    cudaStream_t s = native_stream(stream);
    if (!backward_) {
      if (pool_.planes * pool_.out_plane == 0) return;
      int64_t* indices = outputs.size() > 1 ? static_cast<int64_t*>(outputs[1].data) : nullptr;
      launch_direct_pool_forward(pool_, inputs[0].as<const float>(), outputs[0].as<float>(), indices, s);
      return;
    }
    if (pool_.planes * pool_.in_plane == 0) return;
    if (pool_.out_plane == 0) {  // no windows: nothing flows back
      ONNXTRAIN_CUDA_CHECK(
          cudaMemsetAsync(outputs[0].data, 0, static_cast<size_t>(pool_.planes * pool_.in_plane) * 4, s));
      return;
    }
    const float* x = pool_.max ? inputs[1].as<const float>() : nullptr;
    if (max_pool2d_in_two_passes(pool_)) {
      int* winners = static_cast<int*>(workspace(stream, static_cast<size_t>(pool_.planes * pool_.out_plane) * 4));
      launch_max_pool2d_backward(pool_, x, inputs[0].as<const float>(), outputs[0].as<float>(), winners, s);
      return;
    }
    launch_direct_pool_backward(pool_, x, inputs[0].as<const float>(), outputs[0].as<float>(), s);
  }

 private:
  DirectPool pool_;
  bool backward_;
};

// MaxPool, AveragePool and their grads: `unpooled` is X (dX), `pooled` Y (dY). The caller has validated
// the spec with the reference kernel (so both exist). `indices`: MaxPool's Indices output is wanted.
std::unique_ptr<Kernel> make_window_pool(const KernelSpec& spec, PoolPass pass, bool max, const TensorDesc& unpooled,
                                         const TensorDesc& pooled, bool indices = false) {
  require_all_float32(spec, pass == PoolPass::AverageGrad ? 1 : SIZE_MAX, 1);
  const reference::PoolGeometry g = reference::read_pool_geometry(spec, unpooled, "X", pooled, "Y");
  const bool include_pad = !max && reference::read_count_include_pad(spec);
  const WindowUse use =
      max ? WindowUse::MaxPool : (include_pad ? WindowUse::AveragePoolIncludePad : WindowUse::AveragePoolExcludePad);
  const bool empty = unpooled.numel() == 0 || pooled.numel() == 0;
  CudnnWindow window = cudnn_window(g.window, use);
  if (!window.problem.empty() || indices || pass == PoolPass::MaxGrad) {
    if (g.window.spatial() > static_cast<size_t>(kDirectPoolMaxDims)) kernel_fail(spec, window.problem);
    const int64_t storage_order = max && pass == PoolPass::Forward ? spec.attributes.get_int("storage_order", 0) : 0;
    return std::make_unique<DirectPoolKernel>(direct_pool(g.window, g.planes, max, include_pad, storage_order == 1),
                                              pass != PoolPass::Forward);
  }
  const cudnnPoolingMode_t mode = max           ? CUDNN_POOLING_MAX_DETERMINISTIC
                                  : include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  return std::make_unique<CudnnPool>(pass == PoolPass::AverageGrad, mode, window,
                                     require_cudnn_dims(spec, unpooled.sizes, "X"),
                                     require_cudnn_dims(spec, pooled.sizes, "Y"), empty);
}

std::unique_ptr<Kernel> make_max_pool(const KernelSpec& spec) {
  validate_with_reference(spec);
  const bool indices = spec.outputs.size() > 1 && spec.outputs[1].present();  // cuDNN has none: direct kernel
  return make_window_pool(spec, PoolPass::Forward, true, spec.inputs[0], spec.outputs[0], indices);
}

std::unique_ptr<Kernel> make_average_pool(const KernelSpec& spec) {
  validate_with_reference(spec);
  return make_window_pool(spec, PoolPass::Forward, false, spec.inputs[0], spec.outputs[0]);
}

std::unique_ptr<Kernel> make_max_pool_grad(const KernelSpec& spec) {
  validate_with_reference(spec);
  return make_window_pool(spec, PoolPass::MaxGrad, true, spec.outputs[0], spec.inputs[0]);
}

std::unique_ptr<Kernel> make_average_pool_grad(const KernelSpec& spec) {
  validate_with_reference(spec);
  return make_window_pool(spec, PoolPass::AverageGrad, false, spec.outputs[0], spec.inputs[0]);
}

template <bool Max>
std::unique_ptr<Kernel> make_global_pool(const KernelSpec& spec) {
  validate_with_reference(spec);
  require_all_float32(spec);
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  const bool empty = spec.inputs[0].numel() == 0 || spec.outputs[0].numel() == 0;
  if (spec.inputs[0].numel() == 0 && spec.outputs[0].numel() > 0) {
    kernel_fail(spec, "X " + reference::sizes_to_string(x) + " has empty planes: not supported by the cuDNN kernel");
  }
  // Native window for 2 or 3 spatial dims, else the plane as one axis: X (N,C,plane,1).
  std::vector<int64_t> x_view = x;
  if (x.size() != 4 && x.size() != 5) x_view = {x[0], x[1], reference::product_of(x, 2), 1};
  std::vector<int64_t> y_view(x_view.size(), 1);
  y_view[0] = x[0];
  y_view[1] = x[1];
  CudnnWindow window;
  for (size_t d = 2; d < x_view.size(); ++d) {
    if (!fits_int(x_view[d])) kernel_fail(spec, "X " + reference::sizes_to_string(x) + " does not fit cuDNN's int");
    window.kernel.push_back(empty ? 1 : static_cast<int>(x_view[d]));
    window.pads.push_back(0);
    window.strides.push_back(1);
    window.dilations.push_back(1);
  }
  return std::make_unique<CudnnPool>(
      false, Max ? CUDNN_POOLING_MAX_DETERMINISTIC : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING, window,
      require_cudnn_dims(spec, x_view, "X"), require_cudnn_dims(spec, y_view, "Y"), empty);
}

}  // namespace

void register_cuda_pooling_kernels(KernelRegistry& registry) {
  registry.add(cuda_entry("", "MaxPool", &make_max_pool));
  registry.add(cuda_entry("", "AveragePool", &make_average_pool));
  registry.add(cuda_entry("", "GlobalAveragePool", &make_global_pool<false>));
  registry.add(cuda_entry("", "GlobalMaxPool", &make_global_pool<true>));
  registry.add(cuda_entry("ai.onnxtrain", "MaxPoolGrad", &make_max_pool_grad));
  registry.add(cuda_entry("ai.onnxtrain", "AveragePoolGrad", &make_average_pool_grad));
}

}  // namespace onnxtrain

#else  // no cuDNN: no pooling kernels

namespace onnxtrain {
void register_cuda_pooling_kernels(KernelRegistry&) {}
}  // namespace onnxtrain

#endif
