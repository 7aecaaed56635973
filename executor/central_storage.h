// Central storage in one process (`onnxtrain train --central-storage --strategy dp --replicas R`, TF's
// CentralStorageStrategy): the weights, BatchNorm running statistics and optimizer state live once, in
// a master copy with one Optimizer; R replica threads compute gradients on copies they take from it.
// Each step:
//   1. replica r copies the master weights and statistics into its own model (the "weights out");
//   2. it runs forward and backward on its rows of the mini-batch (micro_batch_rows: the first B % R
//      replicas get one row more) and weighs its gradient by rows_r / B (mean losses), as
//      DataParallelTrainer does;
//   3. the gradients are summed into the storage in replica order, ((g0 + g1) + g2) + ..., in float, the
//      order of Communicator::all_reduce_sum (the "gradients in");
//   4. the one Optimizer applies the sum to the master weights; the statistics follow replica 0's.
// So a run equals DataParallelTrainer with the same replicas bit for bit (and one device on the whole
// mini-batch up to summation order), while the optimizer state is held once instead of R times.
//
//   CentralStorageTrainer cs(model.graph, {.trainer = options, .replicas = 2});
//   std::vector<float> losses = cs.train(steps, next_batch, on_loss);
//   write_trained_model(path, out, cs.trained_initializers());
//   cs.report().bytes_per_step();   // what crossed between the storage and the replicas per step
//
// Dropout: replica r draws its rows' masks of the whole mini-batch, as in DataParallelTrainer.
//
// fp16 (trainer.precision): the storage holds the one LossScaler, which every replica takes with the
// weights; the summed unscaled gradient is checked for inf/NaN, and such a step is skipped with the scale
// backed off (statistics still follow replica 0), as DataParallelTrainer's replicas all decide alike.
//
// GPUs (trainer.device cuda:N): replica r computes on cuda:N+r, and the storage stays in host memory, as
// TF's CentralStorageStrategy keeps the variables on the CPU when there are several GPUs: each step
// uploads the weights to every replica and downloads its gradients (Trainer::restore, forward_backward).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "executor/trainer.h"
#include "executor/worker_threads.h"

namespace onnxtrain {

struct CentralStorageOptions {
  TrainerOptions trainer;
  int replicas = 1;
  int threads = 0;  // OpenMP threads shared by the replicas; 0: omp_get_max_threads()
};

// Traffic between the storage and the replicas (bytes of float32 values).
struct CentralStorageReport {
  int replicas = 0;
  int64_t steps = 0;
  int64_t parameter_bytes = 0;        // one copy of the trained parameters
  int64_t state_bytes = 0;            // one copy of the BatchNorm running statistics
  int64_t optimizer_state_bytes = 0;  // the storage's optimizer state (held once)
  // Per step: every replica sends its gradient in (R × parameter_bytes) and receives the weights and
  // statistics out (R × (parameter_bytes + state_bytes)); replica 0's statistics go in too.
  int64_t gradient_bytes_in_per_step() const { return replicas * parameter_bytes + state_bytes; }
  int64_t weight_bytes_out_per_step() const { return replicas * (parameter_bytes + state_bytes); }
  int64_t bytes_per_step() const { return gradient_bytes_in_per_step() + weight_bytes_out_per_step(); }
  // Measured over the run: whole steps, and per replica its busy time (taking the weights out, forward,
  // backward, weighing); the rest of a replica's step is blocked (the others, the sum and the update).
  double step_seconds = 0;
  std::vector<double> replica_compute_seconds;
};
// A few lines for the end of a run: replicas, bytes in and out per step and in total.
std::string format_central_storage_report(const CentralStorageReport& report);

class CentralStorageTrainer {
 public:
  using BatchSource = std::function<std::pair<DataInputs, Tensor>()>;
  using LossCallback = std::function<void(int64_t step, float loss)>;

  // Throws Error for replicas < 1 or a model the Trainer refuses.
  CentralStorageTrainer(const Graph& forward, CentralStorageOptions options);
  ~CentralStorageTrainer();

  // `count` steps on the batches `next` returns; the loss of each (the replicas' row-weighted sum), in
  // order. on_loss(global step index, loss) is called on the calling thread after each step.
  std::vector<float> train(int64_t count, const BatchSource& next, const LossCallback& on_loss = {});
  // One step. Throws Error when the batch has fewer rows than there are replicas.
  float train_step(const DataInputs& x, const Tensor& y);

  // The master parameters and running statistics (shared buffers: valid until the next step).
  std::map<std::string, Tensor> trained_initializers() const { return master_; }
  // Evaluates the master weights (on replica 0, refreshed from the storage first).
  Trainer::Evaluation evaluate(const DataInputs& inputs, const Tensor& labels, int64_t batch);

  int replicas() const { return static_cast<int>(replicas_.size()); }
  const Optimizer& optimizer() const { return optimizer_; }
  int64_t step() const { return optimizer_.global_step(); }
  // Steps taken plus fp16 steps skipped for inf/NaN gradients.
  int64_t mini_batches_used() const { return step() + (scaler_ ? scaler_->skipped_steps() : 0); }
  // fp16's loss scaler; null for fp32 and bf16.
  const LossScaler* loss_scaler() const { return scaler_.get(); }
  CentralStorageReport report() const;

 private:
  // The constructor's allocations: the replicas' models and trainers, the master copy, the threads.
  void build_replicas(const Graph& forward);
  // Copies the master weights and statistics into replica k, with its Dropout run index at step().
  void refresh(int k);

  CentralStorageOptions options_;
  std::vector<Graph> models_;  // one copy of the model per replica, with its own initializer buffers
  std::vector<std::unique_ptr<Trainer>> replicas_;
  std::vector<int> threads_;
  // Replicas 1..R-1 (replica 0 runs on the caller's thread), alive as long as the trainer, so that their
  // OpenMP pools and, on GPUs, their cuBLAS and cuDNN handles persist from step to step.
  std::unique_ptr<WorkerThreads> replica_threads_;
  std::map<std::string, Tensor> master_;  // Parameter and State initializers by name, owned here
  std::vector<std::string> state_names_;  // the State (running statistics) entries of master_
  Optimizer optimizer_;
  std::unique_ptr<LossScaler> scaler_;  // fp16
  double step_seconds_ = 0;
  std::vector<double> compute_seconds_;  // per replica; each replica thread writes only its own slot
};

}  // namespace onnxtrain
