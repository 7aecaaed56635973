// The weights of one pipeline stage and the rule that decides which version each pass reads
// (docs/design.md 5.5, docs/pipeline-schedules.md). The master weights W live in one flat float arena that only the
// stage's Optimizer writes; the stage's graphs read their own parameter Tensors (the working weights), which
// `before_forward` / `before_backward` fill for the pass:
//   naive      W as it is now (both passes; the backward sees updates made since the forward)
//   pipedream  the forward reads W and stashes a copy keyed by mini-batch; the backward reads that stash
//              (bit-identical to the forward's weights). vertical_sync: both read the stage's own weights
//              at the version stage 0 used for the mini-batch (a history of versions is kept)
//   spectrain  Ŵ(s): the optimizer's own update rule run s updates ahead on scratch copies
//              (executor/weight_prediction.h), s from the schedule; W itself changes only by the optimizer
//   gpipe      W; micro-batch gradients accumulate (weighted), `flush` scales them, one step per mini-batch
//   1f1b       as gpipe (the order of the passes differs, not the weights they read)
//   2bw        as pipedream, stashes shared by version, gradients accumulated over M micro-batches;
//              predict_stashed(): the forward reads Ŵ(s) (s: to the version its mini-batch's update
//              applies to) and stashes it, so the backward reads the prediction too
//
//   WeightPolicy w(PipelineStrategy::spectrain, false, {{"fc.weight", tensor}}, optimizer);
//   w.before_forward({.mini_batch = 7, .s = 2});  ... run the forward ...
//   w.before_backward({.mini_batch = 7, .s = 0}); ... run the backward ...
//   w.step(gradients);                            // version() + 1
//
// The arrays live in a WeightMemory (weight_memory.h): host memory, or the device memory of a stage on a
// GPU, where W, the stashes, the history and gpipe's sum stay on the device, the working weights are the
// stage's device copies, and the optimizer steps and SpecTrain predicts there. Only the report's scoring
// of predictions (measure_prediction) copies Ŵ and W to the host, once per predicted pass.
//
// Bookkeeping for the report: bytes of each kind, the version gap between the weights a pass read and
// W_i (i = the mini-batch, the version sequential SGD evaluates it at), and SpecTrain's prediction error
// ‖Ŵ − W_t‖ / ‖W − W_t‖ (t = v + s, the version the pass aimed at; W the weights it would read without
// prediction), measured when the stage reaches version t (a copy of Ŵ and W is kept until then).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "executor/optimizer.h"
#include "executor/pipeline/schedule.h"
#include "executor/pipeline/weight_memory.h"
#include "graph/tensor.h"

namespace onnxtrain {

class WeightPolicy {
 public:
  struct Parameter {
    std::string name;
    Tensor working;  // float32; the Tensor the stage's graphs read (shared buffer, written in place)
  };
  // What the schedule says about one pass. Versions are global (counted over every train() call).
  struct Pass {
    int64_t mini_batch = 0;    // i: the pass's ideal version is W_i (i updates)
    int64_t s = 0;             // spectrain: updates to predict ahead
    int64_t sync_version = 0;  // pipedream vertical sync: the version stage 0 read for this mini-batch
    int64_t stash_key = 0;     // pipedream: the key its forward stashes under and its backward reads
  };

  // Copies the working Tensors' values into the master arena, in `memory`. Throws Error for a non-float32
  // parameter.
  WeightPolicy(PipelineStrategy strategy, bool vertical_sync, std::vector<Parameter> parameters, Optimizer optimizer,
               bool measure_prediction = true, WeightMemory memory = {});
  // Not copied or moved: the optimizer's state sync (a device memory) refers to this object.
  WeightPolicy(const WeightPolicy&) = delete;
  WeightPolicy& operator=(const WeightPolicy&) = delete;

  // Stashing strategies (2bw): the forward reads and stashes SpecTrain's Ŵ(s) instead of W (s from the
  // schedule; W when s is 0).
  void predict_stashed();

  // Fill the working weights for a pass; return the version the pass reads (spectrain: current + s, the
  // version it predicts).
  int64_t before_forward(const Pass& pass);
  int64_t before_backward(const Pass& pass);

  // One optimizer step on W with these gradients (parameter order, each the parameter's size of floats in
  // the policy's memory).
  void step(std::span<const float* const> gradients);
  // gpipe: adds weight·gradient to the accumulator (the first add sets it).
  void accumulate(std::span<const float* const> gradients, float weight);
  // gpipe in host memory: the accumulator of each parameter (parameter order, shaped as the parameter),
  // for a backward pass that writes its gradients straight into it (the first micro-batch of a mini-batch:
  // `adds` false) or adds them (the later ones), as InferenceSession::run_into does, instead of handing
  // them to `accumulate` (weight 1). Only valid until the next flush.
  std::vector<Tensor> accumulate_in_place(bool& adds);
  // gpipe: multiplies the accumulated gradients by `scale` (1: nothing), steps W with them and clears them.
  void flush(float scale);
  // Pipeline × data parallelism: `reduce` gets the accumulated gradients on the host (downloaded from a
  // device and uploaded again after) to sum them over the stage's copies, before flush.
  void reduce_accumulated(const std::function<void(std::span<float>)>& reduce);

  // Puts W into the working weights and, on a device, their host Tensors (after a run, so that
  // evaluation and export read W).
  void sync_working();
  // Drops SpecTrain predictions whose target version will not come (the end of a run).
  void end_run();
  // Between runs (a drained pipeline): W and the working weights from `values` (by parameter name; every
  // parameter must be there with its size) and the optimizer state from `optimizer_state` (its
  // "global_step" and this stage's "PARAM/..." entries; others ignored), SpecTrain's kept averages from
  // `predictor_state` (prediction_state's entries; a parameter with none starts its average again).
  // Throws Error naming what is missing.
  void restore(const std::map<std::string, Tensor>& values, const std::map<std::string, Tensor>& optimizer_state,
               const std::map<std::string, Tensor>& predictor_state = {});

  int64_t version() const { return optimizer_.global_step(); }
  // How many times the working weights have been written.
  int64_t working_writes() const { return working_writes_; }
  const Optimizer& optimizer() const { return optimizer_; }
  const std::vector<Parameter>& parameters() const { return parameters_; }
  bool on_device() const { return memory_.on_device(); }
  // W (all parameters, or one), copied to the host.
  std::vector<float> master() const;
  std::vector<float> master(size_t parameter) const;
  int64_t elements() const { return static_cast<int64_t>(master_.size); }

  struct Statistics {
    int64_t forward_passes = 0, backward_passes = 0;
    double forward_gap = 0, backward_gap = 0;  // sums of |i − version read|
    int64_t predictions = 0;                   // spectrain passes with s > 0 scored against their target W_t
    double prediction_error = 0;               // sum of ‖Ŵ − W_t‖ / ‖W − W_t‖ over them (W ≠ W_t)
    int64_t dropped_predictions = 0;           // W_t never reached (end of a run), passed, or equal to W
    int64_t peak_stash_bytes = 0;              // pipedream stashes + vertical-sync history
    int64_t peak_scoring_bytes = 0;            // spectrain: host copies of Ŵ and W waiting to be scored
  };
  const Statistics& statistics() const { return stats_; }
  int64_t stash_bytes() const;
  int64_t optimizer_state_bytes() const;
  // gpipe, 1f1b: the gradient sum; spectrain: the predictor's kept gradient average.
  int64_t gradient_sum_bytes() const { return static_cast<int64_t>(accumulated_.size * sizeof(float)); }
  int64_t prediction_average_bytes() const { return memory_.prediction_bytes(); }
  // SpecTrain's kept averages, for a checkpoint (WeightMemory::prediction_state).
  std::map<std::string, Tensor> prediction_state() const { return memory_.prediction_state(); }

 private:
  void write_working(const WeightArray& source);
  void write_predicted(int64_t s);
  std::vector<float> working_values() const;
  void note_stash();
  void step_with(std::span<const float* const> gradients, float grad_scale = 1.0f);
  WeightArray copy_of(const WeightArray& source) const;
  WeightArray copy_of_working() const;  // the working weights, as one arena
  // An array of n floats for a copy: a released one when there is one of that size, else a new one. A
  // fresh array costs its page faults and its zeroing on every mini-batch: on ResNet-18's second stage
  // (40 MB of weights) pipedream's forward took 36 ms instead of 12.
  WeightArray array_for_copy(size_t n) const;
  void release(WeightArray&& array);  // a stash or history entry that is gone: kept for array_for_copy
  void predict(const Pass& pass);
  void score_predictions();
  const WeightArray& version_weights(int64_t version) const;

  WeightHandling weights_;  // strategy_traits(strategy).weights
  bool vertical_sync_;
  bool measure_prediction_;
  std::vector<Parameter> parameters_;
  std::vector<size_t> offsets_, sizes_;
  Optimizer optimizer_;
  WeightMemory memory_;
  WeightArray master_;
  WeightArray accumulated_;  // gpipe
  bool accumulating_ = false;
  // The version W_v the working Tensors hold (from W, a stash or the history; -1: a prediction); saves copies.
  int64_t working_version_ = -1;
  int64_t working_writes_ = 0;
  // Stashes are shared by version: the passes in flight that read the same version hold one copy (2bw's
  // micro-batches of one mini-batch; pipedream's first mini-batches, all at version 0). Keyed by (the
  // version W was at, s): with predict_stashed, Ŵ(s) from W_v.
  // pipedream (without vertical sync) copies lazily: a forward at the current version stashes nothing
  // (`on_master`), and the copy is made only when the master is about to change while the stash still
  // has readers (materialize_stashes). The last stage, whose backward follows its forward before any
  // update, then copies nothing, and stage k keeps N-k-1 copies instead of N-k (ResNet-18's second
  // stage: 40 MB copied every mini-batch before).
  struct Stash {
    WeightArray weights;
    int64_t readers = 0;
    bool on_master = false;
  };
  bool lazy_stash_ = false;
  void materialize_stashes();
  using StashId = std::pair<int64_t, int64_t>;
  std::map<StashId, Stash> stashes_;     // pipedream, 2bw
  std::map<int64_t, StashId> stash_of_;  // stash key -> the stash its forward read
  bool predict_stashed_ = false;
  std::deque<std::pair<int64_t, WeightArray>> history_;  // vertical sync: (version, W at it)
  mutable std::vector<WeightArray> spare_;               // released copies (release), at most kMaxSpare
  static constexpr size_t kMaxSpare = 4;
  struct Prediction {
    int64_t target;
    std::vector<float> predicted, unpredicted;  // host copies
  };
  std::vector<Prediction> pending_;  // spectrain, waiting for their target version
  Statistics stats_;
};

}  // namespace onnxtrain
