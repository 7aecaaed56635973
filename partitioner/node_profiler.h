// Profiled mode (`onnxtrain partition --profile`): the training graph run node by node on the local CPU
// with the executor's kernels (the fastest implementation, prepared as InferenceSession prepares them),
// each kernel timed; per kernel the median over the repetitions, summed per forward node into its
// forward time (its own kernel) and backward time (the kernels of owning_forward_node, cost_model.h).
// Inputs are random: floats N(0,1), integers and booleans 0 (a valid class, index and token everywhere).
// Reshape & co. that InferenceSession runs as views of their input (views_input_of) run as views here too,
// timed 0.
// The times are cached as JSON next to the model, keyed by the model file's size and modification time,
// the batch, the thread count and a fingerprint of the training graph (nodes, ops, bound shapes), so a
// second partition run with the same loss and batch reuses them.
//
//   CostProfile p = build_cost_profile(t, 32, measure_local_cpu());
//   NodeTimes times = apply_profiled_times(p, t, "models/cnn.onnx");   // measures, or reads the cache
//   times.from_cache;     // true when models/cnn.onnx.profile-B32.json matched
//
// Part of onnxtrain_partitioner_profile (needs the kernels library).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "graph/autodiff/training_graph.h"
#include "partitioner/cost_profile.h"

namespace onnxtrain {

struct NodeProfileOptions {
  int repetitions = 5;      // timed runs of the whole graph; each kernel keeps its median
  int warmup = 1;           // untimed runs first (page faults, oneDNN primitive caches)
  double max_seconds = 30;  // no further timed run starts after this long (at least one runs)
  std::string cache_path;   // empty: no cache (apply_profiled_times fills in the default)
  bool use_cache = true;    // false: measure again and overwrite the cache
  // > 1: time the nodes as a flushing pipeline stage on the CPU runs a micro-batch (gpipe, 1f1b): in cycles
  // of this many runs of one weight version, where the runs after the first reuse what the kernels derived
  // from the weights (InferenceSession::carry_weight_derived_values) and add the parameter gradients into
  // the first's (run_into: the single-pixel ConvGrad sums only its taps), or defer them to the cycle's end
  // (Stream::DeferredProduct; NodeTimes::sum_end_seconds). A node's time is its mean over a cycle. ResNet-18's layer4
  // backward at micro-batch 8 costs a quarter of the time it takes alone.
  int micro_batches_summed = 1;
};

struct NodeTimes {
  std::vector<double> forward_seconds, backward_seconds;  // per forward node, in order
  // Per forward node: the products its backward deferred to the end of a micro-batch cycle's sums, once
  // per cycle (a flushing stage computes them before its update); zeros outside micro-batch mode.
  std::vector<double> sum_end_seconds;
  std::vector<double> kernel_seconds;  // per node of training.graph.order() (empty when read from the cache)
  int threads = 0;                     // OpenMP threads the kernels ran with
  int repetitions = 0;                 // timed runs behind each median
  bool from_cache = false;
  std::string cache_path;  // the cache read or written; empty when none
  std::string cache_note;  // why the cache was not used or not written, for a log line; empty when fine
};

// Measures without any cache. Throws Error naming the node when a value's size stays unknown with the
// batch bound or a node has no CPU kernel.
NodeTimes measure_node_times(const TrainingGraph& training, int64_t batch, const NodeProfileOptions& options = {});

// Sets every node's forward_seconds, backward_seconds and sum_end_seconds of `profile` to their mean over
// `measured` (measurements of the same training graph at the profile's batch; bench's workers timed at
// once). Every field a measurement has goes through here: bench had copied two of three by hand, and its
// flushing stages' deferred products went missing from its predictions.
void apply_mean_node_times(CostProfile& profile, std::span<const NodeTimes> measured);

// "MODEL.onnx.profile-B32.json"; "MODEL.onnx.profile-B8-M4.json" in micro-batch mode
std::string profile_cache_path(const std::string& model_path, int64_t batch, int micro_batches_summed = 1);

// Reads the cache when it matches (else measures and writes it), then sets the node times of `profile`
// (built from the same training graph and batch; apply_mean_node_times).
// An empty options.cache_path means profile_cache_path(model_path, profile.batch); an empty model_path
// means no cache.
NodeTimes apply_profiled_times(CostProfile& profile, const TrainingGraph& training, const std::string& model_path,
                               NodeProfileOptions options = {});

}  // namespace onnxtrain
