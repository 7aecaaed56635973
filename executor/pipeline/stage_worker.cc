#include "executor/pipeline/stage_worker.h"

#include <algorithm>
#include <cstring>

#include "graph/error.h"

namespace onnxtrain {
namespace {

bool reads_input(const Graph& g, const std::string& name) {
  if (name.empty()) return false;
  return std::any_of(g.inputs.begin(), g.inputs.end(), [&](ValueId id) { return g.value(id).name == name; });
}

// A round of micro-batches of one mini-batch that ends in a flush (gpipe, 1f1b).
bool flush_round(const PipelineRound& r) { return strategy_traits(r.schedule->strategy).flushes; }

// Output `name` of a pass: its device copy when the pass kept it there, else the host tensor.
StageValue value_of(const std::string& name, const std::map<std::string, Tensor>& out,
                    const std::map<std::string, std::shared_ptr<const DeviceTensor>>& device_out) {
  if (auto it = device_out.find(name); it != device_out.end()) return {.host = {}, .device = it->second};
  return {.host = out.at(name), .device = nullptr};
}

// The float data of each value (host or device, as the stage's weight memory).
std::vector<const float*> floats_of(const std::vector<StageValue>& values) {
  std::vector<const float*> out;
  out.reserve(values.size());
  for (const StageValue& v : values) out.push_back(v.on_device() ? v.device->floats() : v.host.data<float>().data());
  return out;
}

// Values the stage is done with go back to the session whose outputs they were, for its next run
// (InferenceSession::recycle: device values, whose host side is empty, and shared buffers are dropped).
void recycle_into(InferenceSession& session, std::vector<StageValue>& values) {
  for (StageValue& v : values) session.recycle(std::move(v.host));
  values.clear();
}

}  // namespace

BatchFeed::Batch BatchFeed::get(int64_t mini_batch) {
  fetch_through(mini_batch);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = held_.find(mini_batch);
  ONNXTRAIN_CHECK(it != held_.end(), "pipeline: mini-batch " + std::to_string(mini_batch) + " was already released");
  return it->second.first;
}

void BatchFeed::prefetch(int64_t mini_batch) {
  if (mini_batch < end_) fetch_through(mini_batch);
}

void BatchFeed::fetch_through(int64_t mini_batch) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (next_ > mini_batch) return;
  }
  std::lock_guard<std::mutex> fetching(fetch_mutex_);
  while (true) {
    int64_t next = 0;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      next = next_;
    }
    if (next > mini_batch) return;
    Batch batch = fetch_();
    std::lock_guard<std::mutex> lock(mutex_);
    held_.emplace(next, std::make_pair(std::move(batch), consumers_));
    next_ = next + 1;
  }
}

void BatchFeed::release(int64_t mini_batch) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = held_.find(mini_batch);
  if (it == held_.end() || --it->second.second > 0) return;
  held_.erase(it);
  if (!done_) return;
  int64_t seen = done_->load();
  while (seen < mini_batch + 1 && !done_->compare_exchange_weak(seen, mini_batch + 1)) {
  }
}

std::pair<int64_t, int64_t> micro_batch_rows(int64_t rows, int64_t m, int64_t j) {
  const int64_t base = rows / m, extra = rows % m;
  const int64_t begin = j * base + std::min(j, extra);
  return {begin, begin + base + (j < extra ? 1 : 0)};
}

StageWorker::StageWorker(StageGraphs graphs, StageConfig config, Optimizer optimizer)
    : graphs_(std::move(graphs)), config_(std::move(config)) {
  Graph& f = graphs_.forward;
  Graph& b = graphs_.backward;
  // Both graphs must read the same parameter and state buffers: the policy writes them in place.
  for (ValueId id : b.initializers) {
    Value& v = b.value(id);
    if (v.role != ValueRole::Parameter && v.role != ValueRole::State) continue;
    if (auto fid = f.find_value(v.name); fid && f.value(*fid).data) v.data = f.value(*fid).data;
  }
  std::vector<WeightPolicy::Parameter> params;
  for (const auto& [param, gradient] : graphs_.parameter_gradients) {
    std::optional<Tensor> t;
    if (auto id = f.find_value(param)) t = f.value(*id).data;
    if (!t)
      if (auto id = b.find_value(param)) t = b.value(*id).data;
    if (!t || t->dtype() != DType::Float32) continue;  // as Trainer: only float initializers are updated
    params.push_back({param, *t});
    parameter_names_.push_back(param);
    working_.push_back(*t);
    gradient_outputs_.push_back(gradient);
  }

  // Running statistics: exactly the ones Trainer updates (BN nodes with the three training outputs), with
  // its unbiased correction (trainer.h RunningVariance).
  for (const auto& [output, state] : graphs_.running_stats) {
    auto out_id = f.find_value(output);
    auto state_id = f.find_value(state);
    if (!out_id || !state_id || !f.value(*state_id).data || !f.value(*out_id).producer.valid()) continue;
    const Node& n = f.node(f.value(*out_id).producer);
    if (!n.is_onnx_op("BatchNormalization") || n.outputs.size() != 3) continue;
    const int k = n.outputs[1] == *out_id ? 1 : n.outputs[2] == *out_id ? 2 : 0;
    if (k == 0) continue;
    RunningStat stat{output, state, *f.value(*state_id).data, RunningStatUpdate::of(f, n, k, config_.running_variance)};
    running_stats_.push_back(stat);
    if (config_.deferred_batch_norm && k == 2) {  // the variance: pair it with its node's mean
      const std::string& mean_output = f.value(n.outputs[1]).name;
      auto mean = std::find_if(running_stats_.begin(), running_stats_.end(),
                               [&](const RunningStat& r) { return r.output == mean_output; });
      if (mean == running_stats_.end())
        throw Error("--deferred-bn: BatchNormalization node '" + n.name +
                    "' updates its running variance but not its mean");
      deferred_nodes_.push_back({.mean = static_cast<size_t>(mean - running_stats_.begin()),
                                 .variance = running_stats_.size() - 1,
                                 .momentum = n.attr_float("momentum", 0.9)});
    }
  }
  for (const std::string& input : config_.inputs) {
    if (reads_input(f, input)) forward_reads_.inputs.push_back(input);
    if (reads_input(b, input)) backward_reads_.inputs.push_back(input);
  }
  forward_reads_.labels = reads_input(f, config_.labels);
  backward_reads_.labels = reads_input(b, config_.labels);
  forward_session_ = std::make_unique<InferenceSession>(f, config_.kernels, config_.device);
  // On a GPU both sessions share one store of device initializers (one copy of the stage's weights), and
  // the policy keeps its arrays and steps on that device, writing the store's copies in place.
  backward_session_ =
      std::make_unique<InferenceSession>(b, config_.kernels, config_.device, forward_session_->device_initializers());
  // The gradients summed in place are read only after finish_sums (the optimizer step), so kernels may sum
  // a large weight gradient as one product over all micro-batches' rows (Stream::DeferredProduct).
  backward_session_->defer_summed_products(true);
  weights_ = std::make_unique<WeightPolicy>(
      config_.strategy, config_.vertical_sync, std::move(params), std::move(optimizer), config_.measure_prediction,
      WeightMemory(config_.local ? forward_session_->device_initializers() : nullptr));
  if (config_.predict_stashed) weights_->predict_stashed();
}

void StageWorker::begin_round(const PipelineRound& round) {
  round_ = round;
  // A train() call's rounds share its schedule (gpipe: one round per mini-batch).
  if (marked_call_ != round.call) {
    launch_first_.clear();
    const std::vector<bool> launch = launch_before(*round.schedule, graphs_.index);
    const std::vector<Instruction>& program = round.schedule->programs[static_cast<size_t>(graphs_.index)];
    for (size_t j = 0; j < program.size(); ++j)
      if (launch[j]) launch_first_.insert({program[j].op, program[j].micro_batch});
    marked_call_ = round.call;
  }
  base_version_ = weights_->version();
  loss_sum_ = 0;
}

int64_t StageWorker::mini_batch_of(int64_t micro) const {
  return flush_round(round_) ? round_.first : round_.first + micro / round_.schedule->micro_per_update;
}

int64_t StageWorker::tag_of(int64_t micro) const { return round_.first * micros_per_mini() + micro; }

// Micro-batches per mini-batch (gpipe, 1f1b: the schedule's M; 2bw: its M; the other 1F1B strategies: 1)
// and a micro-batch's place among its mini-batch's.
int64_t StageWorker::micros_per_mini() const {
  return flush_round(round_) ? round_.schedule->micro_batches : round_.schedule->micro_per_update;
}

int64_t StageWorker::micro_in_mini(int64_t micro) const {
  return flush_round(round_) ? micro : micro % round_.schedule->micro_per_update;
}

std::string StageWorker::what(int64_t micro, const char* kind, const std::string& name) const {
  std::string s = "stage " + std::to_string(graphs_.index) + ", mini-batch " + std::to_string(mini_batch_of(micro));
  if (micros_per_mini() > 1 || flush_round(round_)) s += " micro-batch " + std::to_string(micro_in_mini(micro));
  return s + ", " + kind + " '" + name + "'";
}

// The model's data inputs and labels that a graph reads (gpipe: the micro-batch's rows). A data input read
// in a later stage (an attention mask every block reads) is fed there from the batch, never relayed.
void StageWorker::feed_data(const Graph& graph, int64_t micro, std::map<std::string, Tensor>& inputs) {
  const DataReads& reads = &graph == &graphs_.forward ? forward_reads_ : backward_reads_;
  if (reads.inputs.empty() && !reads.labels) return;
  BatchFeed::Batch batch = round_.feed->get(mini_batch_of(micro));
  const auto [begin, end] = local_rows(batch, micro);
  for (const std::string& name : reads.inputs) {
    const Tensor* data = nullptr;
    for (const auto& [given, tensor] : batch.x.tensors)
      if (given == name || (given.empty() && batch.x.tensors.size() == 1 && name == config_.inputs.at(0)))
        data = &tensor;
    if (!data) throw Error(what(micro, "data input", name) + ": the mini-batch has no tensor for it");
    inputs[name] = slice_rows(*data, begin, end);
  }
  if (reads.labels) inputs[config_.labels] = slice_rows(batch.labels, begin, end);
}

// The micro-batch's rows of this pipeline's batch (all of them for the 1F1B strategies but 2bw).
std::pair<int64_t, int64_t> StageWorker::local_rows(const BatchFeed::Batch& batch, int64_t micro) const {
  return micro_batch_rows(batch.rows, micros_per_mini(), micro_in_mini(micro));
}

// The micro-batch's rows of the whole mini-batch (with pipeline copies, this copy's share starts at first_row).
std::pair<int64_t, int64_t> StageWorker::rows_of(int64_t micro) {
  const BatchFeed::Batch batch = round_.feed->get(mini_batch_of(micro));
  const auto [begin, end] = local_rows(batch, micro);
  return {batch.first_row + begin, batch.first_row + end};
}

void StageWorker::observe(bool backward, int64_t micro, int64_t read) {
  if (!round_.observer || !*round_.observer) return;
  if (const auto& store = forward_session_->device_initializers()) store->sync_to_host();  // the working weights
  (*round_.observer)(PassObservation{.stage = graphs_.index,
                                     .backward = backward,
                                     .mini_batch = mini_batch_of(micro),
                                     .micro_batch = micro,
                                     .version_read = read,
                                     .master_version = weights_->version(),
                                     .names = &parameter_names_,
                                     .weights = &working_});
}

void StageWorker::note_activations() {
  int64_t bytes = 0;
  std::set<const DeviceTensor*> counted;  // a device value both kept and sent is one buffer
  auto add = [&](const StageValue& v) {
    if (!v.on_device() || counted.insert(v.device.get()).second) bytes += v.nbytes();
  };
  for (const auto& [micro, mb] : in_flight_) {
    for (const auto& [name, v] : mb.received) add(v);
    for (const auto& [name, v] : mb.kept) add(v);
    for (const StageValue& v : mb.outgoing) add(v);
  }
  peak_activation_bytes = std::max(peak_activation_bytes, bytes);
}

// As Trainer does (RunningStatUpdate, trainer.h): on the host, then uploaded again on a GPU.
void StageWorker::apply_running_stat(RunningStat& r, std::span<const float> computed, int64_t rows) {
  r.update.apply(computed, r.state.data<float>(), rows);
  if (const std::shared_ptr<DeviceInitializerStore>& store = forward_session_->device_initializers())
    store->mark_host_changed(r.state_name);
}

void StageWorker::update_running_stats(const std::map<std::string, Tensor>& out, int64_t rows, int64_t micro) {
  if (!config_.deferred_batch_norm) {
    for (RunningStat& r : running_stats_) apply_running_stat(r, out.at(r.output).data<float>(), rows);
    return;
  }
  const bool last = micro_in_mini(micro) + 1 == micros_per_mini();
  for (DeferredNode& d : deferred_nodes_) {
    RunningStat& mean = running_stats_[d.mean];
    RunningStat& variance = running_stats_[d.variance];
    const double momentum = d.momentum;
    if (momentum >= 1.0) continue;  // the statistics never move
    d.stats.add(out.at(mean.output).data<float>(), out.at(variance.output).data<float>(), mean.state.data<float>(),
                variance.state.data<float>(), momentum, rows);
    if (!last) continue;
    const int64_t whole = d.stats.rows();
    Tensor mean_out(DType::Float32, mean.state.sizes()), variance_out(DType::Float32, variance.state.sizes());
    d.stats.take(mean_out.data<float>(), variance_out.data<float>(), mean.state.data<float>(),
                 variance.state.data<float>(), momentum);
    apply_running_stat(mean, mean_out.data<float>(), whole);
    apply_running_stat(variance, variance_out.data<float>(), whole);
  }
}

std::map<std::string, Tensor> StageWorker::run_pass(InferenceSession& session, const Graph& graph, int64_t micro,
                                                    const std::set<std::string>& keep_on_device,
                                                    DeviceOutputs& device_outputs,
                                                    const std::map<std::string, Tensor>& into, bool adds) {
  MicroBatch& mb = in_flight_.at(micro);
  std::map<std::string, Tensor> inputs;
  std::map<std::string, const DeviceTensor*> device_inputs;
  for (ValueId id : graph.inputs) {
    const std::string& name = graph.value(id).name;
    const StageValue* v = nullptr;
    if (auto it = mb.kept.find(name); it != mb.kept.end()) {
      v = &it->second;
    } else if (auto r = mb.received.find(name); r != mb.received.end()) {
      v = &r->second;
    }
    if (!v) continue;
    if (v->on_device()) {
      device_inputs[name] = v->device.get();
    } else {
      inputs[name] = v->host;
    }
  }
  feed_data(graph, micro, inputs);
  // Dropout: the mini-batch's run index and this micro-batch's rows of it (the single run's masks).
  session.set_run_index(static_cast<uint64_t>(mini_batch_of(micro)));
  const auto [begin, end] = rows_of(micro);
  session.set_rows(static_cast<uint64_t>(begin), end - begin);
  if (config_.device.kind != DeviceKind::Cuda)
    return into.empty() ? session.run(inputs) : session.run_into(inputs, into, adds);
  std::map<std::string, DeviceTensor> kept_on_device;
  std::map<std::string, Tensor> out = session.run(inputs, device_inputs, keep_on_device, kept_on_device);
  for (auto& [name, t] : kept_on_device) device_outputs[name] = std::make_shared<const DeviceTensor>(std::move(t));
  return out;
}

void StageWorker::carry_weight_derived(int64_t read) {
  // Other strategies change the working weights between passes (a stash, a prediction, an update).
  const bool carry = flush_round(round_) && read >= 0 && config_.device.kind == DeviceKind::Cpu;
  if (!carry || read != weight_derived_version_) weight_derived_->clear();
  weight_derived_version_ = carry ? read : -1;
  const std::shared_ptr<Stream::DerivedMap> store = carry ? weight_derived_ : nullptr;
  forward_session_->carry_weight_derived_values(store);
  backward_session_->carry_weight_derived_values(store);
}

void StageWorker::forward(int64_t micro) {
  const Schedule& s = *round_.schedule;
  const int k = graphs_.index;
  const bool flush = flush_round(round_);  // gpipe, 1f1b
  const int64_t mini = mini_batch_of(micro);
  MicroBatch& mb = in_flight_[micro];

  BatchFeed::Batch batch = round_.feed->get(mini);
  const auto [begin, end] = local_rows(batch, micro);
  mb.rows = end - begin;
  if (!flush) {
    ONNXTRAIN_CHECK(weights_->version() == base_version_ + s.forward_version[k][micro],
                    "stage " + std::to_string(k) + " is at version " + std::to_string(weights_->version()) +
                        " for the forward of mini-batch " + std::to_string(mini) + "; the schedule says " +
                        std::to_string(base_version_ + s.forward_version[k][micro]));
  }
  WeightPolicy::Pass pass{.mini_batch = mini, .stash_key = micro};
  if (!flush) {
    pass.s = s.s_forward[k][micro];
    pass.sync_version = base_version_ + s.forward_version[0][micro];
  }
  const int64_t read = weights_->before_forward(pass);
  observe(false, micro, read);
  carry_weight_derived(read);

  // On a GPU what the backward reads stays there, and so do the activations sent.
  std::set<std::string> keep_on_device;
  if (config_.device.kind == DeviceKind::Cuda) {
    keep_on_device.insert(graphs_.kept.begin(), graphs_.kept.end());
    keep_on_device.insert(graphs_.send_activations.begin(), graphs_.send_activations.end());
  }
  DeviceOutputs device_out;
  std::map<std::string, Tensor> out = run_pass(*forward_session_, graphs_.forward, micro, keep_on_device, device_out);
  mb.received.clear();  // the activations the backward needs are among `kept`
  mb.outgoing.clear();
  for (const std::string& name : graphs_.send_activations) mb.outgoing.push_back(value_of(name, out, device_out));
  for (const std::string& name : graphs_.kept) mb.kept[name] = value_of(name, out, device_out);
  if (!graphs_.loss.empty()) {
    const float loss = out.at(graphs_.loss).data<float>()[0];
    if (flush || micros_per_mini() > 1) {  // the mini-batch's loss from its micro-batches' (reported at the flush)
      const bool mean = config_.reduction == LossReduction::Mean;
      loss_sum_ += mean ? static_cast<double>(mb.rows) / static_cast<double>(batch.rows) * loss : loss;
      if (!flush && micro_in_mini(micro) + 1 == micros_per_mini()) {
        report_loss(mini, static_cast<float>(loss_sum_));
        loss_sum_ = 0;
      }
    } else {
      report_loss(mini, loss);
    }
  }
  update_running_stats(out, mb.rows, micro);
  samples += mb.rows;
  note_activations();
}

void StageWorker::backward(int64_t micro) {
  const Schedule& s = *round_.schedule;
  const int k = graphs_.index;
  const bool flush = flush_round(round_);  // gpipe, 1f1b
  const int64_t mini = mini_batch_of(micro);
  MicroBatch& mb = in_flight_.at(micro);
  if (!flush) {
    ONNXTRAIN_CHECK(weights_->version() == base_version_ + s.backward_version[k][micro],
                    "stage " + std::to_string(k) + " is at version " + std::to_string(weights_->version()) +
                        " for the backward of mini-batch " + std::to_string(mini) + "; the schedule says " +
                        std::to_string(base_version_ + s.backward_version[k][micro]));
  }
  WeightPolicy::Pass pass{.mini_batch = mini, .stash_key = micro};
  if (!flush) {
    pass.s = s.s_backward[k][micro];
    pass.sync_version = base_version_ + s.forward_version[0][micro];
  }
  const int64_t read = weights_->before_backward(pass);
  observe(true, micro, read);
  carry_weight_derived(read);

  // On a GPU the gradients sent on and the parameter gradients (for the policy's device step) stay there.
  std::set<std::string> keep_on_device;
  if (config_.device.kind == DeviceKind::Cuda) {
    keep_on_device.insert(graphs_.send_gradients.begin(), graphs_.send_gradients.end());
    keep_on_device.insert(gradient_outputs_.begin(), gradient_outputs_.end());
  }
  // gpipe, 1f1b: micro-batch j's gradient weighs rows_j·M/B for mean losses (1 when the rows split evenly),
  // and the flush scales the sum by 1/M, so the update sees the whole mini-batch's mean gradient.
  const bool accumulates = flush || strategy_traits(s.strategy).accumulates;
  float weight = 1.0f;
  if (accumulates && config_.reduction == LossReduction::Mean) {
    const int64_t rows = round_.feed->get(mini).rows, m = micros_per_mini();
    if (mb.rows * m != rows) weight = static_cast<float>(static_cast<double>(mb.rows * m) / static_cast<double>(rows));
  }
  // On the CPU, unweighted sums go straight into the accumulator: no gradient-sized buffers per micro-batch,
  // and kernels that can add touch only what they change (a layer4 convolution's 9.4 MB weight gradient of
  // which 1 MB is not zero).
  std::map<std::string, Tensor> into;
  bool adds = false;
  if (accumulates && weight == 1.0f && config_.device.kind == DeviceKind::Cpu) {
    std::vector<Tensor> sums = weights_->accumulate_in_place(adds);
    for (size_t i = 0; i < gradient_outputs_.size(); ++i) into[gradient_outputs_[i]] = std::move(sums[i]);
  }
  DeviceOutputs device_out;
  std::map<std::string, Tensor> out =
      run_pass(*backward_session_, graphs_.backward, micro, keep_on_device, device_out, into, adds);
  for (auto& [name, kept] : mb.kept) forward_session_->recycle(std::move(kept.host));
  mb.kept.clear();
  mb.received.clear();
  mb.outgoing.clear();
  for (const std::string& name : graphs_.send_gradients) mb.outgoing.push_back(value_of(name, out, device_out));
  if (into.empty()) {
    backward_session_->finish_sums();  // earlier micro-batches' sums in place, before `accumulate` adds
    collect_gradients(out, device_out, accumulates, weight, mini);
  }
  if (k == 0) in_flight_.erase(micro);
}

// The backward's parameter gradients, not summed in place: into the accumulator (weighted), or kept for the
// optimizer step that follows.
void StageWorker::collect_gradients(std::map<std::string, Tensor>& out, const DeviceOutputs& device_out,
                                    bool accumulates, float weight, int64_t mini) {
  std::vector<StageValue> grads;  // parameter order; they own their buffers
  grads.reserve(gradient_outputs_.size());
  for (size_t i = 0; i < gradient_outputs_.size(); ++i) {
    grads.push_back(value_of(gradient_outputs_[i], out, device_out));
    check_gradient(i, grads.back());
  }
  int64_t gradient_bytes = 0;
  for (const StageValue& g : grads) gradient_bytes += g.nbytes();
  peak_gradient_bytes = std::max(peak_gradient_bytes, gradient_bytes);
  if (accumulates) {
    weights_->accumulate(floats_of(grads), weight);
    out.clear();
    recycle_into(*backward_session_, grads);
  } else {
    last_gradients_ = std::move(grads);  // kept alive until the OptimizerStep that follows
    last_mini_ = mini;
    last_weight_ = share_of_rows(mini);
    round_.feed->release(mini);
  }
}

const cuda::DeviceStream& StageWorker::device_stream() const {
  const std::shared_ptr<DeviceInitializerStore>& store = forward_session_->device_initializers();
  if (!store) throw Error("stage " + std::to_string(graphs_.index) + " runs on the CPU: it has no device stream");
  return store->stream();
}

bool StageWorker::execute(const Instruction& in, StageTransport& transport) {
  const int k = graphs_.index;
  if (!is_transfer(in.op) || launch_first_.contains({in.op, in.micro_batch})) transport.flush();
  switch (in.op) {
    case Op::Forward:
      forward(in.micro_batch);
      return true;
    case Op::Backward:
      backward(in.micro_batch);
      return true;
    case Op::SendActivation:
    case Op::SendGradient: {
      const bool act = in.op == Op::SendActivation;
      MicroBatch& mb = in_flight_.at(in.micro_batch);
      const std::vector<std::string>& names = act ? graphs_.send_activations : graphs_.send_gradients;
      for (size_t i = 0; i < mb.outgoing.size(); ++i) {
        transport.send(act ? k + 1 : k - 1,
                       CommTag{.micro_batch = tag_of(in.micro_batch),
                               .kind = act ? CommTag::activation : CommTag::gradient,
                               .index = static_cast<int>(i)},
                       mb.outgoing[i], what(in.micro_batch, act ? "activation" : "gradient", names[i]));
      }
      mb.outgoing.clear();
      if (!act) in_flight_.erase(in.micro_batch);
      return true;
    }
    case Op::RecvActivation:
    case Op::RecvGradient: {
      const bool act = in.op == Op::RecvActivation;
      // The gradient comes back after the later stages' passes: time to fetch the next mini-batch.
      if (!act) round_.feed->prefetch(mini_batch_of(in.micro_batch) + 1);
      MicroBatch& mb = in_flight_[in.micro_batch];
      const std::vector<std::string>& names = act ? graphs_.recv_activations : graphs_.recv_gradients;
      for (size_t i = 0; i < names.size(); ++i) {
        if (mb.received.contains(names[i])) continue;
        StageValue v;
        const CommTag tag{.micro_batch = tag_of(in.micro_batch),
                          .kind = act ? CommTag::activation : CommTag::gradient,
                          .index = static_cast<int>(i)};
        if (!transport.try_recv(act ? k - 1 : k + 1, tag,
                                what(in.micro_batch, act ? "activation" : "gradient", names[i]), v))
          return false;
        mb.received[names[i]] = std::move(v);
      }
      note_activations();
      return true;
    }
    case Op::Flush:
      if (!graphs_.loss.empty()) report_loss(round_.first, static_cast<float>(loss_sum_));
      return true;
    case Op::OptimizerStep:
      if (flush_round(round_) || strategy_traits(round_.schedule->strategy).accumulates) {
        const bool mean = config_.reduction == LossReduction::Mean;
        const int64_t m = micros_per_mini();
        const int64_t mini = flush_round(round_) ? round_.first : mini_batch_of(in.micro_batch);
        backward_session_->finish_sums();  // the gradients summed in place (backward)
        if (config_.replica_group) {
          const double share = share_of_rows(mini);
          weights_->reduce_accumulated([&](std::span<float> sum) { sum_over_replicas(sum, share, mini); });
        }
        weights_->flush(mean && m > 1 ? 1.0f / static_cast<float>(m) : 1.0f);
        round_.feed->release(mini);
      } else {
        weights_->step(config_.replica_group ? reduce_over_replicas() : floats_of(last_gradients_));
        recycle_into(*backward_session_, last_gradients_);
      }
      return true;
  }
  return true;
}

void StageWorker::report_loss(int64_t mini, float loss) {
  (*round_.losses)[static_cast<size_t>(mini - round_.loss_offset)] = loss;
  if (round_.on_loss && *round_.on_loss) (*round_.on_loss)(mini, loss);
}

void StageWorker::end_run() {
  weights_->sync_working();
  weights_->end_run();
  in_flight_.clear();
}

// This pipeline's share of mini-batch `mini`'s rows with mean losses (1 with summed ones, or without
// copies): the weight of its mean gradient in the sum over the stage's copies.
double StageWorker::share_of_rows(int64_t mini) const {
  const BatchFeed::Batch whole = round_.feed->get(mini);
  return config_.reduction == LossReduction::Mean && whole.total_rows > 0
             ? static_cast<double>(whole.rows) / static_cast<double>(whole.total_rows)
             : 1.0;
}

// Pipeline × data parallelism: `gradients` (host) weighted by `share` and summed over the stage's copies in
// the other pipelines, in place: every copy then holds the whole mini-batch's gradient.
void StageWorker::sum_over_replicas(std::span<float> gradients, double share, int64_t mini) {
  for (float& v : gradients) v = static_cast<float>(v * share);
  config_.replica_group->all_reduce_sum(gradients, "stage " + std::to_string(graphs_.index) + ", mini-batch " +
                                                       std::to_string(mini) +
                                                       ": gradient all-reduce over the stage's replicas");
}

// The last backward's parameter gradients summed over the replicas (sum_over_replicas, over the host
// communicator: a stage on a GPU downloads them and uploads the sum). Returns the sums, in the policy's
// memory.
std::vector<const float*> StageWorker::reduce_over_replicas() {
  size_t total = 0;
  for (const StageValue& g : last_gradients_) total += static_cast<size_t>(g.numel());
  reduced_.resize(total);
  std::vector<const float*> out;
  size_t at = 0;
  for (const StageValue& g : last_gradients_) {
    const auto n = static_cast<size_t>(g.numel());
    if (g.on_device()) {
      cuda::copy_to_host(reduced_.data() + at, g.device->floats(), n * sizeof(float), device_stream());
    } else {
      std::copy_n(g.host.data<float>().data(), n, reduced_.data() + at);
    }
    out.push_back(reduced_.data() + at);
    at += n;
  }
  if (weights_->on_device()) device_stream().synchronize();  // one wait for all the downloads
  sum_over_replicas(reduced_, last_weight_, last_mini_);
  if (!weights_->on_device()) return out;
  if (reduced_on_device_.bytes() != total * sizeof(float))
    reduced_on_device_ = cuda::DeviceBuffer(device_stream(), total * sizeof(float));
  cuda::copy_to_device(reduced_on_device_.data(), reduced_.data(), total * sizeof(float), device_stream());
  for (const float*& p : out) p = static_cast<const float*>(reduced_on_device_.data()) + (p - reduced_.data());
  return out;
}

// A parameter gradient as the policy reads it: float32, with the parameter's element count.
void StageWorker::check_gradient(size_t i, const StageValue& g) const {
  if (g.dtype() != DType::Float32 || g.numel() != working_[i].numel()) {
    throw Error("stage " + std::to_string(graphs_.index) + ": the gradient '" + gradient_outputs_[i] + "' of '" +
                parameter_names_[i] + "' is " + std::string(dtype_name(g.dtype())) + " with " +
                std::to_string(g.numel()) + " elements; the parameter has " + std::to_string(working_[i].numel()) +
                " float32 elements");
  }
}

void StageWorker::restore(const std::map<std::string, Tensor>& values,
                          const std::map<std::string, Tensor>& optimizer_state,
                          const std::map<std::string, Tensor>& predictor_state) {
  weights_->restore(values, optimizer_state, predictor_state);
  weight_derived_->clear();  // the restored version may have the number of the one carried
  weight_derived_version_ = -1;
  for (auto& [name, stat] : running_statistics()) {
    auto it = values.find(name);
    if (it == values.end() || it->second.nbytes() != stat.nbytes())
      throw Error("the saved state has no value of " + std::to_string(stat.nbytes()) + " bytes for '" + name + "'");
    Tensor shared = stat;  // the stage graph's own buffer
    std::memcpy(shared.raw(), it->second.raw(), stat.nbytes());
  }
  forward_session_->initializers_changed();  // a GPU stage uploads all of it again
}

std::vector<std::pair<std::string, Tensor>> StageWorker::running_statistics() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [output, state] : graphs_.running_stats) {
    if (auto id = graphs_.forward.find_value(state); id && graphs_.forward.value(*id).data)
      out.emplace_back(state, *graphs_.forward.value(*id).data);
  }
  return out;
}

}  // namespace onnxtrain
