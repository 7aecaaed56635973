// Winograd convolution on oneDNN (its F(4x4, 3x3) kernels, jit_wino_4x3) for the 3x3 convolutions where
// it pays: 2.25x fewer multiplications than the direct convolution, at the cost of transforming inputs,
// weights and outputs, which many channels over a plane of several 4x4 tiles amortise. Measured on the
// forward, backward-data and backward-weights primitives, batch 32, one thread, 2026-12-05
// (ONEDNN_VERBOSE-style timing of each primitive alone, ms, direct -> Winograd):
//   256 -> 256 channels at 8x8 (VGG-11):      24.7 -> 9.4, 23.2 -> 9.7, 37.8 -> 8.9
//   128 -> 128 at 16x16:                        16.2 -> 6.6, 13.2 -> 6.6, 14.2 -> 7.4
//   64 -> 64 at 8x8 (ResNet-18's layer1):       1.05 -> 0.91, 1.04 -> 0.96, 1.27 -> 0.94
//   32 -> 32 at 16x16:                          1.20 -> 0.70, 1.18 -> 0.66, 1.36 -> 0.71
//   16 -> 16 at 14x14:                          0.22 -> 0.42, 0.22 -> 0.39, 0.25 -> 0.54 (slower)
//   64 -> 64 at 8x8, batch 8 (a micro-batch):   0.19 -> 0.22, 0.18 -> 0.22, 0.22 -> 0.18 (slower)
//   the same, batch 16 (a dp replica's half):   0.37 -> 0.31, 0.36 -> 0.33, 0.44 -> 0.32
//   256 -> 256 at 8x8, batch 8:                 3.23 -> 2.70, 2.95 -> 2.75, 3.77 -> 2.26
// That was an Intel Xeon (AVX-512 and AMX). On a 2-core AMD EPYC (AVX-512, 2026-12-06,
// benchmarks/winograd_choice_bench, each primitive alone) the direct convolution runs slower and Winograd
// faster, so small batches pay too: 64 -> 64 at 8x8, batch 8: 0.27 -> 0.20, 0.28 -> 0.20, 0.32 -> 0.16;
// batch 4: 0.136 -> 0.131, 0.136 -> 0.132, 0.156 -> 0.102; 32 -> 32 at 8x8, batch 16: 0.136 -> 0.102,
// 0.136 -> 0.103, 0.155 -> 0.122; only at batch 8 of 32 -> 32 at 8x8 (work 2^15) do the two tie.
// PyTorch's CPU convolutions take oneDNN's Winograd kernels for such layers too. Its results differ from the
// direct convolution's in the last bits (the transforms round differently): within 2e-6 of each output's
// largest element (onednn_winograd_test), not of each element.
//
//   return onednn::winograd_or_direct(spec, 0, window, [&](dnnl::algorithm a) { return make_unique<K>(..., a); });
#pragma once

#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/reference/window.h"

namespace onnxtrain::onednn {

// The least work (4x4 output tiles times channel pairs) at which Winograd pays on this CPU: 2^18 on Intel's,
// 2^16 on others (AMD's), where the measurements above put the two algorithms' crossing. Fixed per CPU
// vendor rather than timed at start-up, so that a run's results do not depend on a timing's noise.
int64_t winograd_least_work();

// Whether a float32 convolution of X (N, C, H, W) with W (M, C, 3, 3), one group, stride 1 and no
// dilation, runs faster as Winograd's: at least 32 input and output channels, an output plane of at least
// 8x8, and N·ceil(H/4)·ceil(W/4)·C·M (4x4 output tiles times channel pairs) at least winograd_least_work().
// oneDNN may still refuse it (channels not in its blocks of 16, pads over 1): the caller then builds the
// direct convolution.
bool winograd_pays(const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                   const reference::WindowGeometry& window, int64_t group);

// make(convolution_winograd) for a float32 Conv or ConvGrad spec (X input `x_input`, W the next) that
// winograd_pays for and oneDNN implements; make(convolution_direct) otherwise.
template <typename Make>
std::unique_ptr<Kernel> winograd_or_direct(const KernelSpec& spec, size_t x_input,
                                           const reference::WindowGeometry& window, Make&& make) {
  const TensorDesc& x = spec.inputs[x_input];
  if (x.dtype == DType::Float32 &&
      winograd_pays(x.sizes, spec.inputs[x_input + 1].sizes, window, spec.attributes.get_int("group", 1))) {
    try {
      return make(dnnl::algorithm::convolution_winograd);
    } catch (const dnnl::error& e) {
      if (e.status != dnnl_unimplemented) throw;  // else the direct convolution
    }
  }
  return make(dnnl::algorithm::convolution_direct);
}

}  // namespace onnxtrain::onednn
