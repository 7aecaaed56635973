// CUDA launchers of the optimizer updates (and of the weighting of a data-parallel replica's gradient):
// one grid-stride kernel per functor of kernels/optimizer_math.h, over device pointers on a Stream's
// device, enqueued on its stream without synchronising the host. The
// functors are the ones executor/optim/*.cc run on the host (the .cu file is compiled with --fmad=false),
// so a device update equals the host update bit for bit. executor/device_optimizer.cc calls them for a
// Trainer's device-resident weights (with CUDA compiled out there is no definition, and no caller can be
// reached). Plain C++ (no CUDA headers), so executor code may include it.
//
//   const auto f = optimizer_math::adam_update(adamw, torch, lr, wd, b1, b2, eps, 0.0, state.step);
//   cuda::optimizer_update(f, w, g, exp_avg, exp_avg_sq, n, stream);   // then ++state.step on the host
#pragma once

#include <cstdint>

#include "kernels/kernel.h"
#include "kernels/loss_scale_math.h"
#include "kernels/optimizer_math.h"
#include "kernels/weight_math.h"

namespace onnxtrain::cuda {

// w, g and every state array hold n floats on the stream's device; w and the states are updated in place.
void optimizer_update(const optimizer_math::SgdUpdate& f, float* w, const float* g, int64_t n, const Stream& stream);
void optimizer_update(const optimizer_math::SgdMomentumUpdate& f, float* w, const float* g, float* momentum_buffer,
                      int64_t n, const Stream& stream);
void optimizer_update(const optimizer_math::SgdNesterovUpdate& f, float* w, const float* g, float* momentum_buffer,
                      int64_t n, const Stream& stream);
void optimizer_update(const optimizer_math::AdamUpdate& f, float* w, const float* g, float* exp_avg, float* exp_avg_sq,
                      int64_t n, const Stream& stream);
// amsgrad: max_exp_avg_sq keeps the running maximum of exp_avg_sq.
void optimizer_update(const optimizer_math::AdamUpdate& f, float* w, const float* g, float* exp_avg, float* exp_avg_sq,
                      float* max_exp_avg_sq, int64_t n, const Stream& stream);
void optimizer_update(const optimizer_math::AdagradUpdate& f, float* w, const float* g, float* sum, int64_t n,
                      const Stream& stream);

// g[i] = float(double(g[i]) · factor) over n floats: a data-parallel replica's gradient weighted by its
// share of the mini-batch before the all-reduce, rounded as the host path rounds it.
void scale_gradient(float* g, double factor, int64_t n, const Stream& stream);

// A pipeline stage's weight arrays (executor/pipeline/weight_memory.h), n floats each: acc[i] = f(acc[i],
// g[i]) (gpipe's accumulation), v[i] = f(v[i]) (its flush).
void accumulate_gradient(const optimizer_math::AccumulateGradient& f, float* acc, const float* g, int64_t n,
                         const Stream& stream);
void scale_values(const optimizer_math::ScaleValue& f, float* v, int64_t n, const Stream& stream);

// SpecTrain (executor/weight_prediction.h): out[i] = f(w[i], estimate[i], states[i]...) over n floats, the
// states being the ones the rule's update reads; avg[i] = f(avg[i], g[i]), the predictor's kept average.
void predict_weights(const optimizer_math::PredictAhead<optimizer_math::SgdUpdate>& f, float* out, const float* w,
                     const float* estimate, int64_t n, const Stream& stream);
void predict_weights(const optimizer_math::PredictAhead<optimizer_math::SgdMomentumUpdate>& f, float* out,
                     const float* w, const float* estimate, const float* buf, int64_t n, const Stream& stream);
void predict_weights(const optimizer_math::PredictAhead<optimizer_math::SgdNesterovUpdate>& f, float* out,
                     const float* w, const float* estimate, const float* buf, int64_t n, const Stream& stream);
void predict_weights(const optimizer_math::PredictAhead<optimizer_math::AdamUpdate>& f, float* out, const float* w,
                     const float* estimate, const float* m, const float* h, int64_t n, const Stream& stream);
void predict_weights(const optimizer_math::PredictAhead<optimizer_math::AdamUpdate>& f, float* out, const float* w,
                     const float* estimate, const float* m, const float* h, const float* hmax, int64_t n,
                     const Stream& stream);
void predict_weights(const optimizer_math::PredictAhead<optimizer_math::AdagradUpdate>& f, float* out, const float* w,
                     const float* estimate, const float* sum, int64_t n, const Stream& stream);
void smooth_gradient(const optimizer_math::SmoothGradient& f, float* avg, const float* g, int64_t n,
                     const Stream& stream);

// fp16 loss scaling: f(g[i]) over n floats in place; a non-finite result sets *nonfinite (an int on the
// stream's device) to 1, and nothing ever clears it: zero it before the first gradient of a step.
void unscale_gradient(const optimizer_math::UnscaleGradient& f, float* g, int64_t n, int* nonfinite,
                      const Stream& stream);

}  // namespace onnxtrain::cuda
