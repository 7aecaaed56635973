// Training only the weight taps a convolution can ever use. A Conv whose output is a single pixel, with
// pads around an input smaller than its kernel (ResNet-18's layer4 at 32x32: a 3x3 kernel with pads 1 over
// a 1x1 input), reads only the taps that land on the input: the centre tap of the 1x1 case, 2x2 taps of a
// 2x2 input. The others meet only padding, so their gradient is zero at every step, and an optimizer that
// leaves a parameter element with a zero gradient unchanged (no weight decay) never changes them. Torch
// still reads and updates all of them: layer4's three 9.4 MB weights stream through every forward,
// backward and optimizer step, eight ninths to no effect.
//
// For training, each such Conv becomes a matrix product with only the live taps:
//   Y = Reshape(Gemm(Flatten(X, 1), W_live, B, transB=1), (0, M, 1, ...))
// with W_live = W[:, :, live box] reshaped to (M, C·box) a new parameter named "<W>.live_taps", and W
// dropped from the graph. It is exact: the live box covers the input one tap per input position in
// order, so Flatten's (C, i...) order matches W_live's (C, t...). Every strategy trains the smaller
// parameter; what leaves training as a model (the written ONNX file, `export`, `--init-from` a
// checkpoint) has W again, rebuilt from the model's own W with the live box replaced
// (with_full_conv_weights). Checkpoints hold the parameter as trained ("<W>.live_taps").
//
//   std::vector<LiveConvTaps> done = train_live_conv_taps_only(forward);   // in make_training_recipe
//   write_trained_model(path, out, with_full_conv_weights(model.graph, trainer.trained_initializers()));
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/tensor.h"

namespace onnxtrain {

struct LiveConvTaps {
  std::string weight;               // the model's W (M, C, k...)
  std::string live;                 // the trained parameter (M, C·box): "<W>.live_taps"
  std::vector<int64_t> begin, end;  // the live taps [begin, end) of each spatial dimension

  // The live taps' share of a weight of sizes w (M, C, k...): C·box, and M·C·box elements in all.
  int64_t columns(const std::vector<int64_t>& w) const {
    int64_t n = w[1];
    for (size_t d = 0; d < begin.size(); ++d) n *= end[d] - begin[d];
    return n;
  }
  int64_t elements(const std::vector<int64_t>& w) const { return w[0] * columns(w); }
};

// The Conv nodes of `graph` this applies to: one group, a float32 Parameter W (not frozen) read by this
// node alone, explicit pads (or VALID), static C and spatial sizes, a single output pixel, and a live box
// smaller than the kernel that meets every input position once, in order.
std::vector<LiveConvTaps> live_conv_taps(const Graph& graph);

// Rewrites those Conv nodes as above (their W initializers leave the graph); returns what it rewrote.
std::vector<LiveConvTaps> train_live_conv_taps_only(Graph& graph);

// `trained` with every "<W>.live_taps" of `model` (the graph before the rewrite, holding W) replaced by W:
// model's W with its live box taken from the trained taps, and every tap-major "<W>.tap_major" by W
// (tap_major_conv_weights.h). Other names pass unchanged.
std::map<std::string, Tensor> with_full_conv_weights(const Graph& model, std::map<std::string, Tensor> trained);
// The same for gradients: W's untrained taps get 0 (their gradient), not W's values.
std::map<std::string, Tensor> with_full_conv_gradients(const Graph& model, std::map<std::string, Tensor> gradients);

// The other way, for a checkpoint written before training kept only the live taps: each W of `model`
// with live taps that `tensors` holds whole becomes "<W>.live_taps" (its live box), and its optimizer
// state "<W>/NAME" becomes "<W>.live_taps/NAME" (the live box of a tensor of W's size, other entries as
// they are). Returns how many weights it converted.
int keep_live_conv_taps(const Graph& model, std::map<std::string, Tensor>& tensors,
                        std::map<std::string, Tensor>& optimizer_state);

}  // namespace onnxtrain
