// One pipeline stage at run time: its forward and backward InferenceSessions, its WeightPolicy, the
// tensors of its in-flight micro-batches, and the interpreter of its Schedule program. The
// PipelineTrainer (pipeline_trainer.h) runs one StageWorker per thread, or all of them on one thread
// (the sequential emulation); the numbers are the same either way because a worker's results depend only
// on its program order and the tensors it receives.
//
//   StageWorker w(std::move(stage_graphs), config);
//   w.begin_round(round);
//   for (const Instruction& in : schedule.programs[k]) w.execute(in, transport);   // threaded
//   while (!w.execute(in, mailbox)) ...                                          // emulation: Recv not ready
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "executor/comm/comm.h"
#include "executor/inference_session.h"
#include "executor/pipeline/deferred_batch_norm.h"
#include "executor/pipeline/schedule.h"
#include "executor/pipeline/stage_graphs.h"
#include "executor/pipeline/stage_transport.h"
#include "executor/pipeline/weight_policy.h"
#include "executor/trainer.h"

namespace onnxtrain {

// The mini-batches of a train() call, fetched once each, in order, from one source, and handed to every
// stage that asks (thread-safe). A mini-batch is dropped when all stages have released it. A stage about to
// wait for a neighbour fetches the next mini-batch ahead (prefetch), so that the first stage's first
// forward of it does not: there the fetch (gathering, normalising) held every later stage waiting.
class BatchFeed {
 public:
  struct Batch {
    DataInputs x;   // the model's data inputs (one unnamed tensor: StageConfig::input)
    Tensor labels;  // already in the form the loss reads (labels_for)
    int64_t rows = 0;
    int64_t total_rows = 0;  // the whole mini-batch's (rows is this pipeline's share with data parallelism)
    int64_t first_row = 0;   // where this pipeline's share starts in the mini-batch
  };
  // Mini-batches first .. first + count - 1. `done`, when not null, is raised to k + 1 once every consumer
  // has released mini-batch k (PipelineOptions::mini_batches_done).
  BatchFeed(std::function<Batch()> fetch, int64_t first, int64_t count, int consumers,
            std::atomic<int64_t>* done = nullptr)
      : fetch_(std::move(fetch)), next_(first), end_(first + count), consumers_(consumers), done_(done) {}
  Batch get(int64_t mini_batch);
  // Fetches `mini_batch` now if it is one of this feed's and not fetched yet; a no-op otherwise.
  void prefetch(int64_t mini_batch);
  void release(int64_t mini_batch);

 private:
  void fetch_through(int64_t mini_batch);

  std::mutex fetch_mutex_;  // one fetch at a time, in order; held while fetching, without mutex_
  std::mutex mutex_;        // guards next_ and held_: a stage takes a fetched mini-batch during another's fetch
  std::function<Batch()> fetch_;
  int64_t next_;  // the first mini-batch not fetched yet
  int64_t end_;
  int consumers_;
  std::atomic<int64_t>* done_;
  std::map<int64_t, std::pair<Batch, int>> held_;  // batch, releases still due
};

struct StageConfig {
  int threads = 1;  // OpenMP threads of this stage (set by the caller on the executing thread)
  PipelineStrategy strategy = PipelineStrategy::naive;
  bool vertical_sync = false;
  bool measure_prediction = true;
  std::string kernels;
  // Where this stage's forward and backward passes run. On a CUDA device the values the backward pass
  // reads stay in device memory, and so do the activations and gradients sent to the neighbours: the
  // transport must carry device values (a CommTransport with a DeviceHandoff, a Mailbox, or a
  // GroupedTransport over NCCL).
  Device device;
  RunningVariance running_variance = RunningVariance::unbiased;
  // gpipe, 1f1b, 2bw: BatchNorm running statistics updated once per mini-batch from all its micro-batches
  // (deferred_batch_norm.h), not once per micro-batch.
  bool deferred_batch_norm = false;
  bool predict_stashed = false;  // 2bw: forwards read (and stash) SpecTrain's prediction
  LossReduction reduction = LossReduction::Mean;
  std::vector<std::string> inputs;  // the model's data inputs, in graph order
  std::string labels;               // the loss's labels input (may be empty)
  // Whether this process runs the stage. With a stage per process every process builds every stage (for
  // their names and sizes); the others keep their weights in host memory, whatever `device` says.
  bool local = true;
  // Pipeline × data parallelism: the copies of this stage in the other pipelines. Before each update the
  // gradients (each weighted by its pipeline's share of the mini-batch's rows) are summed over it.
  Communicator* replica_group = nullptr;
};

// What one pass looks like to an observer (tests, debugging); called right before the pass runs, from the
// stage's thread. `weights`: the working Tensors in parameter order (copy them to keep them).
struct PassObservation {
  int stage = 0;
  bool backward = false;
  int64_t mini_batch = 0, micro_batch = 0;
  int64_t version_read = 0;    // the policy's answer (spectrain: the predicted version)
  int64_t master_version = 0;  // the stage's optimizer steps so far
  const std::vector<std::string>* names = nullptr;
  const std::vector<Tensor>* weights = nullptr;
};
using PassObserver = std::function<void(const PassObservation&)>;

// One round of a schedule: 1F1B, a whole train() call (micro-batch i = mini-batch first + i); gpipe, one
// mini-batch `first` split into schedule.micro_batches micro-batches.
struct PipelineRound {
  const Schedule* schedule = nullptr;
  int64_t first = 0;
  BatchFeed* feed = nullptr;
  std::vector<float>* losses = nullptr;  // by mini-batch − loss_offset; written by the stage that makes the loss
  int64_t loss_offset = 0;               // the train() call's first mini-batch
  const std::function<void(int64_t, float)>* on_loss = nullptr;
  const PassObserver* observer = nullptr;
  int64_t call = 0;  // numbers the train() calls: the rounds of one call share their schedule
};

class StageWorker {
 public:
  StageWorker(StageGraphs graphs, StageConfig config, Optimizer optimizer);

  int index() const { return graphs_.index; }
  const StageGraphs& graphs() const { return graphs_; }
  const StageConfig& config() const { return config_; }
  WeightPolicy& weights() { return *weights_; }
  // A CUDA stage's stream: its passes, weight uploads and device transfers run on it in order.
  const cuda::DeviceStream& device_stream() const;
  const WeightPolicy& weights() const { return *weights_; }

  void begin_round(const PipelineRound& round);
  // Runs one instruction of the round's program; false only when it is a Recv whose tensors are not all
  // there yet (try again later; what arrived is kept). Before every instruction other than a transfer, and
  // before a Recv that schedule.h's launch_before marks, the transport is flushed (StageTransport::flush).
  bool execute(const Instruction& instruction, StageTransport& transport);
  // After the last round: master weights into the working Tensors, unscored predictions dropped.
  void end_run();

  // BatchNormalization running statistics of this stage: (State initializer name, its Tensor).
  std::vector<std::pair<std::string, Tensor>> running_statistics() const;
  // Between runs: this stage's weights, optimizer state and running statistics from a saved state that
  // holds them (by name; WeightPolicy::restore).
  void restore(const std::map<std::string, Tensor>& values, const std::map<std::string, Tensor>& optimizer_state,
               const std::map<std::string, Tensor>& predictor_state);

  int64_t samples = 0;
  int64_t peak_activation_bytes = 0;
  int64_t peak_gradient_bytes = 0;  // one backward's parameter gradients

 private:
  struct RunningStat {
    std::string output;
    std::string state_name;
    Tensor state;
    RunningStatUpdate update;
  };
  // A BatchNorm node's running mean and variance (indices into running_stats_), for deferred statistics.
  struct DeferredNode {
    size_t mean = 0, variance = 0;
    double momentum = 0.9;  // the node's (RunningStatUpdate has it only for the unbiased variance)
    DeferredBatchStats stats;
  };
  struct MicroBatch {
    std::map<std::string, StageValue> received;  // activations from the previous stage / gradients from the next
    std::map<std::string, StageValue> kept;      // forward values the backward reads
    std::vector<StageValue> outgoing;            // what the next Send instruction sends
    int64_t rows = 0;
  };

  int64_t mini_batch_of(int64_t micro) const;
  int64_t tag_of(int64_t micro) const;
  std::string what(int64_t micro, const char* kind, const std::string& name) const;
  void feed_data(const Graph& graph, int64_t micro, std::map<std::string, Tensor>& inputs);
  std::pair<int64_t, int64_t> local_rows(const BatchFeed::Batch& batch, int64_t micro) const;
  int64_t micros_per_mini() const;
  int64_t micro_in_mini(int64_t micro) const;
  void report_loss(int64_t mini, float loss);
  std::pair<int64_t, int64_t> rows_of(int64_t micro);
  // Runs `session` (of `graph`) on micro-batch `micro`: its inputs are the micro-batch's kept and received
  // values (host or device) and the data. The outputs named in `keep_on_device` come back in
  // `device_outputs`, the others as host tensors, except those named in `into` (CPU), which go into
  // those buffers, added when `adds` (InferenceSession::run_into).
  using DeviceOutputs = std::map<std::string, std::shared_ptr<const DeviceTensor>>;
  std::map<std::string, Tensor> run_pass(InferenceSession& session, const Graph& graph, int64_t micro,
                                         const std::set<std::string>& keep_on_device, DeviceOutputs& device_outputs,
                                         const std::map<std::string, Tensor>& into = {}, bool adds = false);
  void forward(int64_t micro);
  void backward(int64_t micro);
  void collect_gradients(std::map<std::string, Tensor>& out, const DeviceOutputs& device_out, bool accumulates,
                         float weight, int64_t mini);
  void update_running_stats(const std::map<std::string, Tensor>& out, int64_t rows, int64_t micro);
  void apply_running_stat(RunningStat& r, std::span<const float> computed, int64_t rows);
  double share_of_rows(int64_t mini) const;
  void sum_over_replicas(std::span<float> gradients, double share, int64_t mini);
  std::vector<const float*> reduce_over_replicas();
  void check_gradient(size_t parameter, const StageValue& gradient) const;
  void observe(bool backward, int64_t micro, int64_t read);
  void note_activations();
  // Before a pass that reads weight version `read` (-1: a prediction): gpipe and 1f1b on the CPU carry
  // what kernels derive from the weights between the stage's passes of one version.
  void carry_weight_derived(int64_t read);

  StageGraphs graphs_;
  StageConfig config_;
  std::unique_ptr<InferenceSession> forward_session_, backward_session_;
  std::unique_ptr<WeightPolicy> weights_;
  // The values kernels derive from the weights (kernels/onednn/single_pixel_conv.h's gathered taps,
  // tap_product_conv.h's transposed weight), shared by both sessions while the passes of a flushing round
  // read one version, which the weights keep until the flush: a micro-batch's passes stop paying for
  // the weight-sized gathers and transposes (InferenceSession::carry_weight_derived_values). Cleared when
  // the version read changes, and on a restore.
  std::shared_ptr<Stream::DerivedMap> weight_derived_ = std::make_shared<Stream::DerivedMap>();
  int64_t weight_derived_version_ = -1;
  std::vector<std::string> parameter_names_;
  std::vector<Tensor> working_;
  std::vector<std::string> gradient_outputs_;  // per parameter
  std::vector<RunningStat> running_stats_;
  std::vector<DeferredNode> deferred_nodes_;  // with config_.deferred_batch_norm
  struct DataReads {
    std::vector<std::string> inputs;  // of StageConfig::inputs
    bool labels = false;
  };
  DataReads forward_reads_, backward_reads_;  // what each graph reads of the mini-batch

  PipelineRound round_;
  std::set<std::pair<Op, int64_t>> launch_first_;  // the round's Recvs that launch the queued transfers first
  int64_t marked_call_ = -1;                       // the train() call launch_first_ was computed for
  int64_t base_version_ = 0;                       // the stage's version at the round's start (1F1B)
  std::map<int64_t, MicroBatch> in_flight_;
  // 1F1B: the last backward's parameter gradients (host or device, as the policy's memory), and with
  // replica_group their sum (host, and its device copy).
  std::vector<StageValue> last_gradients_;
  std::vector<float> reduced_;
  cuda::DeviceBuffer reduced_on_device_;
  double last_weight_ = 1;  // their share of the mini-batch (replica_group)
  int64_t last_mini_ = 0;   // and its index
  double loss_sum_ = 0;     // gpipe: the mini-batch's loss so far
};

// gpipe: the rows of micro-batch j of `rows` split into m (the first rows % m micro-batches one row more).
std::pair<int64_t, int64_t> micro_batch_rows(int64_t rows, int64_t m, int64_t j);

}  // namespace onnxtrain
