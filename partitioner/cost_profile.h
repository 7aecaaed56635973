// What the planner knows about a training graph: one entry per forward node in topological order with
// the costs of its forward and of its share of the backward pass, and per cut position the bytes of the
// tensors that cross it. The cost model (cost_model.h) fills it from a TrainingGraph and a device, the
// planner (planner.h) splits it into contiguous stages; tests build profiles by hand.
//
// Cut i (0 < i < n) lies between node i−1 and node i. A tensor produced by node p and consumed by nodes
// up to c crosses every cut p < i <= c, so a skip connection over several stages counts in each cut it
// crosses (the pipeline forwards it stage by stage). cut_*_bytes have n+1 entries; entries 0 and n are 0.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace onnxtrain {

struct NodeCost {
  std::string name, op_type;
  double forward_flops = 0, backward_flops = 0;      // the backward nodes emitted for this node
  double forward_bytes = 0, backward_bytes = 0;      // bytes read + written by those kernels
  double forward_seconds = 0, backward_seconds = 0;  // on the profile's device: analytic or measured
  // Once per weight update of a flushing stage: the weight-gradient products its backward deferred to the
  // end of the micro-batches' sum (measured in micro-batch mode, partitioner/node_profiler.h; else 0).
  double sum_end_seconds = 0;
  int64_t parameter_bytes = 0;   // trainable initializers this node reads first (each counted once)
  int64_t state_bytes = 0;       // non-trainable initializers (BN running statistics)
  int64_t activation_bytes = 0;  // forward values kept alive for the backward pass, per micro-batch
};

// A forward value that the backward nodes of several forward nodes read (a Relu's output: its own gradient
// and the next layer's weight gradient). NodeCost::activation_bytes counts it once, at the first reader;
// a stage that holds a later reader and not the first keeps its own copy (the one it received) too.
struct SharedKeptValue {
  int64_t bytes = 0;
  std::vector<size_t> readers;  // the forward nodes whose backward reads it, ascending, 2 or more
};

struct CostProfile {
  std::string model, device;  // for reports
  int64_t batch = 0;          // the micro-batch the costs are for
  std::vector<NodeCost> nodes;
  std::vector<int64_t> cut_activation_bytes;  // forward: bytes crossing cut i per micro-batch
  std::vector<int64_t> cut_gradient_bytes;    // backward: gradients of the float tensors crossing cut i
  // How many tensors that carry a gradient cross cut i: 1 between a transformer's blocks (the residual
  // stream; masks and rotary tables carry none), 2 or more inside one. Empty in hand-made profiles.
  std::vector<int> cut_gradient_tensors;
  std::vector<SharedKeptValue> shared_kept;  // empty in hand-made profiles
  bool has_attention = false;                // a Softmax feeds a MatMul: the model is made of attention blocks
  // Per cut i: the name of a trained tensor (or running statistic) that nodes on both sides of it read, a
  // tied weight, which the pipelines refuse to share between stages (executor/pipeline/stage_graphs.cc);
  // "" where none does. Empty in hand-made profiles.
  std::vector<std::string> cut_splits_tied;
  // Bytes/s the device's memory-bound loops reach (its bandwidth times its memory efficiency): the
  // planner prices each stage's optimizer update with it. 0 (hand-made profiles): updates cost nothing.
  double memory_bandwidth = 0;
};

}  // namespace onnxtrain
