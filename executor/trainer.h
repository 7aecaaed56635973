// Training on one device: a forward Graph plus a loss and an optimizer become one training step
// (forward + backward as one InferenceSession over the training graph, then the optimizer updates the
// parameter tensors in place) and an evaluation pass (the same parameters, BatchNormalization on its
// running statistics, Dropout off). The engine behind `onnxtrain train`.
//
//   Trainer trainer(model.graph, {.loss = parse_loss_spec("cross-entropy"),
//                                 .optimizer = config, .schedule = {.base_lr = 0.01}});
//   float loss = trainer.train_step(batch.x, batch.y);          // one optimizer step
//   Trainer::Evaluation e = trainer.evaluate(val.inputs, val.labels, 256);
//   write_trained_model(path, out, trainer.trained_initializers());
//
// Parameters are the graph's initializer Tensors, shared (Tensor copies share buffers) by the training
// graph and the evaluation graph. On the CPU, InferenceSession reads initializer data from its graph on
// every run and the optimizer updates them in place, so an in-place update is what the next run sees.
//
// On a CUDA device the weights are device-resident: both sessions share one DeviceInitializerStore
// (executor/device_initializers.h: the device copies and the one stream), train_step keeps the
// gradients on the device and steps a DeviceOptimizer (executor/device_optimizer.h: the host
// optimizer's functors as CUDA kernels, its state tensors in device memory, the lr schedule and step
// counts on the host), so a step moves only the batch, the loss and the BatchNorm running statistics
// between host and device. The running statistics are updated on the host (RunningStatUpdate::apply)
// and uploaded again before the next run. What reads weights or optimizer state on the host sees the
// current values: trained_initializers() and optimizer().state_tensors() / states() download them on
// demand; restore() and apply_gradients() (host gradients, uploaded) update the device copies;
// compute_gradients / forward_backward download the gradients as on the CPU. Between those points the
// host initializer Tensors (training_graph()'s, and those of the graph given to the constructor, which
// shares them) may lag the device.
//
// Randomness: every Dropout node gets its own seed from (options.seed, its position), and its mask in
// step t comes from (that seed, t) alone (kernels/kernel.h; Philox4x32-10 draws, kernels/philox.h: the same
// mask on the CPU and CUDA backends), so the same seed gives the same run bit for bit, and a run resumed at
// step t (`restore`) draws the masks the uninterrupted run drew.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "executor/device_initializers.h"
#include "executor/device_optimizer.h"
#include "executor/inference_session.h"
#include "executor/loss_scaler.h"
#include "executor/optimizer.h"
#include "executor/replica_gradient_sum.h"
#include "graph/autodiff/loss.h"
#include "graph/autodiff/training_graph.h"
#include "graph/autodiff/training_recipe.h"
#include "graph/data_inputs.h"
#include "graph/mixed_precision.h"

namespace onnxtrain {

// How BatchNormalization's running variance follows the batches, with m the node's momentum attribute:
// running_var = m·running_var + (1−m)·v, where v is the batch variance over N = batch × spatial values
// per channel.
enum class RunningVariance {
  unbiased,    // v = Σ(x−mean)²/(N−1): torch.nn.BatchNorm's update (the default)
  population,  // v = Σ(x−mean)²/N: the ONNX specification's
};
RunningVariance running_variance_from_name(const std::string& name);  // "unbiased" | "population"

// One BatchNormalization running statistic (output k = 1 mean, 2 variance of a BN node in training
// mode) as it follows the batches. The node computes ONNX's update with the population variance v; the
// unbiased one is m·old + (1−m)·v·N/(N−1) = m·old + (new − m·old)·N/(N−1), N = batch × spatial values.
struct RunningStatUpdate {
  double momentum = 0;
  int64_t values_per_sample = 0;  // 0: the node's output is the new statistic as it is

  // Throws Error when the unbiased variance needs spatial sizes the node's input does not have statically.
  static RunningStatUpdate of(const Graph& graph, const Node& batch_norm, int output, RunningVariance mode);
  // state ← the new statistic, from the node's output `computed` for a batch of `batch` samples.
  void apply(std::span<const float> computed, std::span<float> state, int64_t batch) const;
};

// The label tensor the attached loss reads, from a batch's labels y: y itself, int32 class labels when
// the loss wants them, or one-hot float targets (B, classes) for mse, l1 and bce-with-logits on int64
// class labels (classes: the logits' second size; 0 when unknown). Throws Error for a label out of range.
Tensor loss_targets(const LossSpec& loss, const Tensor& y, int64_t classes);
// The logits' class count in `graph` (a (B, C) value with static C), 0 otherwise.
int64_t class_count(const Graph& graph, const std::string& logits);

struct TrainerOptions {
  LossSpec loss;
  OptimizerConfig optimizer;
  LrSchedule schedule;
  std::string kernels;  // kernel implementation ("reference"); empty: the fastest
  Device device;        // where the forward and backward passes and the optimizer step run (on a CUDA
                        // device the weights and optimizer state stay in its memory; see Trainer)
  uint64_t seed = 0;    // seeds the Dropout nodes
  bool dropout = true;  // false: Dropout is the identity in training too (to compare with a framework
                        // whose generator differs)
  RunningVariance running_variance = RunningVariance::unbiased;
  // Mixed precision (graph/mixed_precision.h): Conv, Gemm and MatMul compute in bfloat16/float16 in the
  // training and the evaluation graphs; the parameters (master weights), their gradients and the optimizer
  // stay float32. fp16 scales the loss dynamically (executor/loss_scaler.h; on a CUDA device the unscale
  // and the finite check run there, DeviceOptimizer::unscale).
  Precision precision = Precision::fp32;
  LossScalerOptions loss_scaler;  // fp16 only
  // --on-nonfinite skip (CPU): a step whose loss or any gradient is NaN or infinite changes nothing (weights,
  // optimizer state, running statistics), as GradScaler skips an overflowing step; false: it is applied
  // (and the caller's divergence guard stops the run).
  bool skip_nonfinite_steps = false;
  // --clip-grad-norm (CPU optimizer): before each update the gradients are scaled by
  // min(1, clip_grad_norm / (‖g‖ + 1e-6)), ‖g‖ the 2-norm over every parameter's gradient together, as
  // torch.nn.utils.clip_grad_norm_ does. 0: no clipping.
  double clip_grad_norm = 0;
  // --accumulate K (CPU): every batch runs as K row slices whose gradients are summed, weighed by their
  // share of the rows, before one update: the memory of a batch/K pass for the update of the whole batch.
  int64_t accumulate = 1;
  // Convolutions with a single output pixel train only the weight taps that land on their input
  // (graph/autodiff/live_conv_taps.h) where the optimizer keeps untouched elements; false: all taps.
  bool live_conv_taps = true;
  // Convolutions over small planes (tap_product_takes) train their weights tap-major on the CPU
  // (graph/autodiff/tap_major_conv_weights.h); false: in the model's layout.
  bool tap_major_conv_weights = true;
  // Under bf16 or fp16 a Conv reading fewer than 4 channels, and a depthwise Conv, stay float32 on the CPU
  // (graph/mixed_precision.h conv_stays_float32_on_cpu); false: autocast casts them as the others.
  bool cpu_float32_convs = true;
  // Training-mode BatchNormalization followed by Relu runs as one node on the CPU
  // (graph/autodiff/batch_norm_relu.h); false: as two.
  bool fuse_batch_norm_relu = true;
  // Add followed by Relu runs as one node on the CPU (graph/autodiff/add_relu.h); false: as two.
  bool fuse_add_relu = true;
  // Relu then MaxPool trains as MaxPool then Relu on the CPU (graph/autodiff/pool_before_relu.h).
  bool pool_before_relu = true;
  // Float32 MatMuls train as FusedMatMul on the CPU, with the Transposes before them and their bias Add
  // folded in (graph/autodiff/fused_matmul.h); false: as the model has them.
  bool fuse_matmul = true;
  // GELU written out trains as one Gelu node on the CPU (graph/autodiff/fused_gelu.h); false: as the model
  // has it.
  bool fuse_gelu = true;
  // Single slices gathered after a Transpose are gathered before it on the CPU
  // (graph/autodiff/gather_before_transpose.h); false: as the model has them.
  bool gather_before_transpose = true;
  // Under bf16 or fp16, the backward's half products write float32 on the CPU where autodiff would cast
  // their result back, and the forward's Casts to half go before the Transposes that lead to half products
  // (graph/autodiff/float32_products.h); false: the Casts where autocast puts them.
  bool fold_casts_into_products = true;
};

class Trainer {
 public:
  // Throws Error when the loss cannot be attached or a node has no gradient rule.
  Trainer(const Graph& forward, TrainerOptions options);

  // One step on a batch: x (B, ...) the model input (or every data input, by name), y int64 class labels (B) (one-hot
  // float for mse, l1 and bce-with-logits when the model outputs (B, C)). Returns the loss before the update.
  float train_step(const DataInputs& x, const Tensor& y);

  // Forward and backward of one batch without an update (nor a running-statistics update): every
  // parameter's gradient by parameter name; `loss` receives the loss when not null. It counts as a run
  // (the next Dropout masks are the next step's).
  std::map<std::string, Tensor> compute_gradients(const DataInputs& x, const Tensor& y, float* loss = nullptr);
  // The other half of a step whose gradients were combined elsewhere (data parallelism): forward and
  // backward of a batch that also updates the BatchNorm running statistics, then apply_gradients.
  std::map<std::string, Tensor> forward_backward(const DataInputs& x, const Tensor& y, float* loss);
  // The same, calling on_gradient(parameter name, gradient) as each parameter's gradient is computed,
  // in gradient_order(), while the backward pass goes on (on the calling thread).
  using GradientCallback = std::function<void(const std::string& parameter, const Tensor& gradient)>;
  std::map<std::string, Tensor> forward_backward(const DataInputs& x, const Tensor& y, float* loss,
                                                 const GradientCallback& on_gradient);
  // The same for a step whose optimizer runs outside (applies_optimizer_step_alone), with each parameter's
  // gradient written into a buffer of this trainer's (InferenceSession::run_into), or, where a kernel kept
  // only its taps (a convolution's weight gradient that is mostly zeros), given by those:
  // DataParallelTrainer's sharded step sums them without reading the zeros. With --accumulate all are
  // dense. Valid until the next call.
  struct KeptGradient {
    std::span<float> dense;                   // the gradient's buffer; holds it where `taps` is null
    const Stream::OutputSum* taps = nullptr;  // else its taps and their layout
  };
  std::map<std::string, KeptGradient> forward_backward_kept(const DataInputs& x, const Tensor& y, float* loss);
  // Those gradients as the sharded step takes them (ReplicaGradientSum::publish, ShardedOptimizerStep::
  // prepare), in their (name) order: the dense buffers, the taps where a kernel kept them, the
  // parameters' values, and each parameter's name and size.
  struct KeptForStep {
    std::vector<std::span<float>> gradients, weights;
    std::vector<ReplicaGradientSum::Taps> taps;
    std::vector<std::pair<std::string, size_t>> params;
  };
  KeptForStep kept_for_step(const std::map<std::string, KeptGradient>& gradients);
  // On a CUDA device (Error otherwise): forward and backward of a batch that also updates the BatchNorm
  // running statistics, every trained parameter's gradient left in device memory (by parameter name,
  // ordered on device_stream()); `loss` receives the loss. With apply_device_gradients, the two halves of
  // a step whose gradients are combined on the GPUs (data parallelism over NCCL). fp16: the gradients are
  // still loss-scaled (DeviceOptimizer::unscale divides them).
  std::map<std::string, DeviceTensor> forward_backward_on_device(const DataInputs& x, const Tensor& y, float* loss);
  // One optimizer step on the device with these gradients (as forward_backward_on_device gives them).
  // fp16: unscales them in place first and, when any is inf/NaN, skips the step (the loss scaler backs
  // off); returns whether the step was taken.
  bool apply_device_gradients(const std::map<std::string, DeviceTensor>& gradients);
  // The stream of a CUDA trainer's sessions and optimizer step; Error on the CPU.
  const cuda::DeviceStream& device_stream() const;
  // The trained parameters in the order the backward pass computes their gradients (the last layers'
  // first): the same for every replica of a model, so replicas can agree on all-reduce buckets.
  std::vector<std::string> gradient_order() const;
  // One optimizer step with the given gradient of every trained parameter (by name, as compute_gradients
  // returns them). Throws Error naming a missing or wrongly sized gradient. fp16: the gradients are
  // unscaled already (compute_gradients, forward_backward), and when any is inf/NaN the step is skipped
  // and the loss scaler backs off, as GradScaler.step does (data parallelism: every replica sees the same
  // combined gradients, so all of them decide alike); returns whether the step was taken. (train_step checks
  // the scaled values instead, as torch does; the two differ only once the scale has fallen below 1.)
  bool apply_gradients(const std::map<std::string, Tensor>& gradients);
  // Hands a step's outputs (the gradients, once applied) back to the training session for its next run
  // and empties `values`: buffers over glibc's 32 MiB mmap limit would otherwise be fresh pages every step
  // (VGG-11's 4096x4096 layer: 16 000 page faults a step). A buffer still shared elsewhere is only dropped.
  void recycle(std::map<std::string, Tensor>& values);
  // fp16: whether every gradient (unscaled, as forward_backward gives them) is finite, with the loss
  // scaler updated as GradScaler.update does after a step or a skip; without a scaler true, and nothing
  // changes. For callers that apply the gradients elsewhere (a parameter server's shards).
  bool update_loss_scale(const std::map<std::string, Tensor>& gradients);
  // For an update applied from outside (DataParallelTrainer's sharded step, executor/sharded_optimizer_step.h):
  // whether a trainer of these options applies the optimizer's step alone in apply_gradients (on the CPU,
  // without loss scaling, non-finite skipping or gradient clipping); the values of a trained parameter, which an
  // outside update writes in place; and the optimizer, whose state and step counts it keeps.
  static bool applies_optimizer_step_alone(const TrainerOptions& options);
  std::span<float> parameter_values(const std::string& name);
  Optimizer& optimizer_for_outside_update() { return optimizer_; }

  // The batches this trainer is given are rows [first_row, …) of the mini-batch (a data-parallel replica's
  // slice): its Dropout nodes draw those rows' masks of the whole mini-batch (Stream::set_rows). 0 default.
  void set_first_row(int64_t first_row) { first_row_ = first_row; }

  // Optimizer steps taken so far (fp16: train_step calls whose step was skipped for inf/NaN gradients do
  // not count; see loss_scaler()).
  int64_t step() const { return optimizer_.global_step(); }
  // Mini-batches trained on so far: the optimizer steps plus the steps skipped (fp16: inf/NaN gradients;
  // skip_nonfinite_steps: a non-finite loss or gradient).
  int64_t mini_batches_used() const { return step() + (scaler_ ? scaler_->skipped_steps() : 0) + nonfinite_skips_; }
  // The steps skip_nonfinite_steps skipped.
  int64_t nonfinite_skipped_steps() const { return nonfinite_skips_; }
  // The fp16 loss scaler; null for fp32 and bf16.
  const LossScaler* loss_scaler() const { return scaler_.get(); }
  // The scaler's state as checkpoint tensors ("loss_scaler/scale" float64, "loss_scaler/growth_tracker" and
  // "loss_scaler/skipped_steps" int64 scalars), to store beside Optimizer::state_tensors(); with
  // skip_nonfinite_steps also "nonfinite/skipped_steps" (an int64 scalar); empty otherwise. restore() takes
  // them back from its optimizer_state argument.
  std::map<std::string, Tensor> loss_scaler_state() const;
  // Puts the trainer where a run was after `step` steps: parameters and running statistics (by name;
  // every trained initializer must be given, with its dtype and size), the optimizer's state
  // (Optimizer::state_tensors) and the Dropout run index; for fp16 also the loss scaler's state
  // (loss_scaler_state(), in optimizer_state, required then). Throws Error naming what does not fit.
  void restore(const std::map<std::string, Tensor>& initializers, const std::map<std::string, Tensor>& optimizer_state);

  struct Evaluation {
    // mean per label not ignored (cross-entropy; per sample for the others): exp(loss) is the perplexity
    // of a language model's per-position labels
    double loss = 0;
    // argmax of the logits against the labels not ignored (per position for (B, T) labels); NaN when the
    // labels are not classes
    double accuracy = 0;
    int64_t samples = 0, labels_counted = 0;
  };
  Evaluation evaluate(const DataInputs& inputs, const Tensor& labels, int64_t batch);
  // Frees the buffers both sessions keep for their next runs (InferenceSession::release_buffers).
  // evaluate() frees the training session's before it runs and its own after, so the two never add up.
  void release_buffers();

  // The trained Parameter and State (BatchNorm running statistics) initializers, by name: the graph's
  // own Tensors (sharing their buffers). On a CUDA device they are downloaded first when the device holds
  // newer values, and since a caller may write through them (data parallelism copies running statistics
  // between replicas) the next run uploads them again.
  std::map<std::string, Tensor> trained_initializers() const;
  // On the CPU: every trained parameter of this trainer's that `first` has too (the same name, dtype and
  // sizes) becomes `first`'s Tensor, in the training and the evaluation graph, so that both read and one
  // optimizer step writes one copy. For DataParallelTrainer's replica threads, which share the model's
  // weights: the parameters each trainer's recipe derives from them (tap-major and live-tap weights,
  // graph/autodiff/tap_major_conv_weights.h, live_conv_taps.h) are its own otherwise. Returns how many it
  // shares.
  int share_parameters_of(const Trainer& first);
  // The State initializers alone (BatchNorm running statistics), by name: the graph's own Tensors, always
  // current on the host (the statistics are updated there on every device), so nothing is downloaded.
  // A caller that writes through them calls running_statistics_changed() (a CUDA trainer uploads them
  // again at its next run).
  std::map<std::string, Tensor> running_statistics() const;
  void running_statistics_changed();

  // The optimizer's schedule, steps and state; on a CUDA device its states() and state_tensors()
  // download the device state first.
  const Optimizer& optimizer() const { return optimizer_; }
  // The model's data inputs, in graph order; a batch's DataInputs name them (or is one unnamed Tensor).
  const std::vector<std::string>& input_names() const { return inputs_; }
  const std::string& input_name() const { return inputs_.at(0); }
  const AttachedLoss& loss() const { return loss_; }
  const TrainingGraph& training_graph() const { return *training_; }
  // BatchNormalization nodes whose running statistics are updated every step, and those statistics (a
  // mean and a variance per node).
  int running_stat_nodes() const { return running_stat_nodes_; }
  int running_statistics_count() const { return static_cast<int>(running_stats_.size()); }

 private:
  TrainerOptions options_;
  AttachedLoss loss_;
  std::unique_ptr<TrainingGraph> training_;  // stable address: the session keeps a reference
  std::unique_ptr<InferenceSession> session_;
  std::unique_ptr<Graph> eval_graph_;
  std::unique_ptr<InferenceSession> eval_session_;
  Optimizer optimizer_;
  std::vector<std::string> inputs_;
  struct Slot {
    std::string name;
    ValueId value;
    std::string gradient;
  };
  std::vector<Slot> slots_;
  struct RunningStat {
    std::string output;  // the BN node's new running statistic (a graph output)
    ValueId state;       // the State initializer it replaces
    RunningStatUpdate update;
  };
  std::map<std::string, Tensor> run_step(const DataInputs& x, const Tensor& y,
                                         const InferenceSession::OutputCallback& on_output = {});
  std::map<std::string, Tensor> accumulated_run(const DataInputs& x, const Tensor& y,
                                                const InferenceSession::OutputCallback& on_output);
  std::map<std::string, Tensor> feed(const DataInputs& x, const Tensor& y);
  // --accumulate: the running statistics after the last slice of the last run, in running_stats_ order,
  // for update_running_stats to apply (cleared by every run).
  std::vector<Tensor> accumulated_stats_;
  std::map<std::string, Tensor> gradient_buffers_;       // forward_backward_kept's, by gradient output
  std::map<std::string, Tensor> accumulated_gradients_;  // forward_backward_kept's with --accumulate
  std::map<std::string, Tensor> named_inputs(const DataInputs& x) const;
  float train_step_on_device(const DataInputs& x, const Tensor& y);
  float train_step_kept(const DataInputs& x, const Tensor& y);  // trainer_kept_step.cc
  void require_device(const char* what) const;                  // Error unless on a CUDA device
  void step_on_device(const std::map<std::string, const float*>& gradients);
  // On a CUDA device: the device copies of the weights and the optimizer state (null on the CPU).
  std::shared_ptr<DeviceInitializerStore> device_initializers_;
  std::unique_ptr<DeviceOptimizer> device_optimizer_;
  std::set<std::string> gradient_outputs_;  // the slots' gradient names: kept on the device by train_step
  std::map<std::string, Tensor> gradients_of(const std::map<std::string, Tensor>& out, float* loss) const;
  void update_running_stats(const std::map<std::string, Tensor>& out, int64_t batch);
  void apply_running_stats(const std::map<std::string, Tensor>& out, int64_t batch);  // one run's outputs
  std::vector<RunningStat> running_stats_;
  int running_stat_nodes_ = 0;
  // fp16: the scaler and the training graph's scalar input that multiplies the loss before the backward pass.
  std::unique_ptr<LossScaler> scaler_;
  std::string loss_scale_input_;
  int64_t first_row_ = 0;
  int64_t nonfinite_skips_ = 0;  // skip_nonfinite_steps: the steps skipped
  // skip_nonfinite_steps: whether this step's loss (in `out`) is NaN or infinite, so the step changes nothing.
  bool skips_for_loss(const std::map<std::string, Tensor>& out) const;
};

}  // namespace onnxtrain
