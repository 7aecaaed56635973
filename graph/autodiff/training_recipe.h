// The recipe that turns a model into the training graph `onnxtrain train` runs, on the graph alone (no
// session, no kernels): BatchNormalization in training mode with its running statistics as outputs (as
// model.train() does), Dropout seeded per node or made the identity, the loss attached, autocast's Casts
// (bf16, fp16), fp16's loss scale, and autodiff. Trainer runs it; `partition`, `simulate`, `bench` and the
// pipeline's planner read the graph it makes without building a Trainer.
//
//   TrainingRecipe r = make_training_recipe(model.graph, {.loss = parse_loss_spec("cross-entropy")});
//   r.training.graph            forward + loss + backward, gradients "<param>_grad" as outputs
//   r.evaluation                the model with its loss in inference mode (evaluation, export)
//   r.inputs, r.loss.labels     what to feed
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/autodiff/live_conv_taps.h"
#include "graph/autodiff/loss.h"
#include "graph/autodiff/tap_major_conv_weights.h"
#include "graph/autodiff/training_graph.h"
#include "graph/graph.h"
#include "graph/mixed_precision.h"

namespace onnxtrain {

struct TrainingRecipeOptions {
  LossSpec loss;
  Precision precision = Precision::fp32;
  bool scale_loss = false;  // fp16: the training graph minimises loss · a scalar input (GradScaler)
  bool dropout = true;      // false: every Dropout is the identity in training too
  // Dropout node seeds: seed(the node's own seed attribute, its position among the Dropout nodes). Empty:
  // the nodes keep the seeds they have (enough for a graph that is only priced, never run).
  std::function<uint64_t(uint64_t node_seed, uint64_t position)> dropout_seed;
  // Convolutions with a single output pixel train only their live taps (graph/autodiff/live_conv_taps.h),
  // as `onnxtrain train` does by default. Exact only for an optimizer that leaves a parameter element with
  // a zero gradient unchanged (no weight decay: Trainer turns it off otherwise); the trained values then
  // need with_full_conv_weights to become the model's again.
  bool live_conv_taps_only = true;
  // Convolutions over small planes (tap_product_takes) train their weights tap-major, as TapMajorConv
  // (graph/autodiff/tap_major_conv_weights.h), in float32: the CPU kernels' layout. Under bf16 or fp16
  // too, where autocast then leaves them in float32: oneDNN's bfloat16 convolutions over 2 to 16 output
  // positions run several times slower than these kernels (ResNet-18 at 32x32, one thread: layer3's
  // backward 10.4 ms against 1.5, README "Mixed precision"). Trainer turns it off on a GPU. The trained
  // values need with_full_conv_weights to become the model's again.
  bool tap_major_conv_weights = true;
  // Under bf16 or fp16 a Conv reading fewer than 4 channels (a stem reading the image) and a depthwise Conv
  // stay float32 (graph/mixed_precision.h conv_stays_float32_on_cpu): the CPU's choice. Trainer turns it off on
  // a GPU.
  bool cpu_float32_convs = true;
  // Training-mode BatchNormalization followed by Relu becomes one node in the training graph, in float32
  // (graph/autodiff/batch_norm_relu.h): the CPU kernels' fusion. Trainer turns it off on a GPU.
  bool fuse_batch_norm_relu = true;
  // Add followed by Relu (a ResNet block's end) becomes one node in the training graph, in float32
  // (graph/autodiff/add_relu.h): the CPU kernels' fusion. Trainer turns it off on a GPU.
  bool fuse_add_relu = true;
  // Relu then MaxPool trains as MaxPool then Relu (graph/autodiff/pool_before_relu.h): exact, a quarter of
  // the Relu's work under a 2x2 pool. Trainer turns it off on a GPU, where it is not measured.
  bool pool_before_relu = true;
  // Float32 MatMuls train as FusedMatMul with the Transposes before them and their bias Add folded in
  // (graph/autodiff/fused_matmul.h): the CPU kernels' fusion. Under bf16 or fp16 before autocast, which
  // then casts the FusedMatMuls' operands and lets them write float32 with their bias (float32_output): the
  // ViT's Transposes and scalings no longer run as float32 passes between the Casts. Trainer turns it off on
  // a GPU.
  bool fuse_matmul = true;
  // GELU written out (Erf or Tanh and four to eight elementwise ops) trains as one Gelu node, in float32
  // (graph/autodiff/fused_gelu.h). Trainer turns it off on a GPU, where it is not measured.
  bool fuse_gelu = true;
  // Single slices gathered after a Transpose are gathered before it (graph/autodiff/gather_before_transpose.h):
  // nn.MultiheadAttention's split of q, k and v without the copy. Trainer turns it off on a GPU.
  bool gather_before_transpose = true;
  // Under bf16 or fp16, the backward's half products write float32 where autodiff would cast their result
  // back, and the forward's Casts to half go before the Transposes that lead to half products
  // (graph/autodiff/float32_products.h). Trainer turns it off on a GPU.
  bool fold_casts_into_products = true;

  // Turns the CPU's rewrites above (tap-major weights, float32 stem and depthwise convolutions, BatchNorm + Relu, Add +
  // Relu, MaxPool before Relu, FusedMatMul, Gelu, Gathers before Transposes, casts folded into products) on or off
  // together: off, the training graph has the model's nodes, as a GPU trains (under bf16 with autocast's Casts around
  // every Conv: a plan made for a GPU names them).
  void set_cpu_rewrites(bool on) {
    tap_major_conv_weights = cpu_float32_convs = fuse_batch_norm_relu = fuse_add_relu = pool_before_relu = fuse_matmul =
        fuse_gelu = gather_before_transpose = fold_casts_into_products = on;
  }
};

struct TrainingRecipe {
  std::vector<std::string> inputs;  // the model's data inputs, in graph order
  AttachedLoss loss;
  Graph evaluation;              // make_inference_graph of the model with its loss (no loss scale)
  std::string loss_scale_input;  // scale_loss: the scalar input the loss is multiplied by
  TrainingGraph training;
  std::vector<LiveConvTaps> live_conv_taps;                // what live_conv_taps_only rewrote
  std::vector<TapMajorConvWeight> tap_major_conv_weights;  // what tap_major_conv_weights rewrote
  int fused_batch_norm_relus = 0;                          // what fuse_batch_norm_relu fused
  int fused_add_relus = 0;                                 // what fuse_add_relu fused
  int pools_before_relus = 0;                              // what pool_before_relu moved
  int fused_matmuls = 0;                                   // what fuse_matmul fused
  int fused_gelus = 0;                                     // what fuse_gelu fused
  int transposes_after_gathers = 0;                        // what gather_before_transpose removed
  int casts_into_products = 0;                             // what fold_casts_into_products removed
  int casts_before_transposes = 0;                         // what it moved before Transposes
};

// Throws Error for a model without a data input, or what the loss and autodiff refuse.
TrainingRecipe make_training_recipe(const Graph& model, const TrainingRecipeOptions& options);

// A copy of `graph` (sharing its initializer Tensors) for evaluation: BatchNormalization in inference
// mode (training_mode 0, its running-statistics outputs dropped, also from the graph outputs) and Dropout
// as identity (its training_mode input omitted, which means false).
Graph make_inference_graph(const Graph& graph);

}  // namespace onnxtrain
