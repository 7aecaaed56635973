// cuDNN LRN across channels (CUDNN_LRN_CROSS_CHANNEL_DIM1) and ai.onnxtrain LRNGrad(dY, X) -> dX, float32.
// cuDNN's window is the reference's (lookBehind floor((size-1)/2), lookAhead the rest) and its alpha is
// divided by size inside the library, as ONNX's. X (N,C,D1..Dn) is viewed as (N,C,Π D,1): LRN only mixes
// channels. cuDNN bounds the attributes (size 1..16, bias >= 1e-5, beta >= 0.01): other values fail at
// prepare naming the attribute. cuDNN's backward pass needs Y: LRNGrad recomputes it into the stream's
// workspace.
#include "kernels/cuda/cuda_kernels.h"

#if ONNXTRAIN_HAVE_CUDNN

#include "kernels/cuda/cudnn_common.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain {
namespace {

using namespace cuda;
using reference::kernel_fail;

class CudnnLrn final : public Kernel {
 public:
  CudnnLrn(bool backward, const reference::LrnGeometry& g, const std::vector<int>& dims)
      : backward_(backward),
        lrn_(static_cast<unsigned>(g.size), g.alpha, g.beta, g.bias),
        x_(dims),
        bytes_(static_cast<size_t>(g.batch * g.channels * g.plane) * 4) {}

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    if (bytes_ == 0) return;
    DeviceGuard guard(stream);
    cudnnHandle_t handle = cudnn_handle(stream);
    const float one = 1.0f, zero = 0.0f;
    if (!backward_) {
      ONNXTRAIN_CUDNN_CHECK(cudnnLRNCrossChannelForward(handle, lrn_.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &one,
                                                        x_.get(), inputs[0].data, &zero, x_.get(), outputs[0].data));
      return;
    }
    const void* dy = inputs[0].data;
    const void* x = inputs[1].data;
    void* y = workspace(stream, bytes_);
    ONNXTRAIN_CUDNN_CHECK(cudnnLRNCrossChannelForward(handle, lrn_.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, x_.get(),
                                                      x, &zero, x_.get(), y));
    ONNXTRAIN_CUDNN_CHECK(cudnnLRNCrossChannelBackward(handle, lrn_.get(), CUDNN_LRN_CROSS_CHANNEL_DIM1, &one, x_.get(),
                                                       y, x_.get(), dy, x_.get(), x, &zero, x_.get(), outputs[0].data));
  }

 private:
  bool backward_;
  LrnDescriptor lrn_;
  TensorDescriptor x_;  // X, Y, dY and dX share it
  size_t bytes_;
};

template <bool Backward>
std::unique_ptr<Kernel> make_lrn(const KernelSpec& spec) {
  validate_with_reference(spec);
  require_all_float32(spec);
  const std::vector<int64_t>& x = spec.inputs[Backward ? 1 : 0].sizes;
  const reference::LrnGeometry g = reference::read_lrn_geometry(spec, x);
  if (g.size < CUDNN_LRN_MIN_N || g.size > CUDNN_LRN_MAX_N) {
    kernel_fail(spec, "size " + std::to_string(g.size) + " is outside cuDNN's LRN window range 1..16");
  }
  if (g.bias < CUDNN_LRN_MIN_K) kernel_fail(spec, "bias " + std::to_string(g.bias) + " is below cuDNN's minimum 1e-5");
  if (g.beta < CUDNN_LRN_MIN_BETA) {
    kernel_fail(spec, "beta " + std::to_string(g.beta) + " is below cuDNN's minimum 0.01");
  }
  return std::make_unique<CudnnLrn>(Backward, g, require_cudnn_dims(spec, {g.batch, g.channels, g.plane, 1}, "X"));
}

}  // namespace

void register_cuda_lrn_kernels(KernelRegistry& registry) {
  registry.add(cuda_entry("", "LRN", &make_lrn<false>));
  registry.add(cuda_entry("ai.onnxtrain", "LRNGrad", &make_lrn<true>));
}

}  // namespace onnxtrain

#else  // no cuDNN: no LRN kernels

namespace onnxtrain {
void register_cuda_lrn_kernels(KernelRegistry&) {}
}  // namespace onnxtrain

#endif
