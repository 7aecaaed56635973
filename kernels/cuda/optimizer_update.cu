// Grid-stride kernels of the optimizer updates (declared in kernels/cuda/optimizer_update.h): each thread
// applies the kernels/optimizer_math.h functor to its elements, the same code the host loops run. Built
// with --fmad=false (kernels/cuda/optimizer_sources.cmake) so nvcc does not contract a·b + c into an FMA,
// which would round differently from the host; sqrt and division are IEEE-rounded on both sides.
#include "kernels/cuda/cuda_context.h"
#include "kernels/cuda/optimizer_update.h"

namespace onnxtrain::cuda {

namespace {

constexpr unsigned int kOptimizerBlock = 256;

// One kernel for every arity: the states (zero to three arrays) follow w and g in the functor's order.
template <typename Fn, typename... States>
__global__ void optimizer_kernel(Fn fn, float* __restrict__ w, const float* __restrict__ g, int64_t n,
                                 States* __restrict__... states) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    fn(w[i], g[i], states[i]...);
}

template <typename Fn, typename... States>
void launch(const Fn& fn, float* w, const float* g, int64_t n, const Stream& stream, States*... states) {
  if (n <= 0) return;
  DeviceGuard guard(stream);
  optimizer_kernel<<<grid_for(n, kOptimizerBlock), kOptimizerBlock, 0, native_stream(stream)>>>(fn, w, g, n, states...);
  ONNXTRAIN_CUDA_CHECK_LAUNCH("optimizer_kernel");
}

__global__ void scale_kernel(float* __restrict__ g, double factor, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    g[i] = static_cast<float>(static_cast<double>(g[i]) * factor);
}

__global__ void scale_values_kernel(optimizer_math::ScaleValue f, float* __restrict__ v, int64_t n) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) f(v[i]);
}

template <typename Fn, typename... States>
__global__ void prediction_kernel(Fn fn, float* __restrict__ out, const float* __restrict__ w, int64_t n,
                                  const States* __restrict__... states) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    fn(out[i], w[i], states[i]...);
}

template <typename Fn, typename... States>
void launch_prediction(const Fn& fn, float* out, const float* w, int64_t n, const Stream& stream,
                       const States*... states) {
  if (n <= 0) return;
  DeviceGuard guard(stream);
  prediction_kernel<<<grid_for(n, kOptimizerBlock), kOptimizerBlock, 0, native_stream(stream)>>>(fn, out, w, n,
                                                                                                 states...);
  ONNXTRAIN_CUDA_CHECK_LAUNCH("prediction_kernel");
}

// Every thread that sees a non-finite value stores the same 1: a benign race, no atomics needed.
__global__ void unscale_kernel(optimizer_math::UnscaleGradient f, float* __restrict__ g, int64_t n,
                               int* __restrict__ nonfinite) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  bool finite = true;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    finite = f(g[i]) && finite;
  if (!finite) *nonfinite = 1;
}

}  // namespace

void unscale_gradient(const optimizer_math::UnscaleGradient& f, float* g, int64_t n, int* nonfinite,
                      const Stream& stream) {
  if (n <= 0) return;
  DeviceGuard guard(stream);
  unscale_kernel<<<grid_for(n, kOptimizerBlock), kOptimizerBlock, 0, native_stream(stream)>>>(f, g, n, nonfinite);
  ONNXTRAIN_CUDA_CHECK_LAUNCH("unscale_kernel");
}

void accumulate_gradient(const optimizer_math::AccumulateGradient& f, float* acc, const float* g, int64_t n,
                         const Stream& stream) {
  launch(f, acc, g, n, stream);  // the updates' kernel: f(acc[i], g[i]) with no state arrays
}

void scale_values(const optimizer_math::ScaleValue& f, float* v, int64_t n, const Stream& stream) {
  if (n <= 0) return;
  DeviceGuard guard(stream);
  scale_values_kernel<<<grid_for(n, kOptimizerBlock), kOptimizerBlock, 0, native_stream(stream)>>>(f, v, n);
  ONNXTRAIN_CUDA_CHECK_LAUNCH("scale_values_kernel");
}

void predict_weights(const optimizer_math::PredictAhead<optimizer_math::SgdUpdate>& f, float* out, const float* w,
                     const float* estimate, int64_t n, const Stream& stream) {
  launch_prediction(f, out, w, n, stream, estimate);
}

void predict_weights(const optimizer_math::PredictAhead<optimizer_math::SgdMomentumUpdate>& f, float* out,
                     const float* w, const float* estimate, const float* buf, int64_t n, const Stream& stream) {
  launch_prediction(f, out, w, n, stream, estimate, buf);
}

void predict_weights(const optimizer_math::PredictAhead<optimizer_math::SgdNesterovUpdate>& f, float* out,
                     const float* w, const float* estimate, const float* buf, int64_t n, const Stream& stream) {
  launch_prediction(f, out, w, n, stream, estimate, buf);
}

void predict_weights(const optimizer_math::PredictAhead<optimizer_math::AdamUpdate>& f, float* out, const float* w,
                     const float* estimate, const float* m, const float* h, int64_t n, const Stream& stream) {
  launch_prediction(f, out, w, n, stream, estimate, m, h);
}

void predict_weights(const optimizer_math::PredictAhead<optimizer_math::AdamUpdate>& f, float* out, const float* w,
                     const float* estimate, const float* m, const float* h, const float* hmax, int64_t n,
                     const Stream& stream) {
  launch_prediction(f, out, w, n, stream, estimate, m, h, hmax);
}

void predict_weights(const optimizer_math::PredictAhead<optimizer_math::AdagradUpdate>& f, float* out, const float* w,
                     const float* estimate, const float* sum, int64_t n, const Stream& stream) {
  launch_prediction(f, out, w, n, stream, estimate, sum);
}

void smooth_gradient(const optimizer_math::SmoothGradient& f, float* avg, const float* g, int64_t n,
                     const Stream& stream) {
  launch(f, avg, g, n, stream);
}

void scale_gradient(float* g, double factor, int64_t n, const Stream& stream) {
  if (n <= 0) return;
  DeviceGuard guard(stream);
  scale_kernel<<<grid_for(n, kOptimizerBlock), kOptimizerBlock, 0, native_stream(stream)>>>(g, factor, n);
  ONNXTRAIN_CUDA_CHECK_LAUNCH("scale_kernel");
}

void optimizer_update(const optimizer_math::SgdUpdate& f, float* w, const float* g, int64_t n, const Stream& stream) {
  launch(f, w, g, n, stream);
}

void optimizer_update(const optimizer_math::SgdMomentumUpdate& f, float* w, const float* g, float* momentum_buffer,
                      int64_t n, const Stream& stream) {
  launch(f, w, g, n, stream, momentum_buffer);
}

void optimizer_update(const optimizer_math::SgdNesterovUpdate& f, float* w, const float* g, float* momentum_buffer,
                      int64_t n, const Stream& stream) {
  launch(f, w, g, n, stream, momentum_buffer);
}

void optimizer_update(const optimizer_math::AdamUpdate& f, float* w, const float* g, float* exp_avg, float* exp_avg_sq,
                      int64_t n, const Stream& stream) {
  launch(f, w, g, n, stream, exp_avg, exp_avg_sq);
}

void optimizer_update(const optimizer_math::AdamUpdate& f, float* w, const float* g, float* exp_avg, float* exp_avg_sq,
                      float* max_exp_avg_sq, int64_t n, const Stream& stream) {
  launch(f, w, g, n, stream, exp_avg, exp_avg_sq, max_exp_avg_sq);
}

void optimizer_update(const optimizer_math::AdagradUpdate& f, float* w, const float* g, float* sum, int64_t n,
                      const Stream& stream) {
  launch(f, w, g, n, stream, sum);
}

}  // namespace onnxtrain::cuda
