// BatchNormalization and BatchNormalizationGrad in training mode on the plain (N, C, D1..Dn) float32 layout,
// without oneDNN: oneDNN's plain-layout batch norm is several times slower than its channel-blocked one,
// and the reorders into and out of the blocked layout cost more than the normalisation (ResNet-18 at
// 32x32, batch 32, 1 thread: 3.3 ms forward and 4.6 ms backward over its 20 BatchNorms, mostly reorders
// of tensors of 16 KB to 2 MB). Channels go in blocks of 16: per sample a block is one contiguous run of
// memory, so every pass over a block reads whole cache lines, and a block's passes (sums, then the
// normalisation) find it in the cache. Statistics: per sample and channel a float sum in SIMD lanes
// (omp simd reduction), added up in double; planes of 2 to 15 positions instead run the lanes along a
// sample's whole block (per value float sums over up to 32 samples, added up in double); the mean first,
// then the population variance around it (two passes, as the reference kernel). The loops are cloned for
// AVX-512 and AVX2.
// The forward keeps its batch mean and variance for the gradient of the same run (batch_statistics_key),
// which computes them itself where the stream holds none.
//
//   if (auto kernel = make_plain_batch_norm(spec)) return kernel;        // nullptr: not this case
#pragma once

#include <memory>

#include "kernels/kernel.h"

namespace onnxtrain::onednn {

// The kernels for a training-mode, float32, per-channel spec of rank 3 to 5, or nullptr.
std::unique_ptr<Kernel> make_plain_batch_norm(const KernelSpec& spec, bool training);
std::unique_ptr<Kernel> make_plain_batch_norm_grad(const KernelSpec& spec, bool training);

}  // namespace onnxtrain::onednn
