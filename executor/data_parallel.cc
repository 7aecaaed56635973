#include "executor/data_parallel.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <thread>

#include "executor/comm/local_comm.h"
#include "executor/pipeline/stage_worker.h"  // slice_rows, micro_batch_rows
#include "graph/error.h"

namespace onnxtrain {
namespace {

// A copy of the model whose initializers own their buffers (Graph copies share Tensor buffers).
Graph private_copy(const Graph& g) {
  Graph copy = g;
  for (ValueId id : copy.initializers) {
    Value& v = copy.value(id);
    if (v.data) v.data = v.data->clone();
  }
  return copy;
}

}  // namespace

DataParallelTrainer::DataParallelTrainer(const Graph& forward, DataParallelOptions options)
    : options_(std::move(options)) {
  const int r = options_.replicas;
  if (r < 1) throw Error("data parallel: --replicas must be at least 1, got " + std::to_string(r));
  if (options_.world && r != 1) {
    throw Error("data parallel across processes: one replica per process (got " + std::to_string(r) +
                " replicas in each of " + std::to_string(options_.world->size()) + " processes)");
  }
  models_.reserve(static_cast<size_t>(r));  // the trainers keep references into their graphs
  for (int k = 0; k < r; ++k) {
    models_.push_back(private_copy(forward));
    TrainerOptions t = options_.trainer;
    t.seed = options_.trainer.seed + static_cast<uint64_t>(first_replica() + k);  // replica k's own Dropout masks
    replicas_.push_back(std::make_unique<Trainer>(models_.back(), t));
  }
  if (options_.world) {
    // Every process read the same file, but rank 0's weights are the run's (as DDP does at start).
    for (auto& [name, t] : replicas_[0]->trained_initializers()) {
      Tensor shared = t;  // the trainer's own buffer
      options_.world->broadcast({shared.raw(), shared.nbytes()}, 0, "initial weights broadcast ('" + name + "')");
    }
  } else {
    comms_ = make_local_group(r, options_.timeout);
  }
  const int total = options_.threads > 0 ? options_.threads : omp_get_max_threads();
  for (int k = 0; k < r; ++k) threads_.push_back(std::max(1, total / r + (k < total % r ? 1 : 0)));
}

DataParallelTrainer::~DataParallelTrainer() = default;

float DataParallelTrainer::replica_step(int local, Communicator& comm, const Tensor& x, const Tensor& y) {
  const int k = first_replica() + local, r = global_replicas();
  const int64_t rows = x.sizes().at(0);
  const bool mean = options_.trainer.loss.reduction == LossReduction::Mean;
  const auto [begin, end] = micro_batch_rows(rows, r, k);
  const double weight = mean ? static_cast<double>(end - begin) / static_cast<double>(rows) : 1.0;
  float loss = 0;
  std::map<std::string, Tensor> grads =
      replicas_[local]->forward_backward(slice_rows(x, begin, end), slice_rows(y, begin, end), &loss);
  loss = static_cast<float>(loss * weight);
  // One flat buffer per replica: one all-reduce per step, summed in replica order. Across processes the
  // loss rides along as the last element, so the reported loss needs no second collective.
  int64_t total = options_.world ? 1 : 0;
  for (const auto& [name, g] : grads) total += g.numel();
  std::vector<float> flat;
  flat.reserve(static_cast<size_t>(total));
  for (const auto& [name, g] : grads)
    for (float v : g.data<float>()) flat.push_back(static_cast<float>(v * weight));
  if (options_.world) flat.push_back(loss);
  comm.all_reduce_sum(flat, "replica " + std::to_string(k) + ", gradient all-reduce");
  std::map<std::string, Tensor> reduced;
  size_t at = 0;
  for (const auto& [name, g] : grads) {
    Tensor t(DType::Float32, g.sizes());
    std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(at), g.numel(), t.data<float>().begin());
    at += static_cast<size_t>(g.numel());
    reduced[name] = std::move(t);
  }
  replicas_[local]->apply_gradients(reduced);
  return options_.world ? flat.back() : loss;
}

// BatchNorm running statistics: replica 0's everywhere (DDP's broadcast_buffers).
void DataParallelTrainer::copy_running_stats_from_first() {
  if (options_.world) {
    for (auto& [name, t] : replicas_[0]->trained_initializers()) {
      const Value& v = models_[0].value(*models_[0].find_value(name));
      if (v.role != ValueRole::State) continue;
      Tensor shared = t;
      options_.world->broadcast({shared.raw(), shared.nbytes()}, 0, "BatchNorm statistics broadcast ('" + name + "')");
    }
    return;
  }
  const std::map<std::string, Tensor> first = replicas_[0]->trained_initializers();
  for (int k = 1; k < replicas(); ++k) {
    for (const auto& [name, t] : replicas_[k]->trained_initializers()) {
      const Value& v = models_[k].value(*models_[k].find_value(name));
      if (v.role != ValueRole::State) continue;
      Tensor dst = t;  // shares the replica's buffer
      std::memcpy(dst.raw(), first.at(name).raw(), t.nbytes());
    }
  }
}

float DataParallelTrainer::train_step(const Tensor& x, const Tensor& y) {
  const int r = global_replicas();
  const int64_t rows = x.sizes().at(0);
  if (rows < r) {
    throw Error("data parallel: a batch of " + std::to_string(rows) + " rows cannot feed " + std::to_string(r) + " replicas");
  }
  float loss = 0;
  if (options_.world) {
    try {
      loss = replica_step(0, *options_.world, x, y);
    } catch (const std::exception& e) {
      options_.world->abort(e.what());
      throw;
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
      }
    };
    std::vector<std::thread> workers;
    for (int k = 1; k < r; ++k) workers.emplace_back(run, k);
    const int saved = omp_get_max_threads();
    run(0);
    omp_set_num_threads(saved);
    for (std::thread& t : workers) t.join();
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
    for (float l : losses) loss += l;
  }
  copy_running_stats_from_first();
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
    if (on_loss) on_loss(replicas_[0]->step() - 1, losses.back());
  }
  return losses;
}

}  // namespace onnxtrain
