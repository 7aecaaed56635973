#include "executor/pipeline/pipeline_trainer.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <iomanip>
#include <limits>
#include <sstream>
#include <thread>

#include "executor/comm/group_comm.h"
#include "executor/comm/local_comm.h"
#include "executor/pipeline/nccl_link.h"
#include "executor/pipeline/stage_graphs.h"
#include "executor/pipeline/wall_clock.h"
#include "graph/error.h"
#include "graph/host_resources.h"

namespace onnxtrain {
namespace {

// Keeps the calling thread's OpenMP thread count across the emulation, which changes it per stage.
struct OmpThreadsGuard {
  int saved = omp_get_max_threads();
  ~OmpThreadsGuard() { omp_set_num_threads(saved); }
};

}  // namespace

PipelineTrainer::PipelineTrainer(const Graph& forward, PipelineOptions options)
    : options_(std::move(options)), model_(forward) {
  const int n = options_.stages;
  if (n < 1) throw Error("pipeline: --stages must be at least 1, got " + std::to_string(n));
  if (options_.micro_batches < 1)
    throw Error("pipeline: --micro-batches must be at least 1, got " + std::to_string(options_.micro_batches));
  const bool flushes = strategy_traits(options_.strategy).flushes;
  const bool micro_batched = flushes || strategy_traits(options_.strategy).accumulates;
  if (!micro_batched && options_.micro_batches != 1) {
    throw Error(std::string("pipeline: --micro-batches applies to gpipe, 1f1b and 2bw; ") +
                pipeline_strategy_name(options_.strategy) + " sends every mini-batch through whole (got " +
                std::to_string(options_.micro_batches) + ")");
  }
  if (options_.vertical_sync && options_.strategy != PipelineStrategy::pipedream)
    throw Error("pipeline: --vertical-sync is a pipedream option");
  if (options_.deferred_batch_norm && !micro_batched)
    throw Error(std::string("pipeline: --deferred-bn applies to gpipe, 1f1b and 2bw (their micro-batches); ") +
                pipeline_strategy_name(options_.strategy) + " runs every mini-batch whole");
  if (options_.predict && options_.strategy != PipelineStrategy::two_bw)
    throw Error(
        std::string("pipeline: --predict puts SpecTrain's prediction on 2bw (spectrain always predicts); got ") +
        pipeline_strategy_name(options_.strategy));
  if (options_.deferred_batch_norm && options_.replicas > 1)
    throw Error("pipeline: --deferred-bn with --replicas is not built (the copies would have to sum their statistics)");
  // fp16's skip for inf/NaN gradients is one decision for the whole model; stages step on their own.
  if (options_.trainer.precision == Precision::fp16)
    throw Error("pipeline: --precision fp16 is not supported (the stages cannot agree on skipping a step); use bf16");
  const int copies = options_.replicas;
  if (copies < 1) throw Error("pipeline: --replicas must be at least 1, got " + std::to_string(copies));
  if (copies > 1 && !options_.world)
    throw Error("pipeline × data parallelism (--replicas " + std::to_string(copies) + ") runs across processes only");
  if (options_.world && options_.world->size() != n * copies) {
    throw Error("pipeline across processes: " + std::to_string(n) + " stages × " + std::to_string(copies) +
                " replicas need " + std::to_string(n * copies) + " processes, one stage each; this run has " +
                std::to_string(options_.world->size()) + " (mpirun -np " + std::to_string(n * copies) + ")");
  }
  if (copies > 1) {
    const int r = options_.world->rank() / n, k = options_.world->rank() % n;
    std::vector<int> pipeline, stage;
    for (int j = 0; j < n; ++j) pipeline.push_back(r * n + j);
    for (int j = 0; j < copies; ++j) stage.push_back(j * n + k);
    pipeline_group_ = make_subgroup(*options_.world, pipeline, 0);
    stage_group_ = make_subgroup(*options_.world, stage, 1);
  }
  // Our own buffers: the stages write parameters and running statistics in place.
  for (ValueId id : model_.initializers) {
    Value& v = model_.value(id);
    if (v.data && (v.role == ValueRole::Parameter || v.role == ValueRole::State)) v.data = v.data->clone();
  }
  reference_ = std::make_unique<Trainer>(model_, options_.trainer);
  const TrainingGraph& training = reference_->training_graph();
  starts_ = options_.stage_starts;
  if (starts_.empty()) {
    const auto count = static_cast<int64_t>(training.forward_node_count);
    for (int k = 0; k < n; ++k) starts_.push_back(k * count / n);
  }
  if (static_cast<int>(starts_.size()) != n) {
    throw Error("pipeline: " + std::to_string(n) + " stages but " + std::to_string(starts_.size()) +
                " stage starts (a plan for another stage count?)");
  }
  std::vector<StageGraphs> graphs = split_training_graph(training, starts_);

  const int total = options_.threads > 0 ? options_.threads : omp_get_max_threads();
  for (int k = 0; k < n; ++k) threads_.push_back(std::max(1, total / n + (k < total % n ? 1 : 0)));
  if (options_.world) threads_.assign(static_cast<size_t>(n), std::max(1, total));  // a process per stage
  const AttachedLoss& loss = reference_->loss();
  // Threads: stage k on cuda:k (or as stage_devices says); a process per stage: the device its launcher
  // gave it. Stages on GPUs in one process hand their activations and gradients over in device memory.
  const bool on_gpus_in_process = options_.trainer.device.kind == DeviceKind::Cuda && !options_.world;
  if (!options_.stage_devices.empty()) {
    if (!on_gpus_in_process || static_cast<int>(options_.stage_devices.size()) != n ||
        std::any_of(options_.stage_devices.begin(), options_.stage_devices.end(),
                    [](const Device& d) { return d.kind != DeviceKind::Cuda; }))
      throw Error("pipeline: stage_devices places the " + std::to_string(n) +
                  " stages of one process on CUDA devices, one device per stage");
  }
  auto stage_device = [&](int k) {
    return options_.stage_devices.empty() ? Device::cuda(options_.trainer.device.index + k) : options_.stage_devices[k];
  };
  for (int k = 0; k < n; ++k) {
    StageConfig config{.threads = threads_[k],
                       .strategy = options_.strategy,
                       .vertical_sync = options_.vertical_sync,
                       .measure_prediction = options_.measure_prediction,
                       .kernels = options_.trainer.kernels,
                       .device = on_gpus_in_process ? stage_device(k) : options_.trainer.device,
                       .running_variance = options_.trainer.running_variance,
                       .deferred_batch_norm = options_.deferred_batch_norm,
                       .predict_stashed = options_.predict,
                       .reduction = options_.trainer.loss.reduction,
                       .inputs = reference_->input_names(),
                       .labels = loss.labels,
                       .local = !options_.world || k == pipeline_comm()->rank(),
                       .replica_group = stage_group_.get()};
    workers_.push_back(std::make_unique<StageWorker>(std::move(graphs[k]), std::move(config),
                                                     Optimizer(options_.trainer.optimizer, options_.trainer.schedule)));
  }
  // Stages in separate processes on GPUs send their device values with NCCL, bootstrapped over the
  // pipeline's host group (a collective: every stage's process constructs its trainer).
  if (options_.world && n > 1 && options_.trainer.device.kind == DeviceKind::Cuda && !options_.peer_links) {
    try {
      nccl_ = std::make_unique<NcclCommunicator>(*pipeline_comm(), options_.trainer.device.index);
    } catch (const Error& e) {
      throw Error(std::string("pipeline stages in separate processes on GPUs send their activations with NCCL: ") +
                  e.what());
    }
  }
  wall_seconds_.assign(n, 0.0);
  idle_seconds_.assign(n, 0.0);
  trace_.assign(n, {});
}

PipelineTrainer::~PipelineTrainer() = default;

BatchFeed::Batch PipelineTrainer::prepare_batch(std::pair<DataInputs, Tensor> batch) const {
  BatchFeed::Batch b;
  if (batch.first.tensors.empty() || batch.first.first().rank() < 1)
    throw Error("pipeline: a mini-batch's input has no batch dimension");
  b.rows = batch.first.rows();
  if (b.rows < options_.micro_batches) {
    throw Error(std::string(pipeline_strategy_name(options_.strategy)) + ": a mini-batch of " + std::to_string(b.rows) +
                " rows cannot be split into " + std::to_string(options_.micro_batches) + " micro-batches");
  }
  const AttachedLoss& loss = reference_->loss();
  if (!loss.labels.empty()) {
    if (batch.second.rank() < 1 || batch.second.sizes()[0] != b.rows) {
      throw Error("pipeline: a mini-batch has " + std::to_string(b.rows) + " inputs but " +
                  (batch.second.rank() < 1 ? std::string("no label rows")
                                           : std::to_string(batch.second.sizes()[0]) + " labels"));
    }
    b.labels =
        loss_targets(options_.trainer.loss, batch.second, class_count(reference_->training_graph().graph, loss.logits));
  }
  b.x = std::move(batch.first);
  b.total_rows = b.rows;
  if (options_.replicas > 1) {  // this pipeline's rows of the mini-batch
    const auto [begin, end] = micro_batch_rows(b.rows, options_.replicas, options_.world->rank() / options_.stages);
    b.x = b.x.slice_rows(begin, end);
    if (!b.labels.empty()) b.labels = slice_rows(b.labels, begin, end);
    b.rows = end - begin;
    b.first_row = begin;
  }
  return b;
}

std::vector<float> PipelineTrainer::train(const std::vector<std::pair<Tensor, Tensor>>& batches,
                                          const LossCallback& on_loss) {
  size_t next = 0;
  return train(
      static_cast<int64_t>(batches.size()), [&] { return batches.at(next++); }, on_loss);
}

std::vector<float> PipelineTrainer::train(int64_t count, const BatchSource& next, const LossCallback& on_loss) {
  if (count <= 0) return {};
  const int n = options_.stages;
  std::vector<float> losses(static_cast<size_t>(count), std::numeric_limits<float>::quiet_NaN());
  const int64_t first = trained_;
  BatchFeed feed([&] { return prepare_batch(next()); }, first, count, options_.world ? 1 : n,
                 options_.mini_batches_done);

  const bool flushes = strategy_traits(options_.strategy).flushes;
  // 2bw: every mini-batch's M micro-batches in one 1F1B program (M = 1 for naive, pipedream, spectrain).
  const int64_t per_update = strategy_traits(options_.strategy).accumulates ? options_.micro_batches : 1;
  Schedule schedule =
      flushes ? make_schedule(options_.strategy, n, options_.micro_batches)
              : make_schedule(options_.strategy, n, count * per_update, options_.spectrain_target, per_update);
  std::vector<PipelineRound> rounds;
  const PipelineRound round{.schedule = &schedule,
                            .first = first,
                            .feed = &feed,
                            .losses = &losses,
                            .loss_offset = first,
                            .on_loss = &on_loss,
                            .observer = &options_.observer,
                            .call = ++train_calls_};
  if (flushes) {
    for (int64_t r = 0; r < count; ++r) {
      rounds.push_back(round);
      rounds.back().first = first + r;
    }
  } else {
    rounds.push_back(round);
  }
  const int64_t samples_before = workers_[0]->samples;
  const auto start = std::chrono::steady_clock::now();
  if (options_.world) {
    run_world(rounds);
  } else if (options_.threaded) {
    run_threaded(rounds);
  } else {
    run_emulated(rounds);
  }
  wall_seconds_total_ += seconds_since(start);
  for (auto& w : workers_) w->end_run();
  trained_ += count;
  samples_ += workers_[0]->samples - samples_before;
  return losses;
}

void PipelineTrainer::run_threaded(const std::vector<PipelineRound>& rounds) {
  const int n = options_.stages;
  // Each value crossing a link is one message; allow every mini-batch the schedule keeps in flight (N in
  // 1F1B, M in gpipe) to be queued at once.
  size_t values = 1;
  for (const auto& w : workers_) {
    values = std::max({values, w->graphs().send_activations.size(), w->graphs().send_gradients.size()});
  }
  const int capacity =
      static_cast<int>(std::max<int64_t>(64, 2 * static_cast<int64_t>(values) * (n + options_.micro_batches + 2)));
  std::vector<std::unique_ptr<Communicator>> group = make_local_group(n, options_.timeout, capacity);
  DeviceHandoff handoff;  // used by stages on GPUs only (they send device values)
  DeviceHandoff* device_values = workers_[0]->config().device.kind == DeviceKind::Cuda ? &handoff : nullptr;
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  try {
    threads.reserve(static_cast<size_t>(n));
    for (int k = 0; k < n; ++k) {
      threads.emplace_back([&, k] {
        try {
          run_stage(k, *group[k], rounds, device_values);
        } catch (const std::exception&) {
          errors[k] = std::current_exception();
        }
      });
    }
  } catch (const std::exception& e) {
    // A stage thread that cannot start: the started stages are aborted (they would wait for it until the
    // timeout) and joined, and the failure is "out of memory ..." rather than std::terminate.
    const std::exception_ptr failure = std::current_exception();
    group[static_cast<size_t>(threads.size())]->abort(std::string("stage ") + std::to_string(threads.size()) +
                                                      " could not start: " + e.what());
    for (std::thread& t : threads) t.join();
    rethrow_with_out_of_resources_as_error(failure, "starting " + std::to_string(n) + " pipeline stage threads");
  }
  for (std::thread& t : threads) t.join();
  // The stage that failed first is the cause; the others were woken by its abort.
  std::optional<CommAbort> aborted = group[0]->aborted();
  if (aborted && aborted->rank >= 0 && aborted->rank < n && errors[aborted->rank])
    std::rethrow_exception(errors[aborted->rank]);
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

// This process's stage only; its neighbours are the adjacent ranks of its pipeline group.
void PipelineTrainer::run_world(const std::vector<PipelineRound>& rounds) {
  OmpThreadsGuard guard;
  run_stage(pipeline_comm()->rank(), *pipeline_comm(), rounds);
}

std::unique_ptr<StageTransport> PipelineTrainer::make_transport(int k, Communicator& comm,
                                                                DeviceHandoff* device_values) {
  if (options_.peer_links)
    return std::make_unique<GroupedTransport>(comm, options_.peer_links(k, comm), options_.timeout);
  if (nccl_) {
    return std::make_unique<GroupedTransport>(comm, std::make_unique<NcclLink>(*nccl_, workers_[k]->device_stream()),
                                              options_.timeout);
  }
  return std::make_unique<CommTransport>(comm, device_values);
}

TraceSpan PipelineTrainer::trace_span(const Schedule& s, int k, int64_t first, const Instruction& in,
                                      double begin) const {
  const bool flushes = strategy_traits(s.strategy).flushes;
  const int64_t micro = std::max<int64_t>(in.micro_batch, 0), m = s.micro_per_update;  // m: 2bw's M, else 1
  TraceSpan span{.op = in.op,
                 .mini_batch = flushes ? first : first + micro / m,
                 .micro_batch = flushes ? micro : micro % m,
                 .start_s = begin,
                 .end_s = seconds_between(created_, std::chrono::steady_clock::now())};
  if (in.micro_batch >= 0 && (in.op == Op::Forward || in.op == Op::Backward)) {
    const auto& versions = in.op == Op::Forward ? s.forward_version : s.backward_version;
    // Updates before this round: one per earlier mini-batch (1F1B) or flush (gpipe, 1f1b: every pass reads it).
    span.version = flushes ? first : first + versions[k][static_cast<size_t>(in.micro_batch)];
  }
  return span;
}

// Stage k's program of every round over `comm`, timed (wall and blocked seconds). A failure aborts
// `comm` (and NCCL's transfers), waking the other stages with this stage's reason, and is rethrown.
void PipelineTrainer::run_stage(int k, Communicator& comm, const std::vector<PipelineRound>& rounds,
                                DeviceHandoff* device_values) {
  omp_set_num_threads(threads_[k]);
  std::unique_ptr<StageTransport> transport = make_transport(k, comm, device_values);
  StageWorker& worker = *workers_[k];
  const auto start = std::chrono::steady_clock::now();
  try {
    for (const PipelineRound& r : rounds) {
      worker.begin_round(r);
      for (const Instruction& in : r.schedule->programs[k]) {
        const double begin = options_.trace ? seconds_between(created_, std::chrono::steady_clock::now()) : 0;
        worker.execute(in, *transport);
        if (options_.trace) trace_[k].push_back(trace_span(*r.schedule, k, r.first, in, begin));
      }
      transport->flush();
    }
  } catch (const std::exception& e) {
    comm.abort(e.what());
    if (nccl_) nccl_->abort();
    wall_seconds_[k] += seconds_since(start);
    idle_seconds_[k] += transport->idle_seconds;
    throw;
  }
  wall_seconds_[k] += seconds_since(start);
  idle_seconds_[k] += transport->idle_seconds;
}

// One thread, stages taken in turn; each runs its program until a Recv finds nothing (or it is done).
void PipelineTrainer::run_emulated(const std::vector<PipelineRound>& rounds) {
  const int n = options_.stages;
  OmpThreadsGuard guard;
  std::map<MessageKey, StageValue> messages;
  std::vector<Mailbox> boxes;
  for (int k = 0; k < n; ++k) boxes.emplace_back(k, messages);
  std::vector<size_t> round(static_cast<size_t>(n), 0), pc(static_cast<size_t>(n), 0);
  for (int k = 0; k < n; ++k) workers_[k]->begin_round(rounds[0]);
  while (true) {
    bool progress = false, done = true;
    for (int k = 0; k < n; ++k) {
      const auto start = std::chrono::steady_clock::now();
      omp_set_num_threads(threads_[k]);
      while (round[k] < rounds.size()) {
        const std::vector<Instruction>& program = rounds[round[k]].schedule->programs[k];
        if (pc[k] == program.size()) {
          pc[k] = 0;
          if (++round[k] < rounds.size()) workers_[k]->begin_round(rounds[round[k]]);
          progress = true;
          continue;
        }
        if (!workers_[k]->execute(program[pc[k]], boxes[k])) break;
        ++pc[k];
        progress = true;
      }
      wall_seconds_[k] += seconds_since(start);
      done = done && round[k] == rounds.size();
    }
    if (done) break;
    ONNXTRAIN_CHECK(progress, "pipeline emulation: no stage can proceed (the schedule's sends and recvs do not match)");
  }
}

int PipelineTrainer::stage_threads(int stage) const { return threads_.at(static_cast<size_t>(stage)); }

std::vector<std::string> PipelineTrainer::stage_parameters(int stage) const {
  std::vector<std::string> names;
  for (const auto& p : workers_.at(static_cast<size_t>(stage))->weights().parameters()) names.push_back(p.name);
  return names;
}

std::vector<std::pair<std::string, Tensor>> PipelineTrainer::stage_tensors(int k) const {
  std::vector<std::pair<std::string, Tensor>> out;
  const WeightPolicy& p = workers_[k]->weights();
  for (size_t i = 0; i < p.parameters().size(); ++i) {
    Tensor t = p.parameters()[i].working.clone();
    const std::vector<float> m = p.master(i);
    std::copy(m.begin(), m.end(), t.data<float>().begin());
    out.emplace_back(p.parameters()[i].name, t);
  }
  for (const auto& [name, t] : workers_[k]->running_statistics()) out.emplace_back(name, t.clone());
  return out;
}

void PipelineTrainer::restore(const std::map<std::string, Tensor>& values,
                              const std::map<std::string, Tensor>& optimizer_state, const std::string& path,
                              const std::map<std::string, Tensor>& predictor_state) {
  try {
    for (auto& w : workers_) w->restore(values, optimizer_state, predictor_state);
  } catch (Error& e) {
    e.in_file(path);
    throw;
  }
  trained_ = workers_[0]->weights().version();
}

std::pair<std::map<std::string, Tensor>, std::map<std::string, Tensor>> PipelineTrainer::stage_state(int k) const {
  std::map<std::string, Tensor> values, optimizer;
  for (auto& [name, t] : stage_tensors(k)) values[name] = std::move(t);
  for (auto& [name, t] : workers_[k]->weights().optimizer().state_tensors())
    if (k == 0 || name != "global_step") optimizer[name] = t;
  return {values, optimizer};
}

std::map<std::string, Tensor> PipelineTrainer::stage_predictor_state(int k) const {
  return workers_[static_cast<size_t>(k)]->weights().prediction_state();
}

std::map<std::string, Tensor> PipelineTrainer::trained_initializers() const {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : reference_->trained_initializers()) out[name] = t.clone();
  for (int k = 0; k < options_.stages; ++k)
    for (auto& [name, t] : stage_tensors(k)) out[name] = std::move(t);
  return out;
}

std::map<std::string, Tensor> PipelineTrainer::gather_trained_initializers() {
  Communicator* world = pipeline_comm();
  if (!world) return trained_initializers();
  const int self = world->rank();
  if (self != 0) {
    // Rank 0 built every stage's worker, so it knows the names and sizes; only the values travel.
    const auto mine = stage_tensors(self);
    for (size_t i = 0; i < mine.size(); ++i) {
      world->send(0, CommTag{.micro_batch = 0, .kind = CommTag::other, .index = static_cast<int>(i)}, mine[i].second,
                  "stage " + std::to_string(self) + " sends '" + mine[i].first + "' to rank 0 for the trained model");
    }
    world->barrier("trained model gathered on rank 0");
    return {};
  }
  std::map<std::string, Tensor> out = trained_initializers();  // stage 0's values; the others' follow
  for (int k = 1; k < options_.stages; ++k) {
    const auto names = stage_tensors(k);
    for (size_t i = 0; i < names.size(); ++i) {
      out[names[i].first] =
          world->recv(k, CommTag{.micro_batch = 0, .kind = CommTag::other, .index = static_cast<int>(i)},
                      "rank 0 receives '" + names[i].first + "' of stage " + std::to_string(k));
    }
  }
  world->barrier("trained model gathered on rank 0");
  gathered_ = out;
  return out;
}

Trainer::Evaluation PipelineTrainer::evaluate(const DataInputs& inputs, const Tensor& labels, int64_t batch) {
  if (options_.world && (options_.world->rank() != 0 || gathered_.empty()))
    throw Error("pipeline across processes: evaluate runs on rank 0 after gather_trained_initializers()");
  // The reference trainer's evaluation reads W and the statistics from its graph (and on a GPU from its
  // device copies, which restore() has uploaded again).
  reference_->restore(options_.world ? gathered_ : trained_initializers(),
                      {{"global_step", Tensor::scalar_int64(trained_)}});
  return reference_->evaluate(inputs, labels, batch);
}

PipelineReport PipelineTrainer::report() const {
  PipelineReport r;
  r.strategy = options_.strategy;
  r.stage_count = options_.stages;
  r.micro_batches = options_.micro_batches;
  r.threaded = options_.threaded;
  r.mini_batches = trained_;
  r.samples = samples_;
  r.wall_seconds = wall_seconds_total_;
  r.samples_per_second = r.wall_seconds > 0 ? static_cast<double>(r.samples) / r.wall_seconds : 0;
  for (size_t k = 0; k < workers_.size(); ++k) {
    const StageWorker& w = *workers_[k];
    const WeightPolicy& p = w.weights();
    const WeightPolicy::Statistics& st = p.statistics();
    StageReport s;
    s.stage = static_cast<int>(k);
    s.first_node = w.graphs().first_node;
    s.end_node = w.graphs().end_node;
    s.threads = threads_[k];
    s.parameters = p.elements();
    s.samples = w.samples;
    s.wall_seconds = wall_seconds_[k];
    s.idle_seconds = idle_seconds_[k];
    s.samples_per_second = s.wall_seconds > 0 ? static_cast<double>(s.samples) / s.wall_seconds : 0;
    s.bubble_fraction = s.wall_seconds > 0 ? s.idle_seconds / s.wall_seconds : 0;
    s.forward_passes = st.forward_passes;
    s.backward_passes = st.backward_passes;
    s.updates = p.version();
    s.weight_bytes = p.elements() * static_cast<int64_t>(sizeof(float));
    for (const auto& param : p.parameters()) s.working_bytes += static_cast<int64_t>(param.working.nbytes());
    s.peak_stash_bytes = st.peak_stash_bytes;
    s.peak_activation_bytes = w.peak_activation_bytes;
    s.optimizer_bytes = p.optimizer_state_bytes();
    s.gradient_bytes = w.peak_gradient_bytes;
    s.gradient_sum_bytes = p.gradient_sum_bytes();
    s.prediction_bytes = p.prediction_average_bytes() + st.peak_scoring_bytes;
    auto mean = [](double sum, int64_t count) { return count > 0 ? sum / static_cast<double>(count) : 0.0; };
    s.mean_staleness_forward = mean(st.forward_gap, st.forward_passes);
    s.mean_staleness_backward = mean(st.backward_gap, st.backward_passes);
    s.mean_staleness = mean(st.forward_gap + st.backward_gap, st.forward_passes + st.backward_passes);
    s.predictions = st.predictions;
    s.prediction_error = st.predictions > 0 ? st.prediction_error / static_cast<double>(st.predictions)
                                            : std::numeric_limits<double>::quiet_NaN();
    r.stages.push_back(s);
  }
  return r;
}

std::string format_pipeline_report(const PipelineReport& r) {
  std::ostringstream o;
  auto mib = [](int64_t b) { return static_cast<double>(b) / (1024.0 * 1024.0); };
  o << pipeline_strategy_name(r.strategy) << ", " << r.stage_count << " stage" << (r.stage_count == 1 ? "" : "s");
  if (strategy_traits(r.strategy).flushes || strategy_traits(r.strategy).accumulates)
    o << ", " << r.micro_batches << " micro-batches";
  o << (r.threaded ? "" : " (sequential emulation)") << ": " << r.mini_batches << " mini-batches, " << r.samples
    << " samples in " << std::fixed << std::setprecision(2) << r.wall_seconds << " s, " << std::setprecision(1)
    << r.samples_per_second << " samples/s\n";
  o << "stage  nodes      threads  samples/s  bubble  staleness(F/B)  weights MiB  stash MiB  activ MiB  optim MiB"
       "  other MiB";
  if (r.strategy == PipelineStrategy::spectrain) o << "  pred.error";
  o << "\n";
  for (const StageReport& s : r.stages) {
    std::ostringstream nodes;
    nodes << "[" << s.first_node << "," << s.end_node << ")";
    o << std::setw(5) << s.stage << "  " << std::left << std::setw(9) << nodes.str() << std::right << "  "
      << std::setw(7) << s.threads << "  " << std::setw(9) << std::setprecision(1) << s.samples_per_second << "  "
      << std::setw(5) << std::setprecision(1) << 100.0 * s.bubble_fraction << "%  " << std::setw(6)
      << std::setprecision(2) << s.mean_staleness_forward << " / " << std::setw(5) << s.mean_staleness_backward << "  "
      << std::setw(11) << std::setprecision(3) << mib(s.weight_bytes + s.working_bytes) << "  " << std::setw(9)
      << mib(s.peak_stash_bytes) << "  " << std::setw(9) << mib(s.peak_activation_bytes) << "  " << std::setw(9)
      << mib(s.optimizer_bytes) << "  " << std::setw(9)
      << mib(s.gradient_bytes + s.gradient_sum_bytes + s.prediction_bytes);
    if (r.strategy == PipelineStrategy::spectrain) {
      o << "  " << std::setw(10) << std::setprecision(4) << s.prediction_error;
    }
    o << "\n";
  }
  // What the columns mean, one line each (the same words as the README's Pipeline training section).
  o << "bubble: the share of the stage's wall time spent waiting for a neighbour's activation or gradient\n"
       "staleness(F/B): the mean number of updates between the weights a forward (backward) pass read and the\n"
       "  ones one device would use for that mini-batch (0: as one device)\n";
  if (r.strategy == PipelineStrategy::spectrain)
    o << "pred.error: |predicted - aimed-at weights| / |current - aimed-at weights|, the mean over the predictions\n"
         "  scored (below 1: the prediction is closer than using the weights as they are; nan: the stage predicts\n"
         "  nothing, as the last stage, whose weights are always current, and a stage without weights)\n";
  return o.str();
}

}  // namespace onnxtrain
