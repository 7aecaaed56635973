#include "executor/data_parallel.h"

#if ONNXTRAIN_WITH_CUDA
#include "kernels/cuda/optimizer_update.h"
#endif

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <mutex>
#include <set>
#include <thread>

#include "executor/comm/local_comm.h"
#include "executor/pipeline/stage_worker.h"  // slice_rows, micro_batch_rows
#include "executor/replica_memory.h"
#include "graph/error.h"
#include "graph/host_resources.h"

namespace onnxtrain {
namespace {

// One replica's bucketed all-reduce for one step. The backward pass (calling add) fills the buckets; a
// communication thread all-reduces bucket 0, 1, ... in that order, each once it is complete, so every
// replica issues the same collectives in the same order. finish() completes the last bucket (with the
// loss riding along, when asked), waits for the thread and rethrows its error.
class BucketedAllReduce {
 public:
  BucketedAllReduce(const std::vector<std::vector<std::string>>& buckets, const std::map<std::string, int64_t>& sizes,
                    Communicator& comm, double weight, bool with_loss, std::string what)
      : comm_(comm), weight_(weight), what_(std::move(what)) {
    for (size_t b = 0; b < buckets.size(); ++b) {
      int64_t at = 0;
      for (const std::string& name : buckets[b]) {
        where_[name] = {b, at};
        at += sizes.at(name);
      }
      if (with_loss && b + 1 == buckets.size()) ++at;  // the loss: the last element of the last bucket
      data_.emplace_back(static_cast<size_t>(at));
      missing_.push_back(static_cast<int>(buckets[b].size()) + (with_loss && b + 1 == buckets.size() ? 1 : 0));
    }
    thread_ = std::thread([this] { reduce_in_order(); });
  }
  ~BucketedAllReduce() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      cancelled_ = true;
    }
    ready_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  void add(const std::string& name, const Tensor& gradient) {
    if (!added_.insert(name).second) return;
    const auto [b, at] = where_.at(name);
    float* out = data_[b].data() + at;
    for (float v : gradient.data<float>()) *out++ = static_cast<float>(v * weight_);
    complete_one(b);
  }
  // Returns the reduced buckets; `loss` (weighted by the caller) is summed across processes when asked.
  // `gradients`: all of the step's, for any that no node computed during the pass (passed-through values).
  std::vector<std::vector<float>>& finish(const std::map<std::string, Tensor>& gradients, float* loss) {
    for (const auto& [name, g] : gradients) add(name, g);
    if (loss) {
      data_.back().back() = *loss;
      complete_one(data_.size() - 1);
    }
    thread_.join();
    if (error_) std::rethrow_exception(error_);
    if (loss) *loss = data_.back().back();
    return data_;
  }

 private:
  void complete_one(size_t b) {
    bool now_complete;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      now_complete = --missing_[b] == 0;
    }
    if (now_complete) ready_.notify_all();
  }
  void reduce_in_order() {
    try {
      for (size_t b = 0; b < data_.size(); ++b) {
        {
          std::unique_lock<std::mutex> lock(mutex_);
          ready_.wait(lock, [&] { return cancelled_ || missing_[b] == 0; });
          if (missing_[b] != 0) return;  // cancelled: the backward pass failed
        }
        comm_.all_reduce_sum(data_[b],
                             what_ + " (bucket " + std::to_string(b + 1) + " of " + std::to_string(data_.size()) + ")");
      }
    } catch (...) {
      error_ = std::current_exception();
    }
  }

  Communicator& comm_;
  const double weight_;
  const std::string what_;
  std::map<std::string, std::pair<size_t, int64_t>> where_;  // parameter -> (bucket, offset)
  std::set<std::string> added_;
  std::vector<std::vector<float>> data_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<int> missing_;  // gradients (and the loss) still to come, per bucket
  bool cancelled_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace

DataParallelTrainer::DataParallelTrainer(const Graph& forward, DataParallelOptions options)
    : options_(std::move(options)) {
  const int r = options_.replicas;
  if (r < 1) throw Error("data parallel: --replicas must be at least 1, got " + std::to_string(r));
  // fp16: every replica unscales its gradients (the host path as they come out of the backward pass, the
  // NCCL path after the all-reduce) and applies the combined ones through its own loss scaler, which skips
  // and backs off alike on every replica because all see the same sum. Buckets stream gradients during the
  // backward pass, still scaled.
  if (options_.trainer.precision == Precision::fp16 && options_.bucket_bytes > 0 &&
      options_.trainer.device.kind != DeviceKind::Cuda)
    throw Error("data parallel: --precision fp16 sends whole gradients after the backward pass; drop --bucket-mb");
  if (options_.world && r != 1) {
    throw Error("data parallel across processes: one replica per process (got " + std::to_string(r) +
                " replicas in each of " + std::to_string(options_.world->size()) + " processes)");
  }
  // R copies of the gradients (and of the weights and optimizer state unless the replicas share them), and
  // R - 1 threads: refused with one line before anything is allocated when they cannot fit (1000 replicas
  // under `ulimit -v 4000000` aborted).
  if (!options_.world)
    check_replicas_fit_in_memory(forward, r, r - 1, options_.trainer, "--replicas " + std::to_string(r),
                                 steps_sharded());
  // What the estimate cannot see (activations, kernels' buffers) may still run out: "out of memory ...".
  with_out_of_resources_as_error("building " + std::to_string(r) + " data-parallel replicas",
                                 [&] { build_replicas(forward); });
}

void DataParallelTrainer::build_replicas(const Graph& forward) {
  const int r = options_.replicas;
  models_.reserve(static_cast<size_t>(r));  // the trainers keep references into their graphs
  // With the sharded step every replica reads one copy of the weights, which only the step writes, between
  // the exchange's barriers while no replica computes: replicas 1.. share replica 0's initializers but
  // their BatchNorm statistics, which each updates in its forward pass.
  const bool shared_weights = steps_sharded();
  for (int k = 0; k < r; ++k) {
    if (k > 0 && shared_weights) {
      Graph shared = models_[0];  // Tensor copies share their buffers
      for (ValueId id : shared.initializers)
        if (Value& v = shared.value(id); v.role == ValueRole::State && v.data) v.data = v.data->clone();
      models_.push_back(std::move(shared));
    } else {
      models_.push_back(copy_with_own_initializers(forward));
    }
    TrainerOptions t = options_.trainer;
    // Dropout: every replica has the model's seeds and draws its rows' masks of the whole batch (set_first_row).
    if (t.device.kind == DeviceKind::Cuda) t.device.index += k;  // replica threads on cuda:0..R-1
    replicas_.push_back(std::make_unique<Trainer>(models_.back(), t));
    // The parameters the replica's recipe made from the shared weights (tap-major, live taps) too: one
    // copy for every replica to read and the sharded step to write, not a copy per replica that the step
    // then copies its updates into (ResNet-18 at 32x32: 14 of its 17 MB of trained parameters).
    if (k > 0 && shared_weights) replicas_.back()->share_parameters_of(*replicas_[0]);
  }
  const std::map<std::string, Tensor> params = replicas_[0]->trained_initializers();
  for (const auto& [name, t] : params) parameter_numels_[name] = t.numel();
  if (options_.bucket_bytes > 0) {
    int64_t filled = 0;
    for (const std::string& name : replicas_[0]->gradient_order()) {
      if (buckets_.empty() || filled >= options_.bucket_bytes) {
        buckets_.emplace_back();
        filled = 0;
      }
      buckets_.back().push_back(name);
      filled += static_cast<int64_t>(params.at(name).nbytes());
    }
    timing_.buckets = static_cast<int>(buckets_.size());
  }
  if (options_.world) {
    // Every process read the same file, but rank 0's weights are the run's (as DDP does at start).
    for (auto& [name, t] : replicas_[0]->trained_initializers()) {
      Tensor shared = t;  // the trainer's own buffer
      options_.world->broadcast({shared.raw(), shared.nbytes()}, 0, "initial weights broadcast ('" + name + "')");
    }
  } else {
    comms_ = make_local_group(r, options_.timeout);
    gradient_sum_ = std::make_unique<ReplicaGradientSum>(r);
    replica_threads_ = std::make_unique<WorkerThreads>(r - 1);
    if (steps_sharded()) sharded_step_ = std::make_unique<ShardedOptimizerStep>();
  }
  if (options_.trainer.device.kind == DeviceKind::Cuda) {
    timing_.on_devices = true;
    timing_.buckets = 1;
    if (options_.world) {
      nccl_.push_back(std::make_unique<NcclCommunicator>(*options_.world, options_.trainer.device.index));
    } else {
      std::vector<int> devices;
      for (int k = 0; k < r; ++k) devices.push_back(options_.trainer.device.index + k);
      nccl_ = NcclCommunicator::create_local(devices);
    }
  }
  const int total = options_.threads > 0 ? options_.threads : omp_get_max_threads();
  for (int k = 0; k < r; ++k) threads_.push_back(std::max(1, total / r + (k < total % r ? 1 : 0)));
  timing_.compute_seconds.assign(static_cast<size_t>(r), 0.0);  // sized before any replica thread writes its slot
  timing_.exchange_seconds.assign(static_cast<size_t>(r), 0.0);
}

DataParallelTrainer::~DataParallelTrainer() = default;

bool DataParallelTrainer::steps_sharded() const {
  return !options_.world && options_.bucket_bytes <= 0 && Trainer::applies_optimizer_step_alone(options_.trainer);
}

float DataParallelTrainer::replica_step(int local, Communicator& comm, const DataInputs& x, const Tensor& y) {
  const int k = first_replica() + local, r = global_replicas();
  const int64_t rows = x.rows();
  const bool mean = options_.trainer.loss.reduction == LossReduction::Mean;
  const auto [begin, end] = micro_batch_rows(rows, r, k);
  const double weight = mean ? static_cast<double>(end - begin) / static_cast<double>(rows) : 1.0;
  replicas_[local]->set_first_row(begin);  // the slice's Dropout masks are the whole batch's
  if (!nccl_.empty()) return device_replica_step(local, x.slice_rows(begin, end), slice_rows(y, begin, end), weight);
  float loss = 0;
  std::map<std::string, Tensor> reduced =
      reduce_gradients(local, comm, x.slice_rows(begin, end), slice_rows(y, begin, end), weight, loss);
  if (!sharded_step_) replicas_[local]->apply_gradients(reduced);  // the sharded step has updated the weights
  replicas_[local]->recycle(reduced);
  return loss;
}

// Replica threads of one process with the sharded step (steps_sharded): the replica's gradients stay in
// its trainer's buffers, dense or as a convolution's taps (Trainer::forward_backward_kept); every replica
// publishes them with its weights, then each sums its share of every tensor's elements over all replicas
// and updates that share of the shared weights (ReplicaGradientSum::step_share), between two barriers.
// Returns when the exchange began.
std::chrono::steady_clock::time_point DataParallelTrainer::sum_and_step_in_place(int local, Communicator& comm,
                                                                                 const DataInputs& x, const Tensor& y,
                                                                                 double weight, float& loss,
                                                                                 const std::string& what) {
  Trainer& replica = *replicas_[local];
  Trainer::KeptForStep kept = replica.kept_for_step(replica.forward_backward_kept(x, y, &loss));
  loss = static_cast<float>(loss * weight);
  int64_t bytes = 0;
  for (const std::span<float>& g : kept.gradients) bytes += static_cast<int64_t>(g.size_bytes());
  const auto waited_from = std::chrono::steady_clock::now();
  // Replica 0 readies the sharded step (its rules and state) before anyone can read it: the barrier.
  if (local == 0) sharded_step_->prepare(replica.optimizer_for_outside_update(), kept.params);
  gradient_sum_->publish(local, std::move(kept.gradients), weight, std::move(kept.weights), std::move(kept.taps));
  comm.barrier(what + " (gradients ready)");
  gradient_sum_->step_share(local, *sharded_step_);
  comm.barrier(what + " (sums ready)");
  // Every replica's step count (lr schedule, checkpoints); replica 0's state too.
  if (local == 0)
    sharded_step_->finish(replica.optimizer_for_outside_update());
  else
    replica.optimizer_for_outside_update().count_step();
  if (local == 0) timing_.allreduce_bytes_per_step = bytes;
  return waited_from;
}

float DataParallelTrainer::device_replica_step(int local, const DataInputs& x, const Tensor& y, double weight) {
#if !ONNXTRAIN_WITH_CUDA
  (void)local, (void)x, (void)y, (void)weight;
  throw Error("data parallelism on GPUs needs CUDA support: this onnxtrain was built without it");
#else
  Trainer& replica = *replicas_[local];
  NcclCommunicator& nccl = *nccl_[local];
  float loss = 0;
  int64_t bytes = 0;
  std::map<std::string, DeviceTensor> grads;
  try {
    grads = replica.forward_backward_on_device(x, y, &loss);
    const cuda::DeviceStream& stream = replica.device_stream();
    if (weight != 1.0)
      for (auto& [name, g] : grads) cuda::scale_gradient(g.floats(), weight, g.numel(), stream.kernel_stream(0));
    {
      NcclGroup group;  // one launch for every parameter, in the same (name) order on every replica
      for (auto& [name, g] : grads) {
        nccl.all_reduce_sum(g.floats(), static_cast<size_t>(g.numel()), stream.handle());
        bytes += g.numel() * static_cast<int64_t>(sizeof(float));
      }
    }
    loss = static_cast<float>(loss * weight);
    // The loss before the step: an fp16 step waits on the device for the all-reduce (its inf/NaN check),
    // and a process that failed before its share is noticed here, by the host communicator's timeout or
    // abort, rather than in that wait.
    if (options_.world) {
      std::vector<float> total{loss};
      options_.world->all_reduce_sum(total, "step " + std::to_string(replica.step() + 1) + ", loss all-reduce");
      loss = total[0];
    }
  } catch (const std::exception&) {
    for (auto& c : nccl_) c->abort();  // the other replicas' collectives would wait forever: tear them down
    throw;
  }
  replica.apply_device_gradients(grads);  // enqueued after the all-reduce on the same stream
  if (local == 0) timing_.allreduce_bytes_per_step = bytes;
  return loss;
#endif
}

std::map<std::string, Tensor> DataParallelTrainer::reduce_gradients(int local, Communicator& comm, const DataInputs& x,
                                                                    const Tensor& y, double weight, float& loss) {
  Trainer& replica = *replicas_[local];
  const std::string what = "step " + std::to_string(replica.step() + 1) + ", replica " +
                           std::to_string(first_replica() + local) + ", gradient all-reduce";
  std::map<std::string, Tensor> reduced;
  const auto computed_from = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point waited_from;
  if (!buckets_.empty()) {
    BucketedAllReduce buckets(buckets_, parameter_numels_, comm, weight, options_.world != nullptr, what);
    std::map<std::string, Tensor> grads =
        replica.forward_backward(x, y, &loss, [&](const std::string& name, const Tensor& g) { buckets.add(name, g); });
    loss = static_cast<float>(loss * weight);
    waited_from = std::chrono::steady_clock::now();
    std::vector<std::vector<float>>& data = buckets.finish(grads, options_.world ? &loss : nullptr);
    for (size_t b = 0; b < buckets_.size(); ++b) {
      int64_t at = 0;
      for (const std::string& name : buckets_[b]) {
        Tensor t(DType::Float32, grads.at(name).sizes());
        std::copy_n(data[b].begin() + at, t.numel(), t.data<float>().begin());
        at += t.numel();
        reduced[name] = std::move(t);
      }
    }
  } else if (sharded_step_) {
    waited_from = sum_and_step_in_place(local, comm, x, y, weight, loss, what);
  } else {
    std::map<std::string, Tensor> grads = replica.forward_backward(x, y, &loss);
    loss = static_cast<float>(loss * weight);
    if (!options_.world) {
      // Replica threads of one process: every replica publishes its gradients, then sums its share of
      // every tensor's elements over all replicas into all their copies (ReplicaGradientSum: the
      // all-reduce of weighed gradients, bit for bit, in parallel), between two barriers. No flat buffer:
      // its two copies of every gradient cost more than the sum (ResNet-18, 45 MB of gradients on a 2-core
      // machine: 16-34 ms to flatten and 14-33 ms to copy back per replica and step).
      std::vector<std::span<float>> tensors;
      int64_t bytes = 0;
      for (auto& [name, g] : grads) {
        tensors.push_back(g.data<float>());
        bytes += static_cast<int64_t>(g.nbytes());
        reduced[name] = g;
      }
      waited_from = std::chrono::steady_clock::now();
      gradient_sum_->publish(local, std::move(tensors), weight);
      comm.barrier(what + " (gradients ready)");
      gradient_sum_->sum_share(local);
      comm.barrier(what + " (sums ready)");
      if (local == 0) timing_.allreduce_bytes_per_step = bytes;
    } else {
      // Across processes: one flat buffer per replica, one all-reduce per step, summed in rank order, with
      // the loss riding along as the last element, so the reported loss needs no second collective.
      int64_t total = 1;
      for (const auto& [name, g] : grads) total += g.numel();
      std::vector<float> flat;
      flat.reserve(static_cast<size_t>(total));
      for (const auto& [name, g] : grads)
        for (float v : g.data<float>()) flat.push_back(static_cast<float>(v * weight));
      flat.push_back(loss);
      waited_from = std::chrono::steady_clock::now();
      comm.all_reduce_sum(flat, what);
      size_t at = 0;
      for (const auto& [name, g] : grads) {
        Tensor t(DType::Float32, g.sizes());
        std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(at), g.numel(), t.data<float>().begin());
        at += static_cast<size_t>(g.numel());
        reduced[name] = std::move(t);
      }
      loss = flat.back();
      if (local == 0) timing_.allreduce_bytes_per_step = static_cast<int64_t>(flat.size() * sizeof(float));
    }
  }
  const auto done = std::chrono::steady_clock::now();
  // Each replica thread writes only its own slot.
  timing_.compute_seconds[static_cast<size_t>(local)] +=
      std::chrono::duration<double>(waited_from - computed_from).count();
  timing_.exchange_seconds[static_cast<size_t>(local)] += std::chrono::duration<double>(done - waited_from).count();
  if (local == 0) {  // one writer: the other replica threads only touch their own state
    timing_.allreduce_seconds += std::chrono::duration<double>(done - waited_from).count();
    if (!buckets_.empty()) {
      int64_t bytes = options_.world ? 4 : 0;
      for (const auto& [name, t] : reduced) bytes += static_cast<int64_t>(t.nbytes());
      timing_.allreduce_bytes_per_step = bytes;
    }
  }
  return reduced;
}

// BatchNorm running statistics: replica 0's everywhere (DDP's broadcast_buffers).
// running_statistics() are the host Tensors themselves (current on every device): nothing is downloaded.
void DataParallelTrainer::copy_running_stats_from_first() {
  if (options_.world) {
    for (auto& [name, t] : replicas_[0]->running_statistics()) {
      Tensor shared = t;
      options_.world->broadcast({shared.raw(), shared.nbytes()}, 0, "BatchNorm statistics broadcast ('" + name + "')");
    }
    replicas_[0]->running_statistics_changed();
    return;
  }
  const std::map<std::string, Tensor> first = replicas_[0]->running_statistics();
  for (int k = 1; k < replicas(); ++k) {
    for (const auto& [name, t] : replicas_[k]->running_statistics()) {
      Tensor dst = t;  // shares the replica's buffer
      std::memcpy(dst.raw(), first.at(name).raw(), t.nbytes());
    }
    replicas_[k]->running_statistics_changed();
  }
}

float DataParallelTrainer::train_step(const DataInputs& x, const Tensor& y) {
  const int r = global_replicas();
  const int64_t rows = x.rows();
  if (rows < r) {
    throw Error("data parallel: a batch of " + std::to_string(rows) + " rows cannot feed " + std::to_string(r) +
                " replicas");
  }
  const auto step_start = std::chrono::steady_clock::now();
  float loss = 0;
  if (options_.world) {
    try {
      loss = replica_step(0, *options_.world, x, y);
    } catch (const std::exception& e) {
      options_.world->abort(e.what());
      rethrow_with_out_of_resources_as_error(std::current_exception(),
                                             "in data-parallel step " + std::to_string(timing_.steps + 1));
    }
  } else {
    std::vector<float> losses(static_cast<size_t>(r));
    std::vector<std::exception_ptr> errors(static_cast<size_t>(r));
    auto run = [&](int k) {
      try {
        omp_set_num_threads(threads_[k]);
        losses[k] = replica_step(k, *comms_[k], x, y);
      } catch (const std::exception& e) {
        errors[k] = std::current_exception();
        comms_[k]->abort(e.what());
        for (auto& c : nccl_) c->abort();  // a replica waiting on its stream for this one's all-reduce
      }
    };
    // Replica 0 on this thread, the others on their own long-lived threads (their OpenMP pools and, on
    // GPUs, their cuBLAS and cuDNN handles persist from step to step).
    const std::function<void(int)> others = [&](int j) { run(j + 1); };
    if (r > 1) replica_threads_->start(others);
    const int saved = omp_get_max_threads();
    run(0);
    omp_set_num_threads(saved);
    if (r > 1) replica_threads_->wait();
    // The replica that failed first is the cause (the others were woken by its abort), e.g. one that ran
    // out of memory: "out of memory in data-parallel step 1 ...", not replica 0's "rank 27 aborted".
    const std::string context = "in data-parallel step " + std::to_string(timing_.steps + 1);
    if (const std::optional<CommAbort> aborted = comms_[0]->aborted();
        aborted && aborted->rank >= 0 && aborted->rank < r && errors[static_cast<size_t>(aborted->rank)])
      rethrow_with_out_of_resources_as_error(errors[static_cast<size_t>(aborted->rank)], context);
    for (const std::exception_ptr& e : errors)
      if (e) rethrow_with_out_of_resources_as_error(e, context);
    for (float l : losses) loss += l;
  }
  copy_running_stats_from_first();
  timing_.step_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
  ++timing_.steps;
  return loss;
}

void DataParallelTrainer::restore(const std::map<std::string, Tensor>& initializers,
                                  const std::map<std::string, Tensor>& optimizer_state, const std::string& path) {
  for (auto& replica : replicas_) {
    try {
      replica->restore(initializers, optimizer_state);
    } catch (Error& e) {
      e.in_file(path);
      throw;
    }
  }
}

std::vector<float> DataParallelTrainer::train(int64_t count, const BatchSource& next, const LossCallback& on_loss) {
  std::vector<float> losses;
  for (int64_t i = 0; i < count; ++i) {
    auto [x, y] = next();
    losses.push_back(train_step(x, y));
    if (on_loss) on_loss(replicas_[0]->mini_batches_used() - 1, losses.back());
  }
  return losses;
}

}  // namespace onnxtrain
