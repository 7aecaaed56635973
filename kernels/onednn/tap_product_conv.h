// A convolution with one group and a small output plane (2 to 4 positions: ResNet-18's layer3 at 32x32,
// a 3x3 kernel with pads 1 over 2x2; up to 16 where a quarter of the pairs below or more fall in the
// padding: its layer2, 4x4) runs as one matrix product per kernel tap and run of output
// positions, over the positions that tap reads inside the input:
//   Y'[p][n][:] += X'[in(p, t)][n][:] · W'[t]        for each tap t and output position p it reaches
// with X' (P_in, N, C) and Y' (P_out, N, M) the position-major transposes of X and Y, W' (T, C, M) the
// tap-major transpose of W. Consecutive output positions whose inputs are consecutive too make one
// product of (positions × N) rows. The backward is the same runs transposed: dX' += dY'·W'[t]^T and
// dW'[t] = sum of X'^T·dY'.
// Why: over a 2x2 input, 20 of the 36 (tap, position) pairs of a 3x3 kernel with pads 1 fall in the
// padding, which oneDNN's direct convolution computes (it also reorders the 2.4 MB weight into its
// blocked layout for each of the three passes). Measured on ResNet-18's layer3 (N 32, 256 channels),
// 1 thread: forward 1.0 ms, backward data 0.8, backward weights 2.3, and 0.36 per weight reorder.
// Output planes of one position stay with single_pixel_conv.h; larger planes with the direct convolution.
//
//   if (auto kernel = make_tap_product_conv(spec, window)) return kernel;   // nullptr: not this case
#pragma once

#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "graph/autodiff/tap_major_conv_weights.h"
#include "kernels/kernel.h"
#include "kernels/reference/window.h"
#include "kernels/scratch_arena.h"

namespace onnxtrain::onednn {

struct TapProductConv {
  // Which convolutions this path takes: tap_product_takes (graph/autodiff/tap_major_conv_weights.h), the
  // rule by which the training graph holds such a convolution's weight tap-major for it.

  // One matrix product: `length` consecutive output positions from out_begin, which tap `tap` reads at
  // the consecutive input positions from in_begin.
  struct Run {
    int64_t tap = 0, out_begin = 0, in_begin = 0, length = 0;
  };

  int64_t batch = 0, in_channels = 0, out_channels = 0;
  int64_t in_plane = 1, out_plane = 1, kernel_plane = 1;  // products of the spatial sizes
  std::vector<Run> runs;                                  // in tap order
  std::string key;                                        // of W' on the stream (Stream::derived): "tap-major W MxCxT"

  // The geometry of a Conv/ConvGrad with X (N,C,...), W (M,C,k...) and `window` when it is this case:
  // one group, a window that tap_product_takes, at least one tap inside the input.
  static std::optional<TapProductConv> of(const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                                          const reference::WindowGeometry& window, int64_t group);
  // The same for a float32 kernel spec whose X is input `x_input` and W the next (Conv: 0, ConvGrad: 1),
  // or Wt (k..., C, M) when `tap_major` (TapMajorConv, TapMajorConvGrad).
  static std::optional<TapProductConv> for_spec(const KernelSpec& spec, size_t x_input,
                                                const reference::WindowGeometry& window, bool tap_major = false);
  // The window of a TapMajorConv (X input 0, Y output 0) or TapMajorConvGrad (dY input 0, X input 1) spec.
  static reference::WindowGeometry tap_major_window(const KernelSpec& spec, size_t x_input);

  // Position-major transposes, (N, K, P) <-> (P, N, K), for X/dX (K = C) and Y/dY (K = M); `to_plane`
  // adds the bias of channel k when given.
  static void to_positions(const float* from, float* to, int64_t n, int64_t k, int64_t p);
  static void to_plane(const float* from, float* to, int64_t n, int64_t k, int64_t p, const float* bias = nullptr);
  // W (M, C, T) -> W' (T, C, M), or back (the weight gradient): a oneDNN reorder (threaded, several times
  // faster than element loops on this 2.4 MB transpose; tried again on 2026-12-04 with tiles of 16 output
  // channels in L1, cloned for AVX-512: ResNet-18's layer3 Conv 1.7 -> 3.1 ms, ConvGrad 2.3 -> 3.4 ms at
  // 1 thread). From a cold cache the reorder of 256x256x9 takes 1.5 ms at 1 thread, some 5 GB/s of reads
  // and writes, near one core's share of this machine's memory bandwidth (two more loop orders of our own,
  // 2.1 and 3.2 ms). Training keeps W' as the weights' own copy instead (TapMajorConv,
  // graph/autodiff/tap_major_conv_weights.h), so only Conv and ConvGrad on W pay it. `adds`: added to what
  // `to` holds.
  class WeightTranspose {
   public:
    WeightTranspose(const TapProductConv& g, bool to_tap_major, bool adds = false);
    void run(const float* from, float* to);

   private:
    dnnl::reorder reorder_;
    dnnl::memory from_, to_;
  };
  // W' as the forward convolution makes it for the backward of the same run: into `kept` (reused when the
  // stream no longer holds it), kept on the stream under w's address and `key`; a backward with
  // the same W reads it instead of transposing again (Stream::derived). The stream's own where it holds
  // one already (the same W twice in a run, or carried from an earlier run). In memory of `lease` where
  // the stream keeps nothing.
  const float* tap_major_kept(const float* w, WeightTranspose& transpose, Stream& stream,
                              std::shared_ptr<std::vector<std::byte>>& kept, ScratchArena::Lease& lease) const;
  const float* tap_major_from_forward(const float* w, WeightTranspose& transpose, const Stream& stream,
                                      ScratchArena::Lease& lease) const;
  int64_t weight_elements() const { return out_channels * in_channels * kernel_plane; }
};

// Row-major C (rows×cols) = A·B + beta·C on oneDNN's sgemm, A (rows×depth) or its transpose when
// a_transposed (the buffer holds depth×rows), B (depth×cols) or its transpose when b_transposed.
void gemm(bool a_transposed, bool b_transposed, int64_t rows, int64_t cols, int64_t depth, const float* a, int64_t lda,
          const float* b, int64_t ldb, float beta, float* c, int64_t ldc);

// The Conv kernel for this case, or nullptr when the spec is not it.
std::unique_ptr<Kernel> make_tap_product_conv(const KernelSpec& spec, const reference::WindowGeometry& window);
// The ConvGrad kernel (dX, dW, dB as the spec asks), or nullptr.
std::unique_ptr<Kernel> make_tap_product_conv_grad(const KernelSpec& spec, const reference::WindowGeometry& window);
// TapMajorConv and TapMajorConvGrad: the same products on the weight as the graph holds it, no transposes;
// the reference kernels where the geometry is not this case.
std::unique_ptr<Kernel> make_tap_major_conv(const KernelSpec& spec);
std::unique_ptr<Kernel> make_tap_major_conv_grad(const KernelSpec& spec);

}  // namespace onnxtrain::onednn
