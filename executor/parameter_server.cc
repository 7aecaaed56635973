#include "executor/parameter_server.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <exception>
#include <numeric>
#include <thread>

#include "executor/replica_memory.h"
#include "graph/error.h"
#include "graph/host_resources.h"

namespace onnxtrain {
namespace {

std::string fixed(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", digits, v);
  return buffer;
}

}  // namespace

double ParameterServerReport::mean_staleness() const {
  if (pushes.empty()) return 0;
  double sum = 0;
  for (const Push& p : pushes) sum += static_cast<double>(p.staleness);
  return sum / static_cast<double>(pushes.size());
}

int64_t ParameterServerReport::max_staleness() const {
  int64_t m = 0;
  for (const Push& p : pushes) m = std::max(m, p.staleness);
  return m;
}

std::vector<int64_t> ParameterServerReport::histogram() const {
  std::vector<int64_t> h(static_cast<size_t>(max_staleness() + 1), 0);
  for (const Push& p : pushes) ++h[static_cast<size_t>(p.staleness)];
  if (pushes.empty()) h.clear();
  return h;
}

std::vector<int64_t> ParameterServerReport::per_worker() const {
  std::vector<int64_t> n(static_cast<size_t>(workers), 0);
  for (const Push& p : pushes) ++n[static_cast<size_t>(p.worker)];
  return n;
}

std::vector<double> ParameterServerReport::shard_mean_staleness() const {
  std::vector<double> m(static_cast<size_t>(servers), 0);
  for (const Push& p : pushes)
    for (size_t s = 0; s < p.shard_staleness.size(); ++s) m[s] += static_cast<double>(p.shard_staleness[s]);
  for (double& v : m) v = pushes.empty() ? 0 : v / static_cast<double>(pushes.size());
  return m;
}

std::vector<double> ParameterServerReport::worker_compute_seconds() const {
  std::vector<double> seconds(static_cast<size_t>(workers), 0.0);
  for (const Push& p : pushes) seconds.at(static_cast<size_t>(p.worker)) += p.compute_seconds;
  return seconds;
}

std::vector<double> ParameterServerReport::worker_exchange_seconds() const {
  std::vector<double> seconds(static_cast<size_t>(workers), 0.0);
  for (const Push& p : pushes) seconds.at(static_cast<size_t>(p.worker)) += p.exchange_seconds;
  return seconds;
}

int64_t ParameterServerReport::predicted_pushes() const {
  return std::count_if(pushes.begin(), pushes.end(), [](const Push& p) { return p.predicted_steps > 0; });
}

int64_t ParameterServerReport::skipped_pushes() const {
  return std::count_if(pushes.begin(), pushes.end(), [](const Push& p) { return p.skipped; });
}

std::string format_parameter_server_report(const ParameterServerReport& r) {
  std::string s = "parameter server: " + std::to_string(r.servers) + " shards, " + std::to_string(r.workers) +
                  " workers, " + std::to_string(r.pushes.size()) + " pushes" +
                  (r.predict ? ", weight prediction on" : "") + "\n";
  for (size_t k = 0; k < r.shard_bytes.size(); ++k) {
    s += "  shard " + std::to_string(k) + ": " + std::to_string(r.shard_tensors[k]) + " tensors, " +
         fixed(static_cast<double>(r.shard_bytes[k]) / 1e6, 3) + " MB, " + std::to_string(r.shard_versions[k]) +
         " updates, mean staleness " + fixed(k < r.shard_mean_staleness().size() ? r.shard_mean_staleness()[k] : 0, 3) +
         "\n";
  }
  std::string workers;
  const std::vector<int64_t> per_worker = r.per_worker();
  for (size_t w = 0; w < per_worker.size(); ++w) workers += (w ? ", " : "") + std::to_string(per_worker[w]);
  s += "  pushes per worker: " + workers + "\n";
  s += "  staleness: mean " + fixed(r.mean_staleness(), 3) + ", max " + std::to_string(r.max_staleness()) + "\n";
  s += "  staleness histogram:";
  const std::vector<int64_t> h = r.histogram();
  for (size_t k = 0; k < h.size(); ++k) s += " " + std::to_string(k) + ":" + std::to_string(h[k]);
  s += "\n";
  if (r.predict) {
    double sum = 0;
    for (const auto& p : r.pushes) sum += p.predicted_steps;
    s += "  predicted pulls: " + std::to_string(r.predicted_pushes()) + " of " + std::to_string(r.pushes.size()) +
         ", mean s " + fixed(r.pushes.empty() ? 0 : sum / static_cast<double>(r.pushes.size()), 3) + "\n";
  }
  if (const int64_t skipped = r.skipped_pushes(); skipped > 0)
    s += "  fp16: " + std::to_string(skipped) +
         " pushes skipped for inf/NaN gradients (each worker's own loss scaler)\n";
  s += "  per push: " + fixed(static_cast<double>(r.pull_bytes) / 1e6, 3) + " MB pulled, " +
       fixed(static_cast<double>(r.push_bytes) / 1e6, 3) + " MB pushed\n";
  return s;
}

ParameterServerTrainer::ParameterServerTrainer(const Graph& forward, ParameterServerOptions options)
    : options_(std::move(options)) {
  const int servers = options_.servers, workers = options_.workers;
  if (servers < 1) throw Error("parameter server: --servers must be at least 1, got " + std::to_string(servers));
  if (workers < 1)
    throw Error("parameter server: --replicas (workers) must be at least 1, got " + std::to_string(workers));
  check_replicas_fit_in_memory(forward, workers, workers, options_.trainer, "--replicas " + std::to_string(workers));
  with_out_of_resources_as_error("building " + std::to_string(workers) + " parameter-server workers",
                                 [&] { build(forward); });
}

void ParameterServerTrainer::build(const Graph& forward) {
  const int servers = options_.servers, workers = options_.workers;
  for (int w = 0; w < workers; ++w) {
    auto worker = std::make_unique<Worker>();
    worker->model = copy_with_own_initializers(forward);
    // Every worker has the same Dropout seeds: mini-batch i draws mask i whoever computes it.
    TrainerOptions t = options_.trainer;
    if (t.device.kind == DeviceKind::Cuda) t.device.index += w;  // worker threads on cuda:0..W-1
    worker->trainer = std::make_unique<Trainer>(worker->model, t);
    worker->pulled_version.assign(static_cast<size_t>(servers), 0);
    worker->staleness_sum.assign(static_cast<size_t>(servers), 0);
    workers_.push_back(std::move(worker));
  }
  for (int s = 0; s < servers; ++s) {
    auto shard = std::make_unique<Shard>();
    shard->optimizer = std::make_unique<Optimizer>(options_.trainer.optimizer, options_.trainer.schedule);
    if (options_.predict) shard->prediction.enable_prediction(*shard->optimizer);
    shards_.push_back(std::move(shard));
  }
  report_.servers = servers;
  report_.workers = workers;
  report_.predict = options_.predict;
  report_.shard_bytes.assign(static_cast<size_t>(servers), 0);
  report_.shard_tensors.assign(static_cast<size_t>(servers), 0);
  report_.shard_versions.assign(static_cast<size_t>(servers), 0);

  // Balance bytes: largest first (then by name, so the split is the same every run), to the lightest
  // shard (the lowest index on ties).
  const Worker& w0 = *workers_[0];
  std::vector<std::pair<std::string, Tensor>> items;
  for (const auto& [name, t] : w0.trainer->trained_initializers()) items.emplace_back(name, t);
  std::stable_sort(items.begin(), items.end(),
                   [](const auto& a, const auto& b) { return a.second.nbytes() > b.second.nbytes(); });
  for (const auto& [name, t] : items) {
    const auto lightest = std::min_element(report_.shard_bytes.begin(), report_.shard_bytes.end());
    const int s = static_cast<int>(lightest - report_.shard_bytes.begin());
    Shard& shard = *shards_[static_cast<size_t>(s)];
    const bool state = w0.model.value(*w0.model.find_value(name)).role == ValueRole::State;
    shard.names.push_back(name);
    shard.values[name] = t.clone();
    if (state) shard.state_names.push_back(name);
    shard_of_[name] = s;
    *lightest += static_cast<int64_t>(t.nbytes());
    ++report_.shard_tensors[static_cast<size_t>(s)];
    report_.pull_bytes += static_cast<int64_t>(t.nbytes());
    report_.push_bytes += static_cast<int64_t>(t.nbytes());  // a gradient per parameter, the statistic itself
  }
  for (auto& worker : workers_)
    for (const auto& [name, t] : items) worker->pulled[name] = t.clone();

  const int total = options_.threads > 0 ? options_.threads : omp_get_max_threads();
  for (int w = 0; w < workers; ++w) threads_.push_back(std::max(1, total / workers + (w < total % workers ? 1 : 0)));
}

ParameterServerTrainer::~ParameterServerTrainer() = default;

// Copies every shard's values into w.pulled (each under its shard's lock, noting the version), replacing
// the parameters by SpecTrain's prediction when asked and the worker has measured staleness there.
void ParameterServerTrainer::pull(Worker& w, bool predict, int64_t mini_batch, int worker) {
  for (size_t s = 0; s < shards_.size(); ++s) {
    Shard& shard = *shards_[s];
    const int64_t steps =
        predict && w.pushes > 0 ? std::llround(w.staleness_sum[s] / static_cast<double>(w.pushes)) : 0;
    std::lock_guard<std::mutex> lock(shard.mutex);
    w.pulled_version[s] = shard.version();
    for (const std::string& name : shard.names) {
      const Tensor& value = shard.values.at(name);
      Tensor& out = w.pulled.at(name);
      // A statistic is pulled as it is; a parameter is predicted (Ŵ = W when s = 0 or before its first update).
      if (std::find(shard.state_names.begin(), shard.state_names.end(), name) != shard.state_names.end()) {
        std::memcpy(out.raw(), value.raw(), value.nbytes());
        continue;
      }
      shard.prediction.predict(*shard.optimizer, name, out.data<float>().data(), value.data<float>().data(),
                               static_cast<size_t>(value.numel()), steps);
      if (options_.after_pull)
        options_.after_pull({.worker = worker,
                             .mini_batch = mini_batch,
                             .steps = steps,
                             .name = name,
                             .stored = value,
                             .pulled = out,
                             .state = shard.optimizer->state(name)});
    }
  }
}

// The pulled weights into w's trainer, with Dropout run index `run` (fp16: the worker keeps its own loss
// scale, which restore() must be given).
void ParameterServerTrainer::take_pulled(Worker& w, int64_t run) {
  std::map<std::string, Tensor> state = w.trainer->loss_scaler_state();
  state["global_step"] = Tensor::scalar_int64(run);
  w.trainer->restore(w.pulled, state);
}

std::vector<float> ParameterServerTrainer::train(int64_t count, const BatchSource& next, const LossCallback& on_loss) {
  const int64_t first = next_mini_batch_, end = first + count;
  report_.pushes.resize(static_cast<size_t>(end));
  std::vector<char> done(static_cast<size_t>(count), 0);
  std::condition_variable progress;
  std::exception_ptr error;
  source_ = &next;
  stop_ = false;

  auto work = [&](int index) {
    Worker& w = *workers_[static_cast<size_t>(index)];
    omp_set_num_threads(threads_[static_cast<size_t>(index)]);
    try {
      while (true) {
        int64_t i = 0;
        std::pair<DataInputs, Tensor> batch;
        {
          std::lock_guard<std::mutex> lock(run_mutex_);
          if (stop_ || next_mini_batch_ >= end) return;
          batch = (*source_)();
          i = next_mini_batch_++;
        }
        ParameterServerReport::Push push{.mini_batch = i, .worker = index};
        if (options_.predict && w.pushes > 0) {
          for (size_t s = 0; s < shards_.size(); ++s)
            push.predicted_steps = std::max(push.predicted_steps, w.staleness_sum[s] / static_cast<double>(w.pushes));
        }
        const auto pull_start = std::chrono::steady_clock::now();
        pull(w, options_.predict, i, index);
        // Dropout run index i: the mask sequential training draws for mini-batch i.
        take_pulled(w, i);
        const auto compute_start = std::chrono::steady_clock::now();
        std::map<std::string, Tensor> grads = w.trainer->forward_backward(batch.first, batch.second, &push.loss);
        const auto push_start = std::chrono::steady_clock::now();
        // fp16: every worker has its own scaler (a GradScaler per process); a gradient with an inf or NaN is
        // not pushed, and that worker's scale backs off. The statistics still follow the batch.
        push.skipped = !w.trainer->update_loss_scale(grads);
        // A push is one worker's whole gradient: clipped by its own norm before the shards apply their parts.
        if (options_.trainer.clip_grad_norm > 0) clip_gradient_norm(grads, options_.trainer.clip_grad_norm);
        if (options_.before_push) options_.before_push(index, i);
        const std::map<std::string, Tensor> computed = w.trainer->trained_initializers();  // its new statistics
        push.shard_staleness.assign(shards_.size(), 0);
        for (size_t s = 0; s < shards_.size(); ++s) {
          Shard& shard = *shards_[s];
          std::vector<DeviceParamSlot> slots;  // host memory
          std::lock_guard<std::mutex> lock(shard.mutex);
          push.shard_staleness[s] = shard.version() - w.pulled_version[s];
          for (const std::string& name : shard.names) {
            if (auto g = grads.find(name); g != grads.end())
              slots.push_back({.name = name,
                               .value = shard.values.at(name).data<float>().data(),
                               .grad = g->second.data<float>().data(),
                               .numel = g->second.numel()});
          }
          if (!push.skipped) shard.prediction.step(*shard.optimizer, slots);
          for (const std::string& name : shard.state_names) {
            std::memcpy(shard.values.at(name).raw(), computed.at(name).raw(), computed.at(name).nbytes());
          }
        }
        const auto pushed = std::chrono::steady_clock::now();
        push.compute_seconds = std::chrono::duration<double>(push_start - compute_start).count();
        push.exchange_seconds =
            std::chrono::duration<double>((compute_start - pull_start) + (pushed - push_start)).count();
        for (size_t s = 0; s < shards_.size(); ++s) w.staleness_sum[s] += static_cast<double>(push.shard_staleness[s]);
        ++w.pushes;
        push.staleness = *std::max_element(push.shard_staleness.begin(), push.shard_staleness.end());
        {
          std::lock_guard<std::mutex> lock(run_mutex_);
          report_.pushes[static_cast<size_t>(i)] = std::move(push);
          done[static_cast<size_t>(i - first)] = 1;
        }
        progress.notify_all();
      }
    } catch (const std::exception&) {
      {
        std::lock_guard<std::mutex> lock(run_mutex_);
        if (!error) error = std::current_exception();
        stop_ = true;
      }
      progress.notify_all();
    }
  };

  std::vector<std::thread> threads;
  try {
    threads.reserve(static_cast<size_t>(workers()));
    for (int k = 0; k < workers(); ++k) threads.emplace_back(work, k);
  } catch (const std::exception&) {
    // A worker thread that cannot start: the started ones stop after their mini-batch and are joined (a
    // joinable std::thread destroyed would std::terminate); "out of memory ..." rather than an abort.
    const std::exception_ptr failure = std::current_exception();
    {
      std::lock_guard<std::mutex> lock(run_mutex_);
      stop_ = true;
    }
    for (std::thread& t : threads) t.join();
    source_ = nullptr;
    report_.pushes.resize(static_cast<size_t>(first));
    rethrow_with_out_of_resources_as_error(
        failure, "starting " + std::to_string(workers()) + " parameter-server worker threads");
  }
  std::vector<float> losses;
  std::exception_ptr callback_error;
  for (int64_t i = first; i < end; ++i) {
    float loss = 0;
    {
      std::unique_lock<std::mutex> lock(run_mutex_);
      progress.wait(lock, [&] { return done[static_cast<size_t>(i - first)] || error; });
      if (!done[static_cast<size_t>(i - first)]) break;
      loss = report_.pushes[static_cast<size_t>(i)].loss;
    }
    losses.push_back(loss);
    try {
      if (on_loss) on_loss(i, loss);
    } catch (const std::exception&) {
      callback_error = std::current_exception();
      std::lock_guard<std::mutex> lock(run_mutex_);
      stop_ = true;
      break;
    }
  }
  for (std::thread& t : threads) t.join();
  source_ = nullptr;
  for (size_t s = 0; s < shards_.size(); ++s) report_.shard_versions[s] = shards_[s]->version();
  if (error) {
    report_.pushes.resize(static_cast<size_t>(first));  // the failed call's pushes are not reported
    rethrow_with_out_of_resources_as_error(error, "in a parameter-server worker");
  }
  if (callback_error) {
    report_.pushes.resize(static_cast<size_t>(first));
    std::rethrow_exception(callback_error);
  }
  return losses;
}

float ParameterServerTrainer::train_step(const DataInputs& x, const Tensor& y) {
  return train(1, [&] { return std::pair(x, y); }).at(0);
}

std::map<std::string, Tensor> ParameterServerTrainer::trained_initializers() const {
  std::map<std::string, Tensor> out;
  for (const auto& shard : shards_) {
    std::lock_guard<std::mutex> lock(shard->mutex);
    for (const auto& [name, t] : shard->values) out[name] = t.clone();
  }
  return out;
}

Trainer::Evaluation ParameterServerTrainer::evaluate(const DataInputs& inputs, const Tensor& labels, int64_t batch) {
  Worker& w = *workers_[0];
  pull(w, false, -1, -1);
  take_pulled(w, next_mini_batch_);
  return w.trainer->evaluate(inputs, labels, batch);
}

}  // namespace onnxtrain
