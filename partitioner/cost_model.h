// The analytic cost model: from a training graph, a micro-batch size and a device, the CostProfile the
// planner splits (cost_profile.h). Per forward node, in topological order:
//  - forward FLOPs: the op schema's estimate (the same numbers as `onnxtrain inspect`); backward FLOPs:
//    the sum over the backward nodes emitted for it (TrainingGraph::emitted_for; the loss seed and the
//    gradient sums of graph inputs go to the forward node that made the value they read, else the last);
//  - bytes: every input and output of each kernel, read once and written once;
//  - parameter_bytes: trainable initializers, each at its first forward consumer; state_bytes: the other
//    initializers a forward node reads first (BN running statistics, frozen parameters, integer buffers);
//  - activation_bytes: forward-node outputs that backward nodes read (graph inputs are the loader's batch,
//    fed again to the backward, and count nowhere), each counted once, at the first forward node whose
//    backward nodes read it; a value the backward of several forward nodes reads is also listed in
//    shared_kept, for the stages that hold a later reader and keep the copy they received;
//  - seconds: per kernel device.kernel_seconds(flops, bytes) = overhead + max(compute at the efficiency,
//    memory traffic), summed over the node's forward kernel and over its backward kernels; plus
//    device.step_overhead_s for each step an op runs one after another within itself (OpCost::serial_steps:
//    a recurrent op's time steps), which is what a small LSTM's time is made of.
// Cuts: a value made by forward node p and used (by forward nodes, or by the backward nodes emitted for
// them) up to node c crosses the cuts p < i <= c, once each; its gradient crosses the same cuts back when
// it has one (the sweeps of build_training_graph: it depends on a trained value and the loss on it),
// summed on the receiving side before it is sent on. Graph inputs are fed to every stage by the loader and cross no
// cut. Symbolic batch dims are bound to `batch`; a size still unknown after that counts 0 bytes and is
// listed in CostModelReport::unknown_sizes.
//
//   TrainingGraph t = build_training_graph(graph, {.loss = "loss"});
//   CostProfile p = build_cost_profile(t, /*batch=*/32, device_from_preset("h100"));
//   StageCost s = sum_stage(p, 0, 10);   // nodes [0, 10): FLOPs, seconds, bytes of one stage
//   s.forward_seconds + s.backward_seconds;
#pragma once

#include <string>
#include <vector>

#include "graph/autodiff/training_graph.h"
#include "partitioner/cost_profile.h"
#include "partitioner/device.h"

namespace onnxtrain {

struct CostModelReport {
  std::vector<std::string> unknown_sizes;  // values whose size stays unknown with the batch bound
};

CostProfile build_cost_profile(const TrainingGraph& training, int64_t batch, const DeviceDescription& device,
                               CostModelReport* report = nullptr);

// For every node of training.graph.order(): the index (0 .. forward_node_count−1) of the forward node it
// belongs to: itself for forward nodes, the owner described above for backward nodes.
std::vector<size_t> owning_forward_node(const TrainingGraph& training);

// Per value of training.graph: whether the pipelines keep it on the one stage that updates it, so that nodes
// of two stages may not both read it (tied weights): a trained float32 initializer (one with a gradient) or a
// running statistic. Frozen parameters, buffers and constants are copied to every stage that reads them. The
// planner's cuts (CostProfile::cut_splits_tied) and the executor's check (stage_graphs.cc) both use it.
std::vector<bool> lives_on_one_stage(const TrainingGraph& training);

// The costs of nodes [begin, end) as one stage: sums of the per-node fields, plus the bytes crossing
// its two boundary cuts (received going forward = cut_activation_bytes[begin], sent = [end]).
struct StageCost {
  double forward_flops = 0, backward_flops = 0;
  double forward_bytes = 0, backward_bytes = 0;
  double forward_seconds = 0, backward_seconds = 0;
  int64_t parameter_bytes = 0, state_bytes = 0, activation_bytes = 0;
  int64_t activation_bytes_in = 0, activation_bytes_out = 0;  // forward: received at begin, sent at end
  int64_t gradient_bytes_in = 0, gradient_bytes_out = 0;      // backward: received at end, sent at begin
};
StageCost sum_stage(const CostProfile& profile, size_t begin, size_t end);

}  // namespace onnxtrain
