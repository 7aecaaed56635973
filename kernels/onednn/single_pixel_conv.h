// A convolution with one group whose output is a single pixel (every spatial size 1) is a matrix product
// over the kernel taps that fall inside the input: Y[n][m] = sum over c and those taps of
// W[m][c][tap]·X[n][c][tap's input position]. It is the deepest layers of ImageNet networks run on small
// images (ResNet-18's layer4 at 32x32: a 3x3 kernel with pads 1 over a 1x1 input reads only its centre).
// oneDNN's direct convolution handles them poorly in training: its backward weights computes all nine
// taps of the 9.4 MB weight gradient of a 512-channel layer (4.6 ms, the forward takes 0.8), and every
// run reorders the weights into and the gradient out of its blocked layouts (5.6 ms per layer and step,
// measured on this machine with ONEDNN_VERBOSE). Here the taps read are gathered into dense matrices
// (Xv: N×K, Wv: M×K, K = C × taps) and oneDNN's matmul runs on plain layouts; the weight gradient is
// written with zeros at the taps in the padding. A gather is skipped where it would copy the whole
// tensor in order (a kernel as large as the input, a 1x1 kernel on a 1x1 input).
//
//   if (auto kernel = make_single_pixel_conv(spec, window)) return kernel;   // nullptr: not this case
#pragma once

#include <cstdint>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernels/kernel.h"
#include "kernels/reference/window.h"
#include "kernels/scratch_arena.h"

namespace onnxtrain::onednn {

struct SinglePixelConv {
  int64_t batch = 0, in_channels = 0, out_channels = 0;
  // A depthwise convolution (group = C = M: one input and one output channel per group) is no matrix
  // product but a per-channel one: Y[n][c] = sum over taps of W[c][tap]·X[n][c][tap] (MobileNetV2's 3x3
  // depthwise layers over 1x1 inputs at 32x32: oneDNN's backward took 5 ms each on one thread and 15 on
  // two). float32 only.
  bool depthwise = false;
  int64_t in_plane = 1, kernel_plane = 1;  // products of the input's and the kernel's spatial sizes
  // Per tap inside the input, in the kernel's row-major order: its offset in an input plane and in a
  // kernel plane.
  std::vector<int64_t> x_offsets, w_offsets;

  int64_t taps() const { return static_cast<int64_t>(x_offsets.size()); }
  int64_t depth() const { return in_channels * taps(); }  // K of the matrix products
  // Whether the taps are the whole input plane in order (Xv is X) / every kernel tap (Wv is W).
  bool x_whole() const;
  bool w_whole() const { return taps() == kernel_plane; }

  // The geometry of a Conv/ConvGrad with X (N,C,...), W (M,C/group,k...) and `window`, when it is this
  // case: one group or depthwise, every output spatial size 1, at least one tap inside the input.
  static std::optional<SinglePixelConv> of(const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                                           const reference::WindowGeometry& window, int64_t group);
  // The same for a kernel spec whose X is input `x_input` and W the next (Conv: 0, ConvGrad: 1), with
  // its group attribute; nullopt also for a depthwise one that is not float32.
  static std::optional<SinglePixelConv> for_spec(const KernelSpec& spec, size_t x_input,
                                                 const reference::WindowGeometry& window);

  // Xv (N×K) of X and Wv (M×K) of W: the tensor itself when it is the matrix (x_whole, w_whole), else its
  // taps gathered into memory of `lease`; `element` is the dtype's size (4 or 2 bytes).
  const void* x_matrix(const void* x, ScratchArena::Lease& lease, size_t element) const;
  const void* w_matrix(const void* w, ScratchArena::Lease& lease, size_t element) const;
  // Wv as the forward convolution gathers it for the backward of the same run: into `kept` (reused when
  // the stream no longer holds it), kept on the stream under w's address and `key` (w_taps_key, which the
  // kernels make once); a backward with the same W and geometry reads it instead of gathering again
  // (Stream::derived). The stream's own where it holds one already (the same W read twice in a run, or
  // carried from an earlier run: InferenceSession::carry_weight_derived_values). W itself where it is the
  // matrix, or where the stream keeps nothing.
  const void* w_matrix_kept(const void* w, Stream& stream, const std::string& key,
                            std::shared_ptr<std::vector<std::byte>>& kept, ScratchArena::Lease& lease,
                            size_t element) const;
  const void* w_matrix_from_forward(const void* w, const Stream& stream, const std::string& key,
                                    ScratchArena::Lease& lease, size_t element) const;
  std::string w_taps_key(size_t element) const;
  // dX from dXv and dW from dWv, zero at the positions no tap reads.
  void scatter_x(const void* dxv, void* dx, size_t element) const;
  void scatter_w(const void* dwv, void* dw, size_t element) const;
};

// One oneDNN matmul C = A·B (+ bias) over plain 2-D buffers, the strides given (a transposed operand is
// a column-major view); its scratchpad is in the running thread's arena. A run only sets data handles.
class MatrixProduct {
 public:
  MatrixProduct() = default;
  // A (rows×depth), B (depth×cols), C (rows×cols); `bias`, when given, is (1×cols).
  MatrixProduct(const dnnl::memory::desc& a, const dnnl::memory::desc& b, const dnnl::memory::desc& c,
                const dnnl::memory::desc& bias = {});
  void run(const void* a, const void* b, void* c, const void* bias = nullptr);
  std::string implementation() const { return implementation_; }

 private:
  dnnl::matmul matmul_;
  dnnl::memory a_, b_, c_, bias_, scratchpad_;
  std::vector<dnnl_exec_arg_t> args_;
  std::string implementation_;
};

// A plain (rows×cols) matrix of `dtype`, row-major, or column-major when `transposed` (the buffer holds
// the cols×rows matrix row-major).
dnnl::memory::desc matrix_desc(int64_t rows, int64_t cols, DType dtype, bool transposed = false);

// The Conv kernel for this case, or nullptr when the spec is not it.
std::unique_ptr<Kernel> make_single_pixel_conv(const KernelSpec& spec, const reference::WindowGeometry& window);
// The ConvGrad kernel (dX, dW, dB as the spec asks), or nullptr.
std::unique_ptr<Kernel> make_single_pixel_conv_grad(const KernelSpec& spec, const reference::WindowGeometry& window);

}  // namespace onnxtrain::onednn
