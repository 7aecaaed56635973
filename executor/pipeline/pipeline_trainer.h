// Training over N pipeline stages (docs/design.md 5.5): the model's training graph cut into stages
// (stage_graphs.h), one worker thread per stage running its Schedule program (schedule.h), tensors
// exchanged through the local Communicator (comm/local_comm.h), weights handled by the strategy's
// WeightPolicy (weight_policy.h). The engine behind `onnxtrain train --strategy naive|pipedream|spectrain|gpipe`.
//
//   PipelineOptions o{.trainer = {.loss = parse_loss_spec("cross-entropy"), .schedule = {.base_lr = 0.01}},
//                     .strategy = PipelineStrategy::spectrain, .stages = 2, .stage_starts = {0, 6}};
//   PipelineTrainer p(model.graph, o);
//   std::vector<float> losses = p.train(batches);            // (x, y) per mini-batch, one loss each, in order
//   std::vector<float> more = p.train(1000, [&] { Batch b = loader.next(); return std::pair(b.x, b.y); },
//                                     [](int64_t i, float loss) { ... progress ... });
//   write_trained_model(path, out, p.trained_initializers());
//   std::cout << format_pipeline_report(p.report());
//
// A train() call is one pipeline run: it fills the pipeline, streams its mini-batches and drains it (1F1B:
// every stage finishes every backward and update; gpipe: a flush per mini-batch anyway). So call it with many
// mini-batches (an epoch, or the whole run), not one at a time. Mini-batches and versions are numbered over
// all calls, so successive calls continue one run (Dropout masks, learning-rate schedule, staleness).
//
// Semantics, per strategy, exactly as the single-device Trainer where they coincide:
//  - The graph is prepared by an internal Trainer (loss, BatchNorm training mode, Dropout seeds), so with
//    N = 1 every strategy (gpipe with M = 1) equals Trainer bit for bit. The caller's graph is not modified
//    (initializers are copied).
//  - Each stage has its own Optimizer over its parameters (same config and schedule, lr = schedule(step));
//    it steps the master weights W only (weight_policy.h says what each pass reads).
//  - Each stage runs its passes of mini-batch i with run index i (Dropout masks equal the single run's) and
//    updates its own BatchNorm running statistics after each forward, with Trainer's update (unbiased by
//    default). gpipe, 1f1b, 2bw: every micro-batch updates them with its own statistics, or, with
//    deferred_batch_norm, the mini-batch's last micro-batch once with all of theirs (deferred_batch_norm.h).
//  - gpipe: mini-batch rows split into M micro-batches (the first rows % M get one row more); mean losses:
//    gradients weighted rows_j·M/B, summed in micro-batch order, scaled by 1/M, one update per mini-batch;
//    the loss reported is Σ rows_j/B · loss_j (sum losses: plain sums). A model-output loss counts as a mean.
//  - Threads: stage k gets threads/N OpenMP threads (the first threads % N stages one more; at least 1),
//    set with omp_set_num_threads on its worker thread. The sequential emulation (threaded = false) runs the
//    same programs on the calling thread, round-robin, an instruction whenever its messages are there, with
//    the same per-stage thread counts: its numbers equal the threaded run's bit for bit.
//  - Errors: a stage that throws aborts the communicator group; train() rethrows the first stage's Error.
//    The trainer cannot continue after that.
//  - Report (after train() returns; not while it runs): per stage samples/s, bubble fraction (time blocked
//    on a neighbour / the stage's wall time), memory, staleness = mean |i − version read| over passes of
//    mini-batch i (spectrain: the version it predicts, so 0 with the sequential target; how well it
//    predicts is `prediction_error`).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "executor/comm/nccl_comm.h"
#include "executor/pipeline/grouped_transport.h"
#include "executor/pipeline/schedule.h"
#include "executor/pipeline/stage_worker.h"
#include "executor/trainer.h"

namespace onnxtrain {

struct PipelineOptions {
  TrainerOptions trainer;  // loss, optimizer, schedule, seed, dropout, running variance, kernels
  PipelineStrategy strategy = PipelineStrategy::naive;
  int stages = 1;
  int64_t micro_batches = 1;          // gpipe: micro-batches per mini-batch (1F1B strategies: must be 1)
  std::vector<int64_t> stage_starts;  // first forward node of each stage (a Plan's first_node); empty:
                                      // forward nodes split into equal counts
  SpecTrainTarget spectrain_target = SpecTrainTarget::sequential;
  bool vertical_sync = false;                // pipedream only
  bool deferred_batch_norm = false;          // gpipe, 1f1b, 2bw: BN running statistics once per mini-batch
  bool predict = false;                      // 2bw: forwards read SpecTrain's Ŵ of their update's version
  bool threaded = true;                      // false: sequential emulation of the same schedule (tests, debugging)
  int threads = 0;                           // OpenMP threads shared by the stages; 0: omp_get_max_threads()
  std::chrono::milliseconds timeout{60000};  // longest wait for a neighbour's tensor
  bool measure_prediction = true;            // spectrain: keep Ŵ and W until W_t exists to score the prediction
  PassObserver observer;                     // called before every pass (from the stage's thread)
  // Not null: raised to k + 1 once every stage of this process is done with mini-batch k (its backward),
  // on every process of a pipeline, where losses come to the last stage's only. Lock-free: a signal
  // handler may read it.
  std::atomic<int64_t>* mini_batches_done = nullptr;
  bool trace = false;  // threaded stages: keep a TraceSpan per instruction (trace())
  // Non-null: stages across processes (`mpirun -np N`): this process runs only stage world->rank() of
  // world->size() == stages, on all its OpenMP threads (`threads`), exchanging tensors over `world`. Every
  // process is given the same mini-batches. Losses (and on_loss) come on the last stage's process only;
  // gather_trained_initializers() collects the whole model on rank 0. Not owned; outlives the trainer.
  Communicator* world = nullptr;
  // > 1 (world mode only): pipeline × data parallelism. `world` has stages · replicas ranks; rank r·N + k
  // runs stage k of pipeline replica r. Every mini-batch is split by rows over the R pipelines (the first
  // B % R get one row more); after each backward the R copies of a stage all-reduce their gradients,
  // each weighted by its rows, so every copy applies the whole mini-batch's gradient and the copies stay
  // identical (gpipe, 1f1b, 2bw: the summed micro-batch gradients, once per update). Losses come from pipeline 0's last
  // stage (its rows' loss); the model is gathered on rank 0 from pipeline 0.
  int replicas = 1;
  // Threads on a CUDA device: the device of each stage; empty: stage k on cuda:(trainer.device.index + k).
  // Stages may share a device (tests on one GPU; the values they hand over are then read in place).
  std::vector<Device> stage_devices;
  // Threads or processes: the link stage k's activations and gradients travel over, in groups, beside
  // `comm` (grouped_transport.h). Empty: the communicator carries them (device values between the threads
  // of one process), or, for processes on GPUs, NCCL. Tests set it to run NCCL's protocol over host memory.
  std::function<std::unique_ptr<PeerLink>(int stage, Communicator& comm)> peer_links;
};

struct StageReport {
  int stage = 0;
  int64_t first_node = 0, end_node = 0;  // forward nodes of the training graph
  int threads = 1;
  int64_t parameters = 0;  // trained elements
  int64_t samples = 0;     // rows through the stage's forward
  double wall_seconds = 0;
  double idle_seconds = 0;  // blocked on a neighbour (recv, or send into a full channel)
  double samples_per_second = 0;
  double bubble_fraction = 0;  // idle / wall (0 in the sequential emulation, which never waits)
  int64_t forward_passes = 0, backward_passes = 0, updates = 0;
  // Memory, bytes: master weights; the working copy the kernels read; peak of stashed versions (pipedream
  // stashes and vertical-sync history); peak of in-flight activations (kept forward values, received and
  // outgoing tensors); optimizer state.
  int64_t weight_bytes = 0, working_bytes = 0, peak_stash_bytes = 0, peak_activation_bytes = 0, optimizer_bytes = 0;
  // The rest ("other" in the report): one backward's parameter gradients; the gradient sum of the
  // strategies that accumulate (gpipe, 1f1b, 2bw); spectrain's kept gradient average and the peak of its
  // report's scoring copies (none with measure_prediction off).
  int64_t gradient_bytes = 0, gradient_sum_bytes = 0, prediction_bytes = 0;
  // Mean |i − version read| over the passes (spectrain: the predicted version).
  double mean_staleness_forward = 0, mean_staleness_backward = 0, mean_staleness = 0;
  // spectrain: mean ‖Ŵ − W_t‖ / ‖W − W_t‖ over the predictions scored; NaN when none.
  double prediction_error = 0;
  int64_t predictions = 0;
};

// One instruction of a stage as it ran (PipelineOptions::trace), for a timeline: seconds since the
// trainer was made. A Recv's span is the time the stage waited for it.
struct TraceSpan {
  Op op = Op::Forward;
  int64_t mini_batch = 0;   // the mini-batch the instruction belongs to
  int64_t micro_batch = 0;  // gpipe: its micro-batch within the mini-batch; 1F1B: 0
  int64_t version = -1;     // Forward/Backward: the weight version the pass reads (schedule.h); else -1
  double start_s = 0, end_s = 0;
};

struct PipelineReport {
  PipelineStrategy strategy = PipelineStrategy::naive;
  int stage_count = 1;
  int64_t micro_batches = 1;
  bool threaded = true;
  int64_t mini_batches = 0, samples = 0;
  double wall_seconds = 0, samples_per_second = 0;
  std::vector<StageReport> stages;
};
// A table, one row per stage, plus the totals.
std::string format_pipeline_report(const PipelineReport& report);

class PipelineTrainer {
 public:
  using BatchSource = std::function<std::pair<DataInputs, Tensor>()>;  // next (x, y); called in order, one at a time
  using LossCallback = std::function<void(int64_t mini_batch, float loss)>;  // from the last stage's thread

  // Throws Error on bad options (stages < 1, stage_starts that do not fit, micro_batches != 1 for 1F1B...),
  // and whatever Trainer and split_training_graph throw.
  PipelineTrainer(const Graph& forward, PipelineOptions options);
  ~PipelineTrainer();

  std::vector<float> train(const std::vector<std::pair<Tensor, Tensor>>& batches, const LossCallback& on_loss = {});
  std::vector<float> train(int64_t count, const BatchSource& next, const LossCallback& on_loss = {});

  // Master weights of every stage, BatchNorm running statistics and every other Parameter/State
  // initializer (unchanged): the same names as Trainer::trained_initializers. Copies.
  std::map<std::string, Tensor> trained_initializers() const;
  // Across processes: a collective every rank calls; rank 0 receives every stage's parameters and
  // statistics and returns the whole model (as trained_initializers), the other ranks return {}. In one
  // process: trained_initializers(). evaluate() on rank 0 then uses the gathered model.
  std::map<std::string, Tensor> gather_trained_initializers();
  // Between train() calls: every stage continues from a saved state (a checkpoint of any layout: the
  // parameters, running statistics and optimizer state by name; SpecTrain's kept gradient averages when
  // the checkpoint has them), and the mini-batch count from its optimizer step. Throws Error (file `path`)
  // naming what the state lacks.
  void restore(const std::map<std::string, Tensor>& values, const std::map<std::string, Tensor>& optimizer_state,
               const std::string& path, const std::map<std::string, Tensor>& predictor_state = {});
  // Stage k's part of a checkpoint: its parameters and running statistics, and its optimizer state
  // ("global_step" from stage 0 only, so that the stages' parts never overlap).
  std::pair<std::map<std::string, Tensor>, std::map<std::string, Tensor>> stage_state(int k) const;
  // Stage k's SpecTrain kept gradient averages (TrainingCheckpoint::predictor_state; empty unless the
  // stage predicts with an optimizer whose state holds no gradient estimate).
  std::map<std::string, Tensor> stage_predictor_state(int k) const;
  // The stage this process runs (world mode), or -1 when it runs them all.
  int local_stage() const { return options_.world ? pipeline_comm()->rank() : -1; }
  // Evaluation with the master weights (Trainer::evaluate on the whole model).
  Trainer::Evaluation evaluate(const DataInputs& inputs, const Tensor& labels, int64_t batch);

  PipelineReport report() const;
  // Per stage, every instruction of the threaded runs so far (empty unless options.trace).
  const std::vector<std::vector<TraceSpan>>& trace() const { return trace_; }
  const PipelineOptions& options() const { return options_; }
  int64_t mini_batches_trained() const { return trained_; }
  const std::vector<int64_t>& stage_starts() const { return starts_; }
  int stage_threads(int stage) const;
  // The trained parameters of each stage, in the order PassObservation::weights lists them.
  std::vector<std::string> stage_parameters(int stage) const;
  const Trainer& reference() const { return *reference_; }

 private:
  BatchFeed::Batch prepare_batch(std::pair<DataInputs, Tensor> batch) const;
  void run_threaded(const std::vector<PipelineRound>& rounds);
  void run_world(const std::vector<PipelineRound>& rounds);
  // `device_values`: the handoff of device values between this process's stages on GPUs; null otherwise.
  void run_stage(int k, Communicator& comm, const std::vector<PipelineRound>& rounds,
                 DeviceHandoff* device_values = nullptr);
  std::unique_ptr<StageTransport> make_transport(int k, Communicator& comm, DeviceHandoff* device_values);
  // Stage k's parameters (master weights) and running statistics, as trained_initializers names them.
  std::vector<std::pair<std::string, Tensor>> stage_tensors(int k) const;
  void run_emulated(const std::vector<PipelineRound>& rounds);
  // The span of instruction `in` of stage k in a round starting at mini-batch `first`, begun at `begin`.
  TraceSpan trace_span(const Schedule& s, int k, int64_t first, const Instruction& in, double begin) const;

  PipelineOptions options_;
  Graph model_;                         // the caller's graph with its own initializer buffers
  std::unique_ptr<Trainer> reference_;  // prepares the graph exactly as Trainer; evaluates
  std::vector<int64_t> starts_;
  std::vector<std::unique_ptr<StageWorker>> workers_;
  std::vector<int> threads_;
  std::map<std::string, Tensor> gathered_;  // world mode, rank 0: the last gather_trained_initializers()
  // Pipeline × data parallelism: this rank's pipeline and the copies of its stage (subgroups of world).
  std::unique_ptr<Communicator> pipeline_group_, stage_group_;
  Communicator* pipeline_comm() const { return pipeline_group_ ? pipeline_group_.get() : options_.world; }
  std::unique_ptr<NcclCommunicator> nccl_;  // world mode on GPUs: the pipeline's stages, for their transfers
  std::vector<double> wall_seconds_, idle_seconds_;
  std::vector<std::vector<TraceSpan>> trace_;  // per stage; written only by the stage's thread
  std::chrono::steady_clock::time_point created_ = std::chrono::steady_clock::now();
  int64_t trained_ = 0, samples_ = 0;
  int64_t train_calls_ = 0;  // PipelineRound::call
  double wall_seconds_total_ = 0;
};

}  // namespace onnxtrain
