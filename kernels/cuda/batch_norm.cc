// cuDNN BatchNormalization and ai.onnxtrain BatchNormalizationGrad, float32 throughout (scale, B, mean,
// var and the extra outputs too; mixed dtypes of opset 15 fail at prepare). X is viewed as (N, C, Π D, 1)
// in CUDNN_BATCHNORM_SPATIAL mode, or (N, Π D, 1, 1) in CUDNN_BATCHNORM_PER_ACTIVATION for opset 7's
// spatial=0 (a 1-D X is (N,1,1,1)).
// Training (training_mode=1 from opset 14, any output beyond Y before it) runs
// cudnnBatchNormalizationForwardTraining with exponentialAverageFactor 1 into zeroed scratch, which then
// holds the batch mean and cuDNN's unbiased batch variance; a small kernel (batch_norm_stats.cu) turns these into the
// outputs with the reference's (ONNX's) rule: running = input·momentum + batch·(1-momentum) with the population
// variance (population_variance/running_statistic, cudnn_params.h), saved mean/var (before opset 14) the
// batch mean and population variance. Inference runs cudnnBatchNormalizationForwardInference.
// The grad in training mode is cudnnBatchNormalizationBackward (it recomputes the batch statistics from X);
// outside training mean/var are constants and a kernel of our own (batch_norm_stats.cu) reduces dY per
// feature.
#include "graph/fused_activation.h"
#include "kernels/cuda/cuda_kernels.h"

#if ONNXTRAIN_HAVE_CUDNN

#include "kernels/cuda/cudnn_common.h"
#include "kernels/reference/nn_common.h"

namespace onnxtrain {
namespace cuda {
// batch_norm_stats.cu, enqueued on `stream`: the training outputs from cuDNN's batch mean and unbiased
// variance (null outputs are skipped), and the grad with constant mean/var.
void launch_batch_norm_running_stats(const float* batch_mean, const float* unbiased_var, const float* input_mean,
                                     const float* input_var, float* running_mean, float* running_var, float* saved_mean,
                                     float* saved_var, int64_t features, int64_t count, double momentum,
                                     cudaStream_t stream);
void launch_batch_norm_grad_frozen(const float* dy, const float* x, const float* scale, const float* mean,
                                   const float* var, float* dx, float* dscale, float* dbias, int64_t batch,
                                   int64_t features, int64_t inner, double epsilon, cudaStream_t stream);
}  // namespace cuda
namespace {

using namespace cuda;
using reference::kernel_fail;

float* out_or_null(std::span<const TensorView> outputs, size_t i) {
  return i < outputs.size() ? static_cast<float*>(outputs[i].data) : nullptr;
}

struct BatchNormLayout {
  reference::BatchNormGeometry g;
  cudnnBatchNormMode_t mode = CUDNN_BATCHNORM_SPATIAL;
  std::vector<int> dims;  // X as cuDNN sees it
};

class CudnnBatchNorm final : public Kernel {
 public:
  CudnnBatchNorm(const BatchNormLayout& layout, bool backward) : layout_(layout), backward_(backward), x_(layout.dims) {
    ONNXTRAIN_CUDNN_CHECK(cudnnDeriveBNTensorDescriptor(stats_.get(), x_.get(), layout.mode));
  }

  void run(Stream& stream, std::span<const TensorView> inputs, std::span<const TensorView> outputs) override {
    const reference::BatchNormGeometry& g = layout_.g;
    if (g.batch * g.features * g.inner == 0) {
      // No elements (cuDNN takes none): Y and dX are empty, but the grad's dScale and dBias are per feature,
      // sums over nothing, which the reference writes as zeros.
      if (backward_ && g.features > 0) {
        DeviceGuard guard(stream);
        for (size_t i : {size_t{1}, size_t{2}}) {
          if (float* sums = out_or_null(outputs, i)) {
            ONNXTRAIN_CUDA_CHECK(cudaMemsetAsync(sums, 0, static_cast<size_t>(g.features) * 4, native_stream(stream)));
          }
        }
      }
      return;
    }
    DeviceGuard guard(stream);
    if (backward_) {
      run_backward(stream, inputs, outputs);
    } else {
      run_forward(stream, inputs, outputs);
    }
  }

 private:
  void run_forward(Stream& stream, std::span<const TensorView> in, std::span<const TensorView> out) {
    const reference::BatchNormGeometry& g = layout_.g;
    cudnnHandle_t handle = cudnn_handle(stream);
    const float one = 1.0f, zero = 0.0f;
    if (!g.training) {
      ONNXTRAIN_CUDNN_CHECK(cudnnBatchNormalizationForwardInference(
          handle, layout_.mode, &one, &zero, x_.get(), in[0].data, x_.get(), out[0].data, stats_.get(), in[1].data,
          in[2].data, in[3].data, in[4].data, g.epsilon));
      return;
    }
    const size_t stat_bytes = static_cast<size_t>(g.features) * 4;
    ScratchLayout layout;
    const size_t mean_at = layout.add(stat_bytes), var_at = layout.add(stat_bytes);
    char* scratch = static_cast<char*>(workspace(stream, layout.total()));
    float* batch_mean = reinterpret_cast<float*>(scratch + mean_at);
    float* unbiased_var = reinterpret_cast<float*>(scratch + var_at);
    // Zeroed: with factor 1 cuDNN still reads the old value (times 0), and 0·NaN would be NaN.
    ONNXTRAIN_CUDA_CHECK(cudaMemsetAsync(scratch, 0, layout.total(), native_stream(stream)));
    ONNXTRAIN_CUDNN_CHECK(cudnnBatchNormalizationForwardTraining(
        handle, layout_.mode, &one, &zero, x_.get(), in[0].data, x_.get(), out[0].data, stats_.get(), in[1].data,
        in[2].data, 1.0, batch_mean, unbiased_var, g.epsilon, nullptr, nullptr));
    float* running_mean = out_or_null(out, 1);
    float* running_var = out_or_null(out, 2);
    float* saved_mean = out_or_null(out, 3);
    float* saved_var = out_or_null(out, 4);
    if (!running_mean && !running_var && !saved_mean && !saved_var) return;
    launch_batch_norm_running_stats(batch_mean, unbiased_var, in[3].as<const float>(), in[4].as<const float>(),
                                    running_mean, running_var, saved_mean, saved_var, g.features, g.batch * g.inner,
                                    g.momentum, native_stream(stream));
  }

  void run_backward(Stream& stream, std::span<const TensorView> in, std::span<const TensorView> out) {
    const reference::BatchNormGeometry& g = layout_.g;
    float* dx = out_or_null(out, 0);
    float* dscale = out_or_null(out, 1);
    float* dbias = out_or_null(out, 2);
    if (!g.training) {
      launch_batch_norm_grad_frozen(in[0].as<const float>(), in[1].as<const float>(), in[2].as<const float>(),
                                    in[3].as<const float>(), in[4].as<const float>(), dx, dscale, dbias, g.batch,
                                    g.features, g.inner, g.epsilon, native_stream(stream));
      return;
    }
    // cuDNN writes all three: the ones not asked for go to scratch.
    const size_t stat_bytes = static_cast<size_t>(g.features) * 4;
    ScratchLayout layout;
    const size_t dx_at = dx ? 0 : layout.add(static_cast<size_t>(g.batch * g.features * g.inner) * 4);
    const size_t dscale_at = dscale ? 0 : layout.add(stat_bytes);
    const size_t dbias_at = dbias ? 0 : layout.add(stat_bytes);
    char* scratch = layout.bytes ? static_cast<char*>(workspace(stream, layout.total())) : nullptr;
    if (!dx) dx = reinterpret_cast<float*>(scratch + dx_at);
    if (!dscale) dscale = reinterpret_cast<float*>(scratch + dscale_at);
    if (!dbias) dbias = reinterpret_cast<float*>(scratch + dbias_at);
    cudnnHandle_t handle = cudnn_handle(stream);
    const float one = 1.0f, zero = 0.0f;
    ONNXTRAIN_CUDNN_CHECK(cudnnBatchNormalizationBackward(handle, layout_.mode, &one, &zero, &one, &zero, x_.get(),
                                                          in[1].data, x_.get(), in[0].data, x_.get(), dx, stats_.get(),
                                                          in[2].data, dscale, dbias, g.epsilon, nullptr, nullptr));
  }

  BatchNormLayout layout_;
  bool backward_;
  TensorDescriptor x_;      // X, Y, dY and dX share it
  TensorDescriptor stats_;  // scale, B, mean, var (derived)
};

// spatial=0 (opset 7: one statistic per non-batch element) is cuDNN's per-activation mode.
BatchNormLayout layout_for(const KernelSpec& spec, const reference::BatchNormGeometry& g, bool per_channel) {
  if (!fits_int(g.features)) kernel_fail(spec, std::to_string(g.features) + " features do not fit cuDNN's int");
  BatchNormLayout layout;
  layout.g = g;
  layout.mode = per_channel ? CUDNN_BATCHNORM_SPATIAL : CUDNN_BATCHNORM_PER_ACTIVATION;
  layout.dims = require_cudnn_dims(spec, {g.batch, g.features, g.inner, 1}, "X");
  return layout;
}

// The Relu fused into a training graph's BatchNorm is a CPU rewrite (graph/autodiff/batch_norm_relu.h);
// Trainer never makes it for a GPU, and these kernels would drop it.
void refuse_fused_relu(const KernelSpec& spec) {
  if (fuses_relu(spec.attributes)) kernel_fail(spec, "the fused Relu runs on the CPU only; train on the GPU unfused");
}

std::unique_ptr<Kernel> make_batch_norm(const KernelSpec& spec) {
  refuse_fused_relu(spec);
  validate_with_reference(spec);
  require_all_float32(spec);
  const std::vector<int64_t>& x = spec.inputs[0].sizes;
  reference::BatchNormGeometry g;
  g.batch = x[0];
  const bool per_channel = spec.opset >= 9 || spec.attributes.get_int("spatial", 1) != 0;
  g.features = per_channel ? (x.size() > 1 ? x[1] : 1) : reference::product_of(x, 1);
  g.inner = per_channel ? reference::product_of(x, 2) : 1;
  g.epsilon = spec.attributes.get_float("epsilon", 1e-5);
  g.momentum = spec.attributes.get_float("momentum", 0.9);
  bool extra_outputs = false;
  for (size_t i = 1; i < spec.outputs.size(); ++i) extra_outputs = extra_outputs || spec.outputs[i].present();
  g.training = spec.opset >= 14 ? spec.attributes.get_int("training_mode", 0) != 0 : extra_outputs;
  if (g.training && spec.inputs[0].numel() == 0) kernel_fail(spec, "training on an empty X has no batch statistics");
  return std::make_unique<CudnnBatchNorm>(layout_for(spec, g, per_channel), false);
}

std::unique_ptr<Kernel> make_batch_norm_grad(const KernelSpec& spec) {
  refuse_fused_relu(spec);
  validate_with_reference(spec);
  require_all_float32(spec);
  const std::vector<int64_t>& x = spec.inputs[1].sizes;
  reference::BatchNormGeometry g;
  g.batch = x[0];
  g.features = spec.inputs[2].numel();
  const int64_t channels = x.size() > 1 ? x[1] : 1;
  const bool per_channel = g.features == channels;  // else opset 7's spatial=0: one per non-batch element
  g.inner = per_channel ? reference::product_of(x, 2) : 1;
  g.epsilon = spec.attributes.get_float("epsilon", 1e-5);
  g.training = spec.attributes.get_int("training_mode", 0) != 0;
  return std::make_unique<CudnnBatchNorm>(layout_for(spec, g, per_channel), true);
}

}  // namespace

void register_cuda_batch_norm_kernels(KernelRegistry& registry) {
  registry.add(cuda_entry("", "BatchNormalization", &make_batch_norm));
  registry.add(cuda_entry("ai.onnxtrain", "BatchNormalizationGrad", &make_batch_norm_grad));
}

}  // namespace onnxtrain

#else  // no cuDNN: no BatchNormalization kernels

namespace onnxtrain {
void register_cuda_batch_norm_kernels(KernelRegistry&) {}
}  // namespace onnxtrain

#endif
