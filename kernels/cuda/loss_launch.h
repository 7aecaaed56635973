// Launchers of the CUDA loss kernels (loss.cu): SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss
// forward and their ai.onnxtrain grads, scores seen as (N, C, D1·…·Dk), called by loss.cc. Enqueue on
// `stream`, never synchronise; float and double, labels int32 or int64; sums in double.
//
// A label outside [0, C) that is not ignore_index cannot raise an Error without a host wait (the
// reference throws): the element's loss and gradient become NaN, so the reduced loss is NaN, and the
// kernel raises `bad_label` (device_error_flag.h), so the kernel's next run throws naming the fault.
//
//   double* scratch = static_cast<double*>(cuda::workspace(stream, loss_scratch_bytes(p)));
//   launch_loss<float>(p, scores, labels, weights, loss, log_prob, scratch, native_stream(stream));
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/reduce_geometry.h"  // ONNXTRAIN_HOST_DEVICE

namespace onnxtrain::cuda {

enum class LossReduction { None, Sum, Mean };

struct LossParams {
  int64_t batch = 0, classes = 0, inner = 1;  // scores (N, C, D1·…·Dk)
  bool softmax = false;                       // SoftmaxCrossEntropyLoss: log_softmax of the scores over C
  LossReduction reduction = LossReduction::Mean;
  bool has_ignore_index = false;
  int64_t ignore_index = 0;
  bool labels_int64 = true;  // else int32
  int* bad_label = nullptr;  // DeviceErrorFlag::device_ptr(): set to kBadLabel by a label that is not a class

  ONNXTRAIN_HOST_DEVICE int64_t elements() const { return batch * inner; }
};

inline constexpr int kBadLabel = 1;

// Device scratch (doubles) that launch_loss / launch_loss_grad need.
inline size_t loss_scratch_bytes(const LossParams& p) {
  return static_cast<size_t>(2 * p.elements() + 1) * sizeof(double);
}

// loss: (N, D1..Dk) for reduction none, a scalar otherwise; log_prob (may be null, softmax only) like the
// scores; weights (may be null) one per class.
template <typename T>
void launch_loss(const LossParams& p, const T* scores, const void* labels, const T* weights, T* loss, T* log_prob,
                 double* scratch, cudaStream_t stream);

// dscores like the scores; dloss shaped like the forward's loss; log_prob only for softmax.
template <typename T>
void launch_loss_grad(const LossParams& p, const T* dloss, const T* log_prob, const void* labels, const T* weights,
                      T* dscores, double* scratch, cudaStream_t stream);

}  // namespace onnxtrain::cuda
