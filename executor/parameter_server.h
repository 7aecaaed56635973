// Asynchronous parameter-server training in one process (`onnxtrain train --strategy ps --servers S
// --replicas W [--ps-predict]`, TF's ParameterServerStrategy): the trained parameters and BatchNorm
// running statistics are split over S server shards (greedily by bytes, largest first, each to the
// lightest shard), each with its own Optimizer, version counter and mutex; W worker threads train
// against them without waiting for each other. A worker repeatedly
//   1. takes the next mini-batch i from the shared source (handed out in order under a lock);
//   2. pulls every shard's weights and statistics, noting the shard's version (updates applied so far);
//   3. runs forward and backward on the whole mini-batch (its mean gradient; Dropout draws mask i);
//   4. pushes: each shard applies the gradient of its parameters at once with its optimizer (lr from
//      its own version) and takes the worker's running statistics, then counts version + 1.
// The staleness of a push on a shard is (the shard's version when it applies) − (the version pulled):
// the updates other workers applied in between. A push's staleness is the largest over its shards.
// With one worker it is always 0 and a run equals Trainer::train_step on the same batches bit for bit;
// with more the result depends on the thread timing (the report shows how stale the gradients were).
//
// ps_predict (SpecTrain's weight prediction applied to stale pulls): before computing, the worker
// replaces each pulled parameter W by Ŵ(s), the shard optimizer's own update rule run s updates ahead
// (executor/weight_prediction.h, the predictor the pipeline's spectrain stages use), where s is the
// worker's measured staleness on that shard (the running mean of the staleness of its own earlier pushes
// there) rounded to the nearest integer. s = 0 (the first push, or one worker) leaves the weights untouched.
//
// fp16 (trainer.precision): every worker keeps its own loss scaler, as each process of a torch job has its
// own GradScaler; a gradient with an inf or NaN is not pushed (its running statistics are), and that
// worker's scale backs off (Push::skipped). With one worker that is Trainer::train_step's skip.
//
// GPUs (trainer.device cuda:N): worker w computes on cuda:N+w; the shards stay in host memory, as TF's
// parameter servers are CPU tasks: a pull uploads the weights (Trainer::restore), a push downloads the
// gradients (forward_backward).
//
//   ParameterServerTrainer ps(model.graph, {.trainer = options, .servers = 2, .workers = 4, .predict = true});
//   std::vector<float> losses = ps.train(steps, next_batch, on_loss);
//   std::printf("%s", format_parameter_server_report(ps.report()).c_str());
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "executor/pipeline/weight_memory.h"
#include "executor/trainer.h"

namespace onnxtrain {

// What a worker pulled of one parameter (ParameterServerOptions::after_pull).
struct PulledParameter {
  int worker = 0;
  int64_t mini_batch = 0;
  int64_t steps = 0;  // s of the prediction (0: none)
  const std::string& name;
  const Tensor& stored;     // W on the shard
  const Tensor& pulled;     // what the worker computes with: Ŵ(s), or W
  const ParamState& state;  // the shard optimizer's state of it (step 0 and no tensors before its first update)
};

struct ParameterServerOptions {
  TrainerOptions trainer;
  int servers = 1;  // S shards
  int workers = 1;  // W worker threads
  bool predict = false;
  int threads = 0;  // OpenMP threads shared by the workers; 0: omp_get_max_threads()
  // For tests: called on a worker's thread after it computed mini-batch i's gradient and before it pushes
  // it (to force an interleaving). May block; must not throw.
  std::function<void(int worker, int64_t mini_batch)> before_push;
  // For tests: called for every parameter a worker pulls, under its shard's lock. Must not throw.
  std::function<void(const PulledParameter&)> after_pull;
};

struct ParameterServerReport {
  struct Push {
    int64_t mini_batch = 0;
    int worker = 0;
    float loss = 0;
    int64_t staleness = 0;                 // the largest over the shards
    std::vector<int64_t> shard_staleness;  // per shard
    double predicted_steps = 0;            // s used for the prediction (largest over the shards); 0: none
    bool skipped = false;                  // fp16: inf/NaN in the gradient, not applied (the statistics were)
    double compute_seconds = 0;            // forward and backward (the worker busy)
    double exchange_seconds = 0;           // pull and push, waiting for the shards' locks included (blocked)
  };
  int servers = 0, workers = 0;
  bool predict = false;
  std::vector<Push> pushes;             // one per mini-batch trained, in mini-batch order
  std::vector<int64_t> shard_bytes;     // parameters and statistics held by each shard
  std::vector<int64_t> shard_tensors;   // how many tensors each shard holds
  std::vector<int64_t> shard_versions;  // updates each shard applied
  int64_t pull_bytes = 0;               // per push: everything pulled
  int64_t push_bytes = 0;               // per push: the gradients plus the running statistics

  // Derived from `pushes`.
  double mean_staleness() const;
  int64_t max_staleness() const;
  std::vector<int64_t> histogram() const;   // [s] = pushes with staleness s
  std::vector<int64_t> per_worker() const;  // pushes by worker
  std::vector<double> shard_mean_staleness() const;
  int64_t predicted_pushes() const;                    // pushes that used a prediction (s > 0)
  std::vector<double> worker_compute_seconds() const;  // per worker, summed over its pushes
  std::vector<double> worker_exchange_seconds() const;
  int64_t skipped_pushes() const;  // fp16 pushes not applied for inf/NaN gradients
};
// The staleness report printed at the end of a run: shards, pushes per worker, mean/max staleness, the
// histogram, and with prediction how many pulls were predicted.
std::string format_parameter_server_report(const ParameterServerReport& report);

class ParameterServerTrainer {
 public:
  using BatchSource = std::function<std::pair<DataInputs, Tensor>()>;
  using LossCallback = std::function<void(int64_t step, float loss)>;

  // Throws Error for servers or workers < 1, or a model the Trainer refuses.
  ParameterServerTrainer(const Graph& forward, ParameterServerOptions options);
  ~ParameterServerTrainer();

  // `count` mini-batches from `next` (called under a lock, in order, from the worker threads), trained
  // asynchronously by the workers. Returns the loss of each in mini-batch order; on_loss(global
  // mini-batch index, loss) is called on the calling thread, in mini-batch order, as they complete. A
  // worker's error (or on_loss's) stops the others at their next mini-batch and is rethrown here; the shards
  // keep the updates applied until then, the report only the pushes of earlier calls.
  std::vector<float> train(int64_t count, const BatchSource& next, const LossCallback& on_loss = {});
  float train_step(const DataInputs& x, const Tensor& y);

  // The shards' current parameters and running statistics (copies).
  std::map<std::string, Tensor> trained_initializers() const;
  // Evaluates the shards' current weights (on worker 0's model).
  Trainer::Evaluation evaluate(const DataInputs& inputs, const Tensor& labels, int64_t batch);

  int servers() const { return static_cast<int>(shards_.size()); }
  int workers() const { return static_cast<int>(workers_.size()); }
  int64_t steps() const { return next_mini_batch_; }  // mini-batches trained (all train calls)
  // The shard that holds a parameter or statistic.
  int shard_of(const std::string& name) const { return shard_of_.at(name); }
  const ParameterServerReport& report() const { return report_; }

 private:
  struct Shard {
    std::mutex mutex;
    std::vector<std::string> names;        // its parameters and statistics
    std::map<std::string, Tensor> values;  // owned copies
    std::vector<std::string> state_names;  // the statistics among them
    std::unique_ptr<Optimizer> optimizer;  // global_step = version
    WeightMemory prediction;               // host memory: the predictor's kept averages (ps_predict)
    int64_t version() const { return optimizer->global_step(); }
  };
  struct Worker {
    Graph model;
    std::unique_ptr<Trainer> trainer;
    std::map<std::string, Tensor> pulled;  // the weights it pulled (then predicted), owned
    std::vector<int64_t> pulled_version;   // per shard
    std::vector<double> staleness_sum;     // per shard, over its pushes
    int64_t pushes = 0;
  };
  // mini_batch, worker: for after_pull (-1: the final pull of the model).
  // The constructor's allocations: the workers' models and trainers, the shards.
  void build(const Graph& forward);
  void pull(Worker& w, bool predict, int64_t mini_batch, int worker);
  void take_pulled(Worker& w, int64_t run);
  void work(int index, int64_t end);

  ParameterServerOptions options_;
  std::vector<std::unique_ptr<Shard>> shards_;
  std::map<std::string, int> shard_of_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<int> threads_;
  ParameterServerReport report_;
  int64_t next_mini_batch_ = 0;

  // The current train() call (guarded by run_mutex_).
  std::mutex run_mutex_;
  const BatchSource* source_ = nullptr;
  bool stop_ = false;
};

}  // namespace onnxtrain
