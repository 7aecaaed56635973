#include "executor/central_storage.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>

#include "executor/pipeline/stage_worker.h"  // slice_rows, micro_batch_rows
#include "executor/replica_memory.h"
#include "graph/error.h"
#include "graph/host_resources.h"

namespace onnxtrain {
namespace {

std::string megabytes(double bytes) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.2f MB", bytes / 1e6);
  return buffer;
}

}  // namespace

CentralStorageTrainer::CentralStorageTrainer(const Graph& forward, CentralStorageOptions options)
    : options_(std::move(options)), optimizer_(options_.trainer.optimizer, options_.trainer.schedule) {
  const int r = options_.replicas;
  if (r < 1) throw Error("central storage: --replicas must be at least 1, got " + std::to_string(r));
  if (options_.trainer.precision == Precision::fp16)
    scaler_ = std::make_unique<LossScaler>(options_.trainer.loss_scaler);
  check_replicas_fit_in_memory(forward, r, r - 1, options_.trainer, "--replicas " + std::to_string(r));
  with_out_of_resources_as_error("building " + std::to_string(r) + " central-storage replicas",
                                 [&] { build_replicas(forward); });
}

void CentralStorageTrainer::build_replicas(const Graph& forward) {
  const int r = options_.replicas;
  models_.reserve(static_cast<size_t>(r));  // the trainers keep references into their graphs
  for (int k = 0; k < r; ++k) {
    models_.push_back(copy_with_own_initializers(forward));
    TrainerOptions t = options_.trainer;
    if (t.device.kind == DeviceKind::Cuda) t.device.index += k;  // replica threads on cuda:0..R-1
    replicas_.push_back(std::make_unique<Trainer>(models_.back(), t));
  }
  for (const auto& [name, t] : replicas_[0]->trained_initializers()) {
    master_[name] = t.clone();
    if (models_[0].value(*models_[0].find_value(name)).role == ValueRole::State) state_names_.push_back(name);
  }
  const int total = options_.threads > 0 ? options_.threads : omp_get_max_threads();
  for (int k = 0; k < r; ++k) threads_.push_back(std::max(1, total / r + (k < total % r ? 1 : 0)));
  compute_seconds_.assign(static_cast<size_t>(r), 0.0);
  if (r > 1) replica_threads_ = std::make_unique<WorkerThreads>(r - 1);
}

CentralStorageTrainer::~CentralStorageTrainer() = default;

void CentralStorageTrainer::refresh(int k) {
  // restore() copies every trained initializer and sets the Dropout run index (the optimizer's global
  // step; the replicas' own optimizers never step and hold no state). fp16: the storage's loss scale.
  std::map<std::string, Tensor> state = scaler_ ? scaler_->state_tensors() : std::map<std::string, Tensor>{};
  state["global_step"] = Tensor::scalar_int64(optimizer_.global_step());
  replicas_[k]->restore(master_, state);
}

float CentralStorageTrainer::train_step(const DataInputs& x, const Tensor& y) {
  const int r = replicas();
  const int64_t rows = x.rows();
  if (rows < r) {
    throw Error("central storage: a batch of " + std::to_string(rows) + " rows cannot feed " + std::to_string(r) +
                " replicas");
  }
  const bool mean = options_.trainer.loss.reduction == LossReduction::Mean;
  std::vector<float> losses(static_cast<size_t>(r));
  std::vector<std::map<std::string, Tensor>> grads(static_cast<size_t>(r));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(r));
  // The master is only read while the replicas run; it is written after they are joined.
  const auto step_start = std::chrono::steady_clock::now();
  auto replica_step = [&](int k) {
    const auto computed_from = std::chrono::steady_clock::now();
    try {
      omp_set_num_threads(threads_[k]);
      refresh(k);
      const auto [begin, end] = micro_batch_rows(rows, r, k);
      const double weight = mean ? static_cast<double>(end - begin) / static_cast<double>(rows) : 1.0;
      replicas_[k]->set_first_row(begin);  // its rows' Dropout masks of the whole batch, as dp
      grads[k] = replicas_[k]->forward_backward(x.slice_rows(begin, end), slice_rows(y, begin, end), &losses[k]);
      losses[k] = static_cast<float>(losses[k] * weight);
      // Weighted in place exactly as DataParallelTrainer weighs its gradients (float · double → float).
      for (auto& [name, g] : grads[k])
        for (float& v : g.data<float>()) v = static_cast<float>(v * weight);
    } catch (const std::exception&) {
      errors[k] = std::current_exception();
    }
    compute_seconds_[static_cast<size_t>(k)] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - computed_from).count();
  };
  const std::function<void(int)> others = [&](int j) { replica_step(j + 1); };
  if (r > 1) replica_threads_->start(others);
  const int saved = omp_get_max_threads();
  replica_step(0);
  omp_set_num_threads(saved);
  if (r > 1) replica_threads_->wait();
  for (const std::exception_ptr& e : errors)
    if (e) rethrow_with_out_of_resources_as_error(e, "in a central-storage step");

  // Reduce into the storage in replica order, per element ((g0 + g1) + g2) + ...: the all-reduce's order.
  std::map<std::string, Tensor>& sum = grads[0];
  for (int k = 1; k < r; ++k) {
    for (auto& [name, g] : sum) {
      auto acc = g.data<float>();
      auto add = grads[k].at(name).data<float>();
      for (size_t e = 0; e < acc.size(); ++e) acc[e] += add[e];
    }
  }
  std::vector<ParamSlot> params;
  params.reserve(sum.size());
  for (const auto& [name, g] : sum) {
    auto it = master_.find(name);
    if (it == master_.end() || it->second.numel() != g.numel()) {
      throw Error("central storage: no parameter of " + std::to_string(g.numel()) + " elements for the gradient '" +
                  name + "'");
    }
    params.push_back({name, it->second.data<float>(), g.data<float>()});
  }
  // The sum of the replicas' shares is the batch's gradient: clipped as one device's would be.
  std::vector<std::vector<float>> clipped;
  if (options_.trainer.clip_grad_norm > 0) clip_gradient_norm(params, options_.trainer.clip_grad_norm, clipped);
  // fp16: the unscaled sum decides, as Trainer::apply_gradients decides on its gradients.
  if (!scaler_ || scaler_->update(sum)) optimizer_.step(params);
  // BatchNorm running statistics: replica 0's (DataParallelTrainer's broadcast_buffers).
  const std::map<std::string, Tensor> first = replicas_[0]->trained_initializers();
  for (const std::string& name : state_names_)
    std::memcpy(master_.at(name).raw(), first.at(name).raw(), first.at(name).nbytes());

  float loss = 0;
  for (float l : losses) loss += l;
  step_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
  return loss;
}

std::vector<float> CentralStorageTrainer::train(int64_t count, const BatchSource& next, const LossCallback& on_loss) {
  std::vector<float> losses;
  for (int64_t i = 0; i < count; ++i) {
    auto [x, y] = next();
    losses.push_back(train_step(x, y));
    if (on_loss) on_loss(mini_batches_used() - 1, losses.back());
  }
  return losses;
}

Trainer::Evaluation CentralStorageTrainer::evaluate(const DataInputs& inputs, const Tensor& labels, int64_t batch) {
  refresh(0);
  return replicas_[0]->evaluate(inputs, labels, batch);
}

CentralStorageReport CentralStorageTrainer::report() const {
  CentralStorageReport r;
  r.replicas = replicas();
  r.step_seconds = step_seconds_;
  r.replica_compute_seconds = compute_seconds_;
  r.steps = optimizer_.global_step();
  for (const auto& [name, t] : master_) {
    const bool state = std::find(state_names_.begin(), state_names_.end(), name) != state_names_.end();
    (state ? r.state_bytes : r.parameter_bytes) += static_cast<int64_t>(t.nbytes());
  }
  for (const auto& [param, s] : optimizer_.states())
    for (const auto& [name, t] : s.tensors) r.optimizer_state_bytes += static_cast<int64_t>(t.nbytes());
  return r;
}

std::string format_central_storage_report(const CentralStorageReport& r) {
  std::string s = "central storage: " + std::to_string(r.replicas) + " replicas, " + std::to_string(r.steps) +
                  " steps; storage holds " + megabytes(static_cast<double>(r.parameter_bytes)) + " of parameters, " +
                  megabytes(static_cast<double>(r.state_bytes)) + " of running statistics, " +
                  megabytes(static_cast<double>(r.optimizer_state_bytes)) + " of optimizer state (once)\n";
  s += "  per step: gradients in " + megabytes(static_cast<double>(r.gradient_bytes_in_per_step())) + ", weights out " +
       megabytes(static_cast<double>(r.weight_bytes_out_per_step())) + "; total moved " +
       megabytes(static_cast<double>(r.bytes_per_step()) * static_cast<double>(r.steps)) + "\n";
  return s;
}

}  // namespace onnxtrain
