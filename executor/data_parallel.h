// Data parallelism in one process (`onnxtrain train --strategy dp --replicas R`): R replicas of the
// model, one thread each, every mini-batch split by rows across them (the first B % R replicas get one
// row more), gradients combined with the Communicator's all-reduce and one identical optimizer step on
// every replica (TF MirroredStrategy, PyTorch DDP). The all-reduce sums g_r · rows_r / B, so with mean
// losses the step uses the gradient of the whole mini-batch: R replicas × B/R equal one replica × B up
// to summation order. Sum-reduced losses are summed as they are.
//
//   DataParallelTrainer dp(model.graph, {.trainer = options, .replicas = 2});
//   std::vector<float> losses = dp.train(steps, next_batch, on_loss);
//
// Weights start identical (each replica copies the model's initializers) and stay identical: every
// replica applies the same reduced gradient with the same optimizer. BatchNorm running statistics
// follow replica 0's shard and are copied to the others after every step, as DDP's broadcast_buffers
// does. Dropout: a replica draws its rows' masks of the whole mini-batch (the same seeds everywhere, run
// index = the step, counters offset by the slice's first row: kernels/kernel.h), so R replicas compute the
// one-device step. The all-reduce adds in replica order, so a run is deterministic whatever the thread timing.
//
// Across processes (`mpirun -np R onnxtrain train --strategy dp`): give `world`, the communicator of the R
// processes; this process then holds the single replica world->rank(). Every process is handed the same
// whole mini-batch (the same data, seed and shuffle) and takes its rows; initial weights are broadcast
// from rank 0; the gradients (and the loss, as one extra element) are summed by world->all_reduce_sum
// in rank order, so R processes compute exactly what R replica threads compute; BatchNorm statistics
// are broadcast from rank 0 after each step.
//
// On GPUs (`--device cuda`: replica threads on cuda:N..N+R-1, or one process per GPU) the gradients never
// leave the devices: each replica keeps them in device memory, weighs them by its rows, and NCCL sums
// them in place (executor/comm/nccl_comm.h; one group of all-reduces per step, after the backward
// pass: --bucket-mb does not apply), then every replica steps its device-resident weights. NCCL adds in
// its own order, so GPU replicas agree with each other exactly but with one GPU replica only to float32
// rounding. The loss is summed on the host.
//
// Mixed precision: bf16 needs nothing more. fp16 (dynamic loss scaling) as DDP with GradScaler: each
// replica's loss is scaled, the combined gradient is unscaled and checked (on the host as each replica's
// backward pass returns its gradients, on GPUs after NCCL's sum), and every replica's own scaler skips or
// takes the step; they see the same sum, so they stay in step. Not with --bucket-mb on the CPU.
//
// Replica threads on the CPU without buckets step sharded (ZeRO-1 within the process): the replicas share
// one copy of the weights (their BatchNorm statistics stay their own), and each sums its share of every
// gradient's elements and applies replica 0's optimizer to that share of the weights as it goes
// (ReplicaGradientSum::step_share), between the exchange's barriers while no replica computes. Replica 0's
// optimizer state is the only one: R - 1 fewer copies of it and of the weights. Replica 0's checkpoint is
// the run's, as before. Bit for bit the weights of every replica applying the summed gradients. Not where
// apply_gradients does more than the optimizer's step: fp16's loss scaling, --on-nonfinite skip,
// --clip-grad-norm.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "executor/comm/comm.h"
#include "executor/comm/nccl_comm.h"
#include "executor/replica_gradient_sum.h"
#include "executor/sharded_optimizer_step.h"
#include "executor/trainer.h"
#include "executor/worker_threads.h"

namespace onnxtrain {

struct DataParallelOptions {
  TrainerOptions trainer;
  int replicas = 1;
  int threads = 0;  // OpenMP threads shared by the replicas; 0: omp_get_max_threads()
  std::chrono::milliseconds timeout{60000};
  // > 0: the gradients are all-reduced in buckets of about this many bytes, in the order the backward
  // pass computes them, each on a communication thread as soon as its last gradient exists, while the
  // backward pass goes on (DDP's bucketed overlap). 0: one all-reduce of everything after the backward.
  // The sums are element-wise in replica order either way, so the result is the same bit for bit.
  int64_t bucket_bytes = 0;
  // Non-null: one replica in this process, rank world->rank() of world->size() (replicas must be 1).
  // Not owned; outlives the trainer.
  Communicator* world = nullptr;
};

class DataParallelTrainer {
 public:
  using BatchSource = std::function<std::pair<DataInputs, Tensor>()>;
  using LossCallback = std::function<void(int64_t step, float loss)>;

  // Throws Error "--replicas R: not enough memory: ..." before building anything when the replicas'
  // weights, gradients, optimizer state and thread stacks cannot fit (executor/replica_memory.h), and
  // "out of memory ..." when an allocation or a thread start fails while building them.
  DataParallelTrainer(const Graph& forward, DataParallelOptions options);
  ~DataParallelTrainer();

  // `count` steps on the batches `next` returns; the loss of each (the mean over the replicas, weighted
  // by their rows), in order. on_loss is called on the calling thread after each step.
  std::vector<float> train(int64_t count, const BatchSource& next, const LossCallback& on_loss = {});
  float train_step(const DataInputs& x, const Tensor& y);

  std::map<std::string, Tensor> trained_initializers() const { return replicas_[0]->trained_initializers(); }
  // Every replica of this process continues from a checkpoint's state (Trainer::restore); `path` names
  // the checkpoint in errors. All replicas hold the same state, so any layout's checkpoint fits.
  void restore(const std::map<std::string, Tensor>& initializers, const std::map<std::string, Tensor>& optimizer_state,
               const std::string& path);
  Trainer::Evaluation evaluate(const DataInputs& inputs, const Tensor& labels, int64_t batch) {
    return replicas_[0]->evaluate(inputs, labels, batch);
  }
  int replicas() const { return static_cast<int>(replicas_.size()); }  // in this process
  const Trainer& replica(int r) const { return *replicas_[r]; }
  // The replicas of the whole run, and the index of this process's first one.
  // Time this process spent, over all steps: in whole steps, and (replica 0, or this process's replica)
  // inside the gradient all-reduce; and the bytes each replica all-reduced per step.
  struct Timing {
    int64_t steps = 0;
    // allreduce_seconds: with buckets, only the part the step waits for after its backward pass (the
    // rest overlapped with it).
    double step_seconds = 0, allreduce_seconds = 0;
    int buckets = 1;
    int64_t allreduce_bytes_per_step = 0;
    bool on_devices = false;  // NCCL on the GPUs: asynchronous, so allreduce_seconds is not measured
    // Per replica of this process: forward and backward (the busy time), and the gradient exchange after
    // them (weighing, the all-reduce and the wait for the slowest replica: the blocked time).
    std::vector<double> compute_seconds, exchange_seconds;
  };
  const Timing& timing() const { return timing_; }
  int global_replicas() const { return options_.world ? options_.world->size() : replicas(); }
  int first_replica() const { return options_.world ? options_.world->rank() : 0; }

 private:
  // Replica `local` (global index first_replica() + local): its rows of the whole batch, forward and
  // backward, the all-reduce over `comm`, the update. Returns its row-weighted loss (the reduced
  // total when the loss rides along in the all-reduce, i.e. across processes).
  float replica_step(int local, Communicator& comm, const DataInputs& x, const Tensor& y);
  // The constructor's allocations: the replicas' models and trainers, buckets, communicators and threads.
  void build_replicas(const Graph& forward);
  void copy_running_stats_from_first();
  // The gradient all-reduce of one replica, flat after the backward or bucketed during it; `loss` rides
  // along across processes. Returns the reduced gradients by parameter and sets `loss` to the reduced one.
  std::map<std::string, Tensor> reduce_gradients(int local, Communicator& comm, const DataInputs& x, const Tensor& y,
                                                 double weight, float& loss);
  // The GPU step of replica `local`: device gradients weighed, all-reduced by NCCL, applied on the
  // device. Returns the replica's row-weighted loss (summed over the processes across processes).
  float device_replica_step(int local, const DataInputs& x, const Tensor& y, double weight);
  std::vector<std::vector<std::string>> buckets_;    // parameters per bucket, in gradient order
  std::map<std::string, int64_t> parameter_numels_;  // trained initializers' element counts, by name

  DataParallelOptions options_;
  std::vector<Graph> models_;  // one copy of the model per replica, with its own initializer buffers (sharded:
                               // replica 0's weights, its own BatchNorm statistics)
  std::vector<std::unique_ptr<Trainer>> replicas_;
  std::vector<std::unique_ptr<Communicator>> comms_;
  std::unique_ptr<ReplicaGradientSum> gradient_sum_;    // replica threads of one process, without buckets
  std::unique_ptr<ShardedOptimizerStep> sharded_step_;  // where steps_sharded(): the replicas share their weights
  // Replica threads of one process without buckets, whose update is the optimizer's step alone.
  bool steps_sharded() const;
  std::chrono::steady_clock::time_point sum_and_step_in_place(int local, Communicator& comm, const DataInputs& x,
                                                              const Tensor& y, double weight, float& loss,
                                                              const std::string& what);
  std::vector<std::unique_ptr<NcclCommunicator>> nccl_;  // on GPUs: one per local replica
  std::unique_ptr<WorkerThreads> replica_threads_;       // replicas 1..R-1 (replica 0 runs on the caller's thread)
  std::vector<int> threads_;
  Timing timing_;
};

}  // namespace onnxtrain
