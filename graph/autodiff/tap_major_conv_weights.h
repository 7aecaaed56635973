// Training convolutions with a small output plane on weights held tap-major. ResNet-18's layer3 at 32x32
// convolves 2x2 planes with 3x3 kernels; its CPU kernel multiplies one (C, M) matrix per kernel tap
// (kernels/onednn/tap_product_conv.h), so it wants W (M, C, k...) as Wt (k..., C, M), and before this it
// transposed each 2.4 MB weight forward and its gradient back at every step (about 1 ms each from memory,
// 7 ms of a 59 ms step at one thread).
//
// For training on the CPU (in float32, also under bf16 and fp16 autocast, which leaves them in float32:
// training_recipe.h), each such Conv becomes TapMajorConv(X, Wt[, B]) with
// Wt = Transpose(W, perm (2..n+1, 1, 0)) a parameter named "<W>.tap_major" and W dropped from the graph. A
// permutation of the elements: every optimizer and every strategy trains it as it trained W. What leaves
// training as a model (the written ONNX file, `export`, `--init-from`) has W again
// (with_full_conv_weights in live_conv_taps.h transposes back); checkpoints hold "<W>.tap_major".
//
//   std::vector<TapMajorConvWeight> done = train_tap_major_conv_weights(forward);   // make_training_recipe
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/tensor.h"

namespace onnxtrain {

// One spatial axis of a convolution: input and output sizes, kernel, stride, begin pad and dilation.
struct ConvAxis {
  int64_t input = 1, output = 1, kernel = 1, stride = 1, pad_begin = 0, dilation = 1;
};

// Whether the tap-product kernel (kernels/onednn/tap_product_conv.h) takes a convolution of one group over
// `axes`: a kernel of more than one tap and an output plane of 2 to 4 positions, or of up to 16 where at
// most 3/4 of its (kernel tap, output position) pairs read inside the input. Over a 4x4 plane with a 3x3
// kernel and pads 1 (ResNet-18's layer2 at 32x32, VGG-11's 512-channel layers) 100 of the 144 pairs do,
// and the products over them beat oneDNN's direct convolution, which computes the other 44 too (one
// thread, 2026-12-05: forward 0.90 -> 0.74 ms, gradient 1.90 -> 1.56 ms at 128 channels, batch 32); with
// stride 2 from an 8x8 input 121 do, and the direct convolution stayed faster (0.49 against 0.68 ms).
bool tap_product_takes(const std::vector<ConvAxis>& axes);

struct TapMajorConvWeight {
  std::string weight;     // the model's W (M, C, k...)
  std::string tap_major;  // the trained parameter (k..., C, M): "<W>.tap_major"
};

// The Conv nodes of `graph` this applies to: one group, a float32 Parameter W (not frozen) read by this
// node alone, explicit pads (or VALID), static C and spatial sizes, a kernel of more than one tap and an
// output plane that tap_product_takes.
std::vector<TapMajorConvWeight> tap_major_conv_weights(const Graph& graph);

// Rewrites those Conv nodes as above (their W initializers leave the graph); returns what it rewrote.
std::vector<TapMajorConvWeight> train_tap_major_conv_weights(Graph& graph);

// Copies the elements (of `element_bytes` each) of W (M, C, T) in `from` to Wt (T, C, M) in `to`, or back
// (T: the taps).
void permute_conv_weight(const void* from, void* to, size_t element_bytes, int64_t m, int64_t c, int64_t t,
                         bool to_tap_major);

// The sizes of Wt (k..., C, M) for W's (M, C, k...), and back; both of rank 3 or more (else empty).
std::vector<int64_t> tap_major_sizes(const std::vector<int64_t>& w);
std::vector<int64_t> model_layout_sizes(const std::vector<int64_t>& wt);

// Wt (k..., C, M) of a float32 W (M, C, k...), and back.
Tensor to_tap_major(const Tensor& w);
Tensor from_tap_major(const Tensor& wt);

// `trained` with every "<W>.tap_major" of `model` replaced by W. Names without one pass unchanged.
std::map<std::string, Tensor> with_model_layout_conv_weights(const Graph& model, std::map<std::string, Tensor> trained);

// A checkpoint's tensors and optimizer state "<name>/STATE" in the layout a run trains: with `tap_major`,
// each W of `model` that `tensors` holds in the model's layout becomes "<W>.tap_major" (an earlier build's
// checkpoint, or one from a GPU run); without, the other way (a CPU run's checkpoint resumed on a GPU).
// Optimizer state of W's size is transposed with it. Returns how many weights it converted.
int match_tap_major_conv_weights(const Graph& model, bool tap_major, std::map<std::string, Tensor>& tensors,
                                 std::map<std::string, Tensor>& optimizer_state);

}  // namespace onnxtrain
