// CUDA kernels of the losses (launchers in loss_launch.h). Forward: one warp per element (n, d) computes
// the log-softmax over C (or reads the NLL input), its weighted loss and weight; a one-block pass then
// sums losses and weights in a fixed order (deterministic) for sum/mean. Backward: one thread per score,
// after a one-block pass for mean's Σ w over the elements not ignored.
#include <cmath>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_error_flag.h"
#include "kernels/cuda/loss_launch.h"
#include "kernels/cuda/reduce_block.cuh"

namespace onnxtrain::cuda {
namespace {

__device__ __forceinline__ int64_t label_of(const LossParams& p, const void* labels, int64_t e) {
  return p.labels_int64 ? static_cast<const int64_t*>(labels)[e] : static_cast<const int32_t*>(labels)[e];
}

// The weight of element e's label: 0 when ignored, NaN when the label is not a class.
template <typename T>
__device__ __forceinline__ double weight_of(const LossParams& p, int64_t label, const T* weights) {
  if (p.has_ignore_index && label == p.ignore_index) return 0;
  if (label < 0 || label >= p.classes) return NAN;
  return weights ? static_cast<double>(weights[label]) : 1.0;
}

template <typename T>
__global__ void __launch_bounds__(kReduceBlock)
    loss_elements(LossParams p, const T* __restrict__ scores, const void* __restrict__ labels,
                  const T* __restrict__ weights, T* __restrict__ loss, T* __restrict__ log_prob,
                  double* __restrict__ scratch) {
  __shared__ double shared[kReduceWarps];  // unused by warp groups; group_reduce's signature
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int64_t elements = p.elements();
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * kReduceWarps + static_cast<int>(threadIdx.x) / 32; e < elements;
       e += static_cast<int64_t>(gridDim.x) * kReduceWarps) {
    const int64_t n = e / p.inner, d = e - n * p.inner;
    const T* row = scores + n * p.classes * p.inner + d;  // class c at row[c * inner]
    double log_sum = 0;                                   // NLL: the input is the log-probability
    if (p.softmax) {
      double m = -INFINITY;
      for (int64_t c = lane; c < p.classes; c += 32) m = fmax(m, static_cast<double>(row[c * p.inner]));
      m = group_max<32>(m, shared);
      double sum = 0;
      for (int64_t c = lane; c < p.classes; c += 32) sum += exp(static_cast<double>(row[c * p.inner]) - m);
      log_sum = log(group_sum<32>(sum, shared)) + m;
      if (log_prob) {
        T* lp = log_prob + n * p.classes * p.inner + d;
        for (int64_t c = lane; c < p.classes; c += 32)
          lp[c * p.inner] = static_cast<T>(static_cast<double>(row[c * p.inner]) - log_sum);
      }
    }
    if (lane != 0) continue;
    const int64_t label = label_of(p, labels, e);
    const double w = weight_of(p, label, weights);
    const bool ignored = p.has_ignore_index && label == p.ignore_index;
    const bool is_class = label >= 0 && label < p.classes;
    const double value = ignored ? 0.0 : is_class ? -w * (static_cast<double>(row[label * p.inner]) - log_sum) : NAN;
    if (!ignored && !is_class) raise_flag(p.bad_label, kBadLabel);
    if (p.reduction == LossReduction::None) {
      loss[e] = static_cast<T>(value);
    } else {
      scratch[e] = value;
      scratch[elements + e] = w;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kReduceBlock)
    loss_total(LossParams p, const double* __restrict__ scratch, T* __restrict__ loss) {
  __shared__ double shared[kReduceWarps];
  const int64_t elements = p.elements();
  double total = 0, weight = 0;
  for (int64_t e = threadIdx.x; e < elements; e += kReduceBlock) {
    total += scratch[e];
    weight += scratch[elements + e];
  }
  total = group_sum<kReduceBlock>(total, shared);
  weight = group_sum<kReduceBlock>(weight, shared);
  if (threadIdx.x == 0) loss[0] = static_cast<T>(p.reduction == LossReduction::Mean ? total / weight : total);
}

// Σ w over the elements not ignored (NaN if a label is not a class), into total[0].
template <typename T>
__global__ void __launch_bounds__(kReduceBlock)
    loss_total_weight(LossParams p, const void* __restrict__ labels, const T* __restrict__ weights,
                      double* __restrict__ total) {
  __shared__ double shared[kReduceWarps];
  double weight = 0;
  for (int64_t e = threadIdx.x; e < p.elements(); e += kReduceBlock)
    weight += weight_of(p, label_of(p, labels, e), weights);
  weight = group_sum<kReduceBlock>(weight, shared);
  if (threadIdx.x == 0) total[0] = weight;
}

template <typename T>
__global__ void loss_grad_scores(LossParams p, const T* __restrict__ dloss, const T* __restrict__ log_prob,
                                 const void* __restrict__ labels, const T* __restrict__ weights,
                                 const double* __restrict__ total_weight, T* __restrict__ dscores) {
  const int64_t count = p.elements() * p.classes;
  const int64_t plane = p.classes * p.inner;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t n = i / plane, rest = i - n * plane;
    const int64_t c = rest / p.inner, d = rest - c * p.inner;
    const int64_t e = n * p.inner + d;
    const int64_t label = label_of(p, labels, e);
    const double w = weight_of(p, label, weights);
    if (p.has_ignore_index && label == p.ignore_index) {
      dscores[i] = T(0);
      continue;
    }
    if (label < 0 || label >= p.classes) {  // the reference throws; NaN marks the element, the flag the run
      dscores[i] = static_cast<T>(NAN);
      raise_flag(p.bad_label, kBadLabel);
      continue;
    }
    double k = static_cast<double>(p.reduction == LossReduction::None ? dloss[e] : dloss[0]);
    if (p.reduction == LossReduction::Mean) k /= total_weight[0];
    const double scale = k * w;
    double v = p.softmax ? scale * exp(static_cast<double>(log_prob[i])) : 0.0;
    if (c == label) v -= scale;
    dscores[i] = static_cast<T>(v);
  }
}

}  // namespace

template <typename T>
void launch_loss(const LossParams& p, const T* scores, const void* labels, const T* weights, T* loss, T* log_prob,
                 double* scratch, cudaStream_t stream) {
  const int64_t elements = p.elements();
  if (elements == 0) {
    // No elements: sum is 0 and mean 0/0 = NaN, as the reference computes them.
    if (p.reduction != LossReduction::None) {
      loss_total<T><<<1, kReduceBlock, 0, stream>>>(p, scratch, loss);
      ONNXTRAIN_CUDA_CHECK_LAUNCH(loss_total<T>);
    }
    return;
  }
  const long long blocks = (elements + kReduceWarps - 1) / kReduceWarps;
  loss_elements<T>
      <<<grid_blocks(blocks), kReduceBlock, 0, stream>>>(p, scores, labels, weights, loss, log_prob, scratch);
  ONNXTRAIN_CUDA_CHECK_LAUNCH(loss_elements<T>);
  if (p.reduction == LossReduction::None) return;
  loss_total<T><<<1, kReduceBlock, 0, stream>>>(p, scratch, loss);
  ONNXTRAIN_CUDA_CHECK_LAUNCH(loss_total<T>);
}

template <typename T>
void launch_loss_grad(const LossParams& p, const T* dloss, const T* log_prob, const void* labels, const T* weights,
                      T* dscores, double* scratch, cudaStream_t stream) {
  const int64_t count = p.elements() * p.classes;
  if (count == 0) return;
  if (p.reduction == LossReduction::Mean) {
    loss_total_weight<T><<<1, kReduceBlock, 0, stream>>>(p, labels, weights, scratch);
    ONNXTRAIN_CUDA_CHECK_LAUNCH(loss_total_weight<T>);
  }
  loss_grad_scores<T><<<grid_blocks((count + kReduceBlock - 1) / kReduceBlock), kReduceBlock, 0, stream>>>(
      p, dloss, log_prob, labels, weights, scratch, dscores);
  ONNXTRAIN_CUDA_CHECK_LAUNCH(loss_grad_scores<T>);
}

template void launch_loss<float>(const LossParams&, const float*, const void*, const float*, float*, float*, double*,
                                 cudaStream_t);
template void launch_loss<double>(const LossParams&, const double*, const void*, const double*, double*, double*,
                                  double*, cudaStream_t);
template void launch_loss_grad<float>(const LossParams&, const float*, const float*, const void*, const float*, float*,
                                      double*, cudaStream_t);
template void launch_loss_grad<double>(const LossParams&, const double*, const double*, const void*, const double*,
                                       double*, double*, cudaStream_t);

}  // namespace onnxtrain::cuda
