// Pad's modes and the input index a padded position reads along one axis, in plain C++ usable from
// host and device (ONNXTRAIN_HOST_DEVICE): the reference Pad/PadGrad kernels (kernels/reference/pad_mode.h)
// and the CUDA ones (kernels/cuda/strided_index.h) share it, so the CPU tests cover the device's mapping.
//
//   int64_t i = pad_source_index(position - begin, size, PadMode::Reflect);   // -1: the constant
#pragma once

#include <cstdint>

#include "kernels/elementwise_derivatives.h"  // ONNXTRAIN_HOST_DEVICE

namespace onnxtrain {

enum class PadMode : int { Constant = 0, Reflect = 1, Edge = 2, Wrap = 3 };

// The input index along an axis of `size` that position i (already shifted by the begin pad) reads; -1
// for the constant.
ONNXTRAIN_HOST_DEVICE inline int64_t pad_source_index(int64_t i, int64_t size, PadMode mode) {
  if (i >= 0 && i < size) return i;
  if (mode == PadMode::Constant || size == 0) return -1;
  if (mode == PadMode::Edge) return i < 0 ? 0 : size - 1;
  if (mode == PadMode::Wrap) return ((i % size) + size) % size;
  if (size == 1) return 0;  // reflect: the mirror image repeats with period 2 * (size - 1)
  const int64_t period = 2 * (size - 1);
  i = ((i % period) + period) % period;
  return i < size ? i : period - i;
}

}  // namespace onnxtrain
