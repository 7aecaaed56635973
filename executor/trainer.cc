#include "executor/trainer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "executor/cuda_run_profile.h"
#include "executor/pipeline/stage_worker.h"  // micro_batch_rows
#include "graph/op_schema.h"
#include "kernels/kernel.h"

namespace onnxtrain {

namespace {
// The checkpoint tensor of the steps skip_nonfinite_steps skipped (beside the optimizer state).
constexpr const char* kNonfiniteSkips = "nonfinite/skipped_steps";

int64_t argmax_row(std::span<const float> row) { return std::max_element(row.begin(), row.end()) - row.begin(); }

}  // namespace

RunningStatUpdate RunningStatUpdate::of(const Graph& graph, const Node& n, int output, RunningVariance mode) {
  RunningStatUpdate u;
  if (output != 2 || mode != RunningVariance::unbiased) return u;
  u.momentum = n.attr_float("momentum", 0.9);
  const Shape& x = graph.value(n.inputs[0]).shape;
  if (!x.rank_known) throw Error("BatchNormalization node '" + n.name + "': its input's rank is unknown");
  u.values_per_sample = 1;
  for (size_t d = 2; d < x.dims.size(); ++d) {
    if (!x.dims[d].is_static()) {
      throw Error("BatchNormalization node '" + n.name +
                  "': its input's spatial sizes are not static, so the "
                  "unbiased running variance cannot be formed; use the population variance (ONNX's update)");
    }
    u.values_per_sample *= x.dims[d].value();
  }
  return u;
}

void RunningStatUpdate::apply(std::span<const float> computed, std::span<float> state, int64_t batch) const {
  const int64_t n = batch * values_per_sample;
  if (values_per_sample == 0 || n < 2) {
    std::copy(computed.begin(), computed.end(), state.begin());
    return;
  }
  const double m = momentum, correction = static_cast<double>(n) / static_cast<double>(n - 1);
  for (size_t i = 0; i < computed.size(); ++i) {
    const double old = state[i];
    state[i] = static_cast<float>(m * old + (computed[i] - m * old) * correction);
  }
}

int64_t class_count(const Graph& g, const std::string& logits) {
  if (logits.empty()) return 0;
  auto id = g.find_value(logits);
  if (!id) return 0;
  const Shape& s = g.value(*id).shape;
  if (!s.rank_known || s.rank() != 2 || !s.dims[1].is_static()) return 0;
  return s.dims[1].value();
}

Tensor loss_targets(const LossSpec& loss, const Tensor& y, int64_t classes) {
  if (loss.kind == LossKind::SoftmaxCrossEntropy || loss.kind == LossKind::ModelOutput) {
    if (loss.kind == LossKind::SoftmaxCrossEntropy && loss.label_dtype == DType::Int32 && y.dtype() == DType::Int64) {
      Tensor t(DType::Int32, y.sizes());
      auto src = y.data<int64_t>();
      auto dst = t.data<int32_t>();
      for (size_t i = 0; i < src.size(); ++i) dst[i] = static_cast<int32_t>(src[i]);
      return t;
    }
    return y;
  }
  if (y.dtype() != DType::Int64 || y.rank() != 1 || classes <= 0) return y;
  // mse, l1, bce-with-logits on class labels: one-hot targets shaped like the logits (B, C).
  Tensor t(DType::Float32, {y.sizes()[0], classes});
  auto labels = y.data<int64_t>();
  auto dst = t.data<float>();
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] < 0 || labels[i] >= classes) {
      throw Error("label " + std::to_string(labels[i]) + " is outside the model's " + std::to_string(classes) +
                  " outputs");
    }
    dst[i * classes + labels[i]] = 1.0f;
  }
  return t;
}

RunningVariance running_variance_from_name(const std::string& name) {
  if (name == "unbiased") return RunningVariance::unbiased;
  if (name == "population") return RunningVariance::population;
  throw Error("unknown running variance '" + name + "': expected unbiased (PyTorch's) or population (ONNX's)");
}

Trainer::Trainer(const Graph& forward, TrainerOptions options)
    : options_(std::move(options)), optimizer_(options_.optimizer, options_.schedule) {
  options_.optimizer.validate();
  options_.schedule.validate();
  const uint64_t seed = options_.seed;
  const bool cpu = options_.device.kind == DeviceKind::Cpu;  // the CPU's rewrites (a GPU trains the model's nodes)
  TrainingRecipe recipe = make_training_recipe(
      forward, {.loss = options_.loss,
                .precision = options_.precision,
                .scale_loss = options_.precision == Precision::fp16,
                .dropout = options_.dropout,
                .dropout_seed = [seed](uint64_t node_seed,
                                       uint64_t position) { return random_stream_seed(seed ^ node_seed, position); },
                .live_conv_taps_only = options_.live_conv_taps && options_.optimizer.keeps_untouched_elements(),
                .tap_major_conv_weights = options_.tap_major_conv_weights && cpu,
                .cpu_float32_convs = options_.cpu_float32_convs && cpu,
                .fuse_batch_norm_relu = options_.fuse_batch_norm_relu && cpu,
                .fuse_add_relu = options_.fuse_add_relu && cpu,
                .pool_before_relu = options_.pool_before_relu && cpu,
                .fuse_matmul = options_.fuse_matmul && cpu,
                .fuse_gelu = options_.fuse_gelu && cpu,
                .gather_before_transpose = options_.gather_before_transpose && cpu,
                .fold_casts_into_products = options_.fold_casts_into_products && cpu});
  inputs_ = std::move(recipe.inputs);
  loss_ = std::move(recipe.loss);
  loss_scale_input_ = std::move(recipe.loss_scale_input);
  eval_graph_ = std::make_unique<Graph>(std::move(recipe.evaluation));
  if (options_.precision == Precision::fp16) scaler_ = std::make_unique<LossScaler>(options_.loss_scaler);
  if (options_.skip_nonfinite_steps && (options_.device.kind == DeviceKind::Cuda || scaler_))
    throw Error(
        "skipping steps with a non-finite loss or gradient (--on-nonfinite skip) is built for float32 and "
        "bfloat16 on the CPU; fp16 skips overflowing steps by itself (dynamic loss scaling)");
  if (options_.accumulate < 1) throw Error("--accumulate must be 1 or more");
  if (options_.accumulate > 1 && options_.device.kind == DeviceKind::Cuda)
    throw Error("gradient accumulation (--accumulate) is built for the CPU; on a GPU use a larger --batch");
  training_ = std::make_unique<TrainingGraph>(std::move(recipe.training));
  session_ = std::make_unique<InferenceSession>(training_->graph, options_.kernels, options_.device);
  // On a CUDA device the evaluation session reads the training session's device copies (the graphs share
  // their initializer Tensors on the host, and so their names).
  device_initializers_ = session_->device_initializers();
  eval_session_ =
      std::make_unique<InferenceSession>(*eval_graph_, options_.kernels, options_.device, device_initializers_);
  if (device_initializers_) {
    device_optimizer_ = std::make_unique<DeviceOptimizer>(device_initializers_);
    optimizer_.set_state_sync([device = device_optimizer_.get()](std::map<std::string, ParamState>& states) {
      device->sync_to_host(states);
    });
  }

  Graph& g = training_->graph;
  for (const TrainingGraph::Gradient& grad : training_->gradients) {
    const Value& v = g.value(grad.value);
    if (!v.data || v.dtype != DType::Float32) continue;  // a data input differentiated: nothing to update
    slots_.push_back({v.name, grad.value, g.value(grad.gradient).name});
  }
  for (NodeId id : g.order()) {
    const Node& n = g.node(id);
    if (!n.is_onnx_op("BatchNormalization") || n.outputs.size() != 3) continue;
    const size_t before = running_stats_.size();
    for (int k : {1, 2}) {
      if (!n.outputs[k].valid() || !g.value(n.inputs[k + 2]).data) continue;
      RunningStat stat{g.value(n.outputs[k]).name, n.inputs[k + 2],
                       RunningStatUpdate::of(g, n, k, options_.running_variance)};
      running_stats_.push_back(stat);
    }
    running_stat_nodes_ += running_stats_.size() > before ? 1 : 0;
  }
  for (const Slot& s : slots_) gradient_outputs_.insert(s.gradient);
}

namespace {

std::string quoted_list(const std::vector<std::string>& names) {
  std::string text;
  for (const std::string& name : names) text += (text.empty() ? "'" : ", '") + name + "'";
  return text;
}

}  // namespace

// A batch's tensors by the training graph's input names: one unnamed tensor is the model's one input.
std::map<std::string, Tensor> Trainer::named_inputs(const DataInputs& x) const {
  std::map<std::string, Tensor> named;
  if (x.tensors.size() == 1 && x.tensors[0].first.empty()) {
    if (inputs_.size() != 1) {
      throw Error("the model reads " + std::to_string(inputs_.size()) + " data inputs (" + quoted_list(inputs_) +
                  "): a batch must name each");
    }
    named.emplace(inputs_[0], x.first());
    return named;
  }
  for (const auto& [name, tensor] : x.tensors) {
    if (std::find(inputs_.begin(), inputs_.end(), name) == inputs_.end())
      throw Error("the batch has an input '" + name + "' that the model does not read (it reads " +
                  quoted_list(inputs_) + ")");
    named.emplace(name, tensor);
  }
  for (const std::string& name : inputs_)
    if (!named.count(name)) throw Error("the batch has no tensor for the model's data input '" + name + "'");
  return named;
}

// The training session's inputs for a batch; sets the run index: step t runs with index t, also after
// compute_gradients calls or a restore.
std::map<std::string, Tensor> Trainer::feed(const DataInputs& x, const Tensor& y) {
  std::map<std::string, Tensor> inputs = named_inputs(x);
  if (!loss_.labels.empty())
    inputs[loss_.labels] = loss_targets(options_.loss, y, class_count(training_->graph, loss_.logits));
  if (scaler_) {
    Tensor scale(DType::Float32, {});
    scale.data<float>()[0] = static_cast<float>(scaler_->scale());
    inputs[loss_scale_input_] = scale;
  }
  session_->set_run_index(static_cast<uint64_t>(optimizer_.global_step()));
  session_->set_rows(static_cast<uint64_t>(first_row_), x.rows());
  return inputs;
}

std::map<std::string, Tensor> Trainer::run_step(const DataInputs& x, const Tensor& y,
                                                const InferenceSession::OutputCallback& on_output) {
  accumulated_stats_.clear();
  if (options_.accumulate <= 1) return session_->run(feed(x, y), on_output);
  return accumulated_run(x, y, on_output);
}

// Gradient accumulation (TrainerOptions::accumulate): the batch runs as K consecutive row slices, as a
// PyTorch loop calls backward() K times before step(). A slice's gradients and loss are weighed by its
// share of the rows (mean losses; 1 for sum), so the sums are the whole batch's mean gradient and loss. Each
// slice draws its rows' Dropout masks of the whole batch (set_rows), so only the summation order differs
// from one pass over the batch. BatchNorm's statistics are the slice's, as in PyTorch; its running
// statistics follow the slices one after another: each slice's update is applied before the next slice
// runs (its BatchNorm nodes read the running statistics), and the states are put back at the end, keeping
// the result in accumulated_stats_ for update_running_stats, so that only the callers that update the
// statistics (not compute_gradients) change them.
std::map<std::string, Tensor> Trainer::accumulated_run(const DataInputs& x, const Tensor& y,
                                                       const InferenceSession::OutputCallback& on_output) {
  if (on_output) throw Error("gradient accumulation cannot stream gradients during the backward pass (--bucket-mb)");
  // A batch shorter than K rows (an epoch's last) runs as one pass per row: the sums are still its mean
  // gradient. It was an error after the epoch's full batches had trained (an outside check).
  const int64_t rows = x.rows(), k = std::min(options_.accumulate, rows);
  const bool mean = options_.loss.reduction == LossReduction::Mean;
  std::map<std::string, Tensor> sum;
  const int64_t first_row = first_row_;
  Graph& g = training_->graph;
  std::vector<Tensor> saved;
  for (const RunningStat& r : running_stats_) saved.push_back(g.value(r.state).data->clone());
  for (int64_t j = 0; j < k; ++j) {
    const auto [begin, end] = micro_batch_rows(rows, k, j);
    const float weight = mean ? static_cast<float>(end - begin) / static_cast<float>(rows) : 1.0f;
    first_row_ = first_row + begin;
    std::map<std::string, Tensor> out;
    try {
      out = session_->run(feed(x.slice_rows(begin, end), slice_rows(y, begin, end)));
    } catch (...) {
      first_row_ = first_row;
      throw;
    }
    first_row_ = first_row;
    apply_running_stats(out, end - begin);
    auto add = [&](const std::string& name) {
      std::span<const float> part = out.at(name).data<float>();
      auto [it, fresh] = sum.try_emplace(name, DType::Float32, out.at(name).sizes());
      std::span<float> total = it->second.data<float>();
      for (size_t i = 0; i < part.size(); ++i) total[i] = (fresh ? 0.0f : total[i]) + weight * part[i];
    };
    add(loss_.loss);
    for (const Slot& s : slots_) add(s.gradient);
  }
  for (size_t i = 0; i < running_stats_.size(); ++i) {
    Tensor& state = *g.value(running_stats_[i].state).data;
    accumulated_stats_.push_back(state.clone());
    std::memcpy(state.raw(), saved[i].raw(), saved[i].nbytes());
  }
  return sum;
}

// The parameter Tensors are shared by the training and evaluation graphs: the running statistics are
// written into them in place. On a CUDA device the statistics are computed on the host too (a few
// floats per channel) and their device copies are uploaded again at the next run of either session.
void Trainer::update_running_stats(const std::map<std::string, Tensor>& out, int64_t batch) {
  if (skips_for_loss(out)) return;  // a NaN batch would poison the statistics for good
  if (accumulated_stats_.empty()) return apply_running_stats(out, batch);
  Graph& g = training_->graph;  // --accumulate: the statistics after the last slice (accumulated_run)
  for (size_t i = 0; i < running_stats_.size(); ++i) {
    Tensor& state = *g.value(running_stats_[i].state).data;
    std::memcpy(state.raw(), accumulated_stats_[i].raw(), state.nbytes());
    if (device_initializers_) device_initializers_->mark_host_changed(g.value(running_stats_[i].state).name);
  }
  accumulated_stats_.clear();
}

void Trainer::apply_running_stats(const std::map<std::string, Tensor>& out, int64_t batch) {
  if (skips_for_loss(out)) return;
  Graph& g = training_->graph;
  for (const RunningStat& r : running_stats_) {
    r.update.apply(out.at(r.output).data<float>(), g.value(r.state).data->data<float>(), batch);
    if (device_initializers_) device_initializers_->mark_host_changed(g.value(r.state).name);
  }
}

// One optimizer step on the device with a device gradient per slot (by parameter name); the weights are
// the store's device copies, updated in place (their host copies are stale until a sync).
void Trainer::step_on_device(const std::map<std::string, const float*>& gradients) {
  HostPhaseTimer phase("trainer: optimizer step (enqueue)");
  Graph& g = training_->graph;
  std::vector<DeviceParamSlot> params;
  params.reserve(slots_.size());
  for (const Slot& s : slots_) {
    const Tensor& w = *g.value(s.value).data;
    if (!device_initializers_->contains(s.name)) device_initializers_->data(s.name, w);  // before any run
    params.push_back(
        {s.name, static_cast<float*>(device_initializers_->data_for_update(s.name)), gradients.at(s.name), w.numel()});
  }
  device_optimizer_->step(optimizer_, params);
}

void Trainer::require_device(const char* what) const {
  if (!device_optimizer_)
    throw Error(std::string(what) + " needs a trainer on a CUDA device; this one is on " + options_.device.name());
}

const cuda::DeviceStream& Trainer::device_stream() const {
  require_device("device_stream");
  return device_initializers_->stream();
}

std::map<std::string, DeviceTensor> Trainer::forward_backward_on_device(const DataInputs& x, const Tensor& y,
                                                                        float* loss) {
  require_device("forward_backward_on_device");
  std::map<std::string, DeviceTensor> device_gradients;
  std::map<std::string, Tensor> out = session_->run(feed(x, y), gradient_outputs_, device_gradients);
  HostPhaseTimer phase("trainer: gradients by parameter, running statistics");
  Graph& g = training_->graph;
  std::map<std::string, DeviceTensor> by_parameter;
  for (const Slot& s : slots_) {
    auto it = device_gradients.find(s.gradient);
    const int64_t numel = g.value(s.value).data->numel();
    if (it == device_gradients.end() || it->second.dtype != DType::Float32 || it->second.numel() != numel) {
      throw Error("the gradient '" + s.gradient + "' of parameter '" + s.name + "' is not " + std::to_string(numel) +
                  " float32 values on the device");
    }
    by_parameter.emplace(s.name, std::move(it->second));
  }
  update_running_stats(out, x.rows());
  if (loss) *loss = out.at(loss_.loss).data<float>()[0];
  return by_parameter;
}

bool Trainer::apply_device_gradients(const std::map<std::string, DeviceTensor>& gradients) {
  require_device("apply_device_gradients");
  std::map<std::string, const float*> pointers;
  std::vector<const DeviceTensor*> scaled;
  for (const Slot& s : slots_) {
    auto it = gradients.find(s.name);
    if (it == gradients.end()) throw Error("apply_device_gradients: no gradient for '" + s.name + "'");
    pointers[s.name] = it->second.floats();
    scaled.push_back(&it->second);
  }
  if (scaler_) {
    // GradScaler on the device: as train_step's host path (the running statistics already followed the
    // batch in forward_backward_on_device, also when the step is skipped).
    const bool finite = device_optimizer_->unscale(scaled, scaler_->scale());
    scaler_->update(finite);
    if (!finite) return false;
  }
  // Enqueued on the stream after whatever produced the gradients; their buffers return to the stream's
  // cache when the caller drops them, which stream order makes safe.
  step_on_device(pointers);
  return true;
}

float Trainer::train_step_on_device(const DataInputs& x, const Tensor& y) {
  float loss = 0;
  apply_device_gradients(forward_backward_on_device(x, y, &loss));
  return loss;
}

float Trainer::train_step(const DataInputs& x, const Tensor& y) {
  if (device_optimizer_) return train_step_on_device(x, y);
  if (applies_optimizer_step_alone(options_) && options_.accumulate <= 1) return train_step_kept(x, y);
  std::map<std::string, Tensor> out = run_step(x, y);
  Graph& g = training_->graph;
  if (scaler_) {
    // GradScaler: unscale every gradient (in place: the run's own output buffers) and skip the optimizer
    // step when any is inf/NaN. The forward pass ran, so the running statistics follow the batch as
    // PyTorch's do.
    bool finite = true;
    for (const Slot& s : slots_)
      finite = LossScaler::unscale(out.at(s.gradient).data<float>(), scaler_->scale()) && finite;
    scaler_->update(finite);
    if (!finite) {
      update_running_stats(out, x.rows());
      return out.at(loss_.loss).data<float>()[0];
    }
  }
  if (options_.skip_nonfinite_steps) {
    bool finite = !skips_for_loss(out);
    for (const Slot& s : slots_) {
      const auto g = out.at(s.gradient).data<float>();
      finite = finite && std::all_of(g.begin(), g.end(), [](float v) { return std::isfinite(v); });
    }
    if (!finite) {
      ++nonfinite_skips_;
      return out.at(loss_.loss).data<float>()[0];
    }
  }
  std::vector<ParamSlot> params;
  params.reserve(slots_.size());
  for (const Slot& s : slots_) {
    params.push_back({s.name, g.value(s.value).data->data<float>(), out.at(s.gradient).data<float>()});
  }
  std::vector<std::vector<float>> clipped;
  if (options_.clip_grad_norm > 0) clip_gradient_norm(params, options_.clip_grad_norm, clipped);
  optimizer_.step(params);
  update_running_stats(out, x.rows());
  const float loss = out.at(loss_.loss).data<float>()[0];
  recycle(out);
  return loss;
}

void Trainer::recycle(std::map<std::string, Tensor>& values) {
  for (auto& [name, t] : values) session_->recycle(std::move(t));
  values.clear();
}

std::map<std::string, Tensor> Trainer::gradients_of(const std::map<std::string, Tensor>& out, float* loss) const {
  if (loss) *loss = out.at(loss_.loss).data<float>()[0];
  std::map<std::string, Tensor> gradients;
  for (const Slot& s : slots_) {
    gradients[s.name] = out.at(s.gradient);
    if (scaler_) LossScaler::unscale(gradients[s.name].data<float>(), scaler_->scale());  // may hold inf/NaN
  }
  return gradients;
}

std::map<std::string, Tensor> Trainer::compute_gradients(const DataInputs& x, const Tensor& y, float* loss) {
  return gradients_of(run_step(x, y), loss);
}

std::map<std::string, Tensor> Trainer::forward_backward(const DataInputs& x, const Tensor& y, float* loss) {
  return forward_backward(x, y, loss, {});
}

std::map<std::string, Tensor> Trainer::forward_backward(const DataInputs& x, const Tensor& y, float* loss,
                                                        const GradientCallback& on_gradient) {
  if (scaler_ && on_gradient) {
    throw Error(
        "--precision fp16: gradients streamed during the backward pass (--bucket-mb) are still "
        "loss-scaled; data parallelism with fp16 sends whole gradients after the backward pass");
  }
  std::map<std::string, std::string> parameter_of;  // gradient output -> parameter
  for (const Slot& s : slots_) parameter_of[s.gradient] = s.name;
  InferenceSession::OutputCallback on_output;
  if (on_gradient) {
    on_output = [&](const std::string& name, const Tensor& value) {
      if (auto it = parameter_of.find(name); it != parameter_of.end()) on_gradient(it->second, value);
    };
  }
  std::map<std::string, Tensor> out = run_step(x, y, on_output);
  update_running_stats(out, x.rows());
  return gradients_of(out, loss);
}

std::map<std::string, Trainer::KeptGradient> Trainer::forward_backward_kept(const DataInputs& x, const Tensor& y,
                                                                            float* loss) {
  ONNXTRAIN_CHECK(applies_optimizer_step_alone(options_),
                  "forward_backward_kept: the step has a loss scaler, a check or clipping");
  std::map<std::string, KeptGradient> gradients;
  if (options_.accumulate > 1) {  // the slices' sums (accumulated_run) are fresh outputs, dense
    recycle(accumulated_gradients_);
    accumulated_gradients_ = forward_backward(x, y, loss);
    for (auto& [name, t] : accumulated_gradients_) gradients[name] = {.dense = t.data<float>()};
    return gradients;
  }
  Graph& g = training_->graph;
  if (gradient_buffers_.empty())
    for (const Slot& s : slots_) gradient_buffers_[s.gradient] = Tensor(DType::Float32, g.value(s.value).data->sizes());
  accumulated_stats_.clear();
  const std::map<std::string, Tensor> out = session_->run_into(feed(x, y), gradient_buffers_, /*add=*/false);
  update_running_stats(out, x.rows());
  if (loss) *loss = out.at(loss_.loss).data<float>()[0];
  for (const Slot& s : slots_) {
    Tensor& buffer = gradient_buffers_.at(s.gradient);
    gradients[s.name] = {.dense = buffer.data<float>(), .taps = session_->kept_sum(buffer.raw())};
  }
  return gradients;
}

std::vector<std::string> Trainer::gradient_order() const {
  const Graph& g = training_->graph;
  std::map<std::string, size_t> produced_at;  // value name -> position of its producer in the node order
  for (size_t i = 0; i < g.order().size(); ++i)
    for (ValueId out : g.node(g.order()[i]).outputs)
      if (out.valid()) produced_at[g.value(out).name] = i;
  std::vector<std::pair<size_t, std::string>> ordered;
  for (const Slot& s : slots_) {
    auto it = produced_at.find(s.gradient);
    ordered.emplace_back(it == produced_at.end() ? 0 : it->second, s.name);
  }
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> names;
  for (auto& [at, name] : ordered) names.push_back(std::move(name));
  return names;
}

bool Trainer::apply_gradients(const std::map<std::string, Tensor>& gradients) {
  Graph& g = training_->graph;
  std::vector<ParamSlot> params;
  params.reserve(slots_.size());
  for (const Slot& s : slots_) {
    auto it = gradients.find(s.name);
    Tensor& w = *g.value(s.value).data;
    if (it == gradients.end() || it->second.numel() != w.numel() || it->second.dtype() != DType::Float32) {
      throw Error("apply_gradients: no float32 gradient of " + std::to_string(w.numel()) + " elements for '" + s.name +
                  "'");
    }
    params.push_back({s.name, w.data<float>(), it->second.data<float>()});
  }
  if (!update_loss_scale(gradients)) return false;
  if (!device_optimizer_) {
    std::vector<std::vector<float>> clipped;
    if (options_.clip_grad_norm > 0) clip_gradient_norm(params, options_.clip_grad_norm, clipped);
    optimizer_.step(params);
    return true;
  }
  // On the device: the host gradients are uploaded and the step runs there, where the weights and the
  // optimizer state are.
  const cuda::DeviceStream& stream = device_initializers_->stream();
  std::vector<DeviceTensor> uploaded;
  uploaded.reserve(params.size());
  std::map<std::string, const float*> device_gradients;
  for (const ParamSlot& p : params) {
    const size_t bytes = p.grad.size() * sizeof(float);
    uploaded.push_back({.buffer = bytes ? cuda::DeviceBuffer(stream, bytes) : cuda::DeviceBuffer(),
                        .dtype = DType::Float32,
                        .sizes = {static_cast<int64_t>(p.grad.size())}});
    if (bytes) cuda::copy_to_device(uploaded.back().buffer.data(), p.grad.data(), bytes, stream);
    device_gradients[p.name] = uploaded.back().floats();
  }
  step_on_device(device_gradients);
  return true;
}

void Trainer::restore(const std::map<std::string, Tensor>& initializers,
                      const std::map<std::string, Tensor>& optimizer_state) {
  Graph& g = training_->graph;
  // The host copies first hold the device's values, so that a restore failing half way leaves every
  // value either restored or current.
  if (device_initializers_) device_initializers_->sync_to_host();
  for (ValueId id : g.initializers) {
    Value& v = g.value(id);
    if ((v.role != ValueRole::Parameter && v.role != ValueRole::State) || !v.data) continue;
    auto it = initializers.find(v.name);
    if (it == initializers.end()) throw Error("the saved state has no value for '" + v.name + "'");
    const Tensor& saved = it->second;
    if (saved.dtype() != v.data->dtype() || saved.sizes() != v.data->sizes()) {
      throw Error("the saved '" + v.name + "' is " + std::string(dtype_name(saved.dtype())) + " " +
                  Shape::of(saved.sizes()).to_string() + "; the model's is " +
                  std::string(dtype_name(v.data->dtype())) + " " + Shape::of(v.data->sizes()).to_string());
    }
    // In place: the evaluation graph shares these buffers.
    std::memcpy(v.data->raw(), saved.raw(), static_cast<size_t>(saved.numel()) * dtype_size(saved.dtype()));
    if (device_initializers_) device_initializers_->mark_host_changed(v.name);
  }
  std::map<std::string, Tensor> state = optimizer_state;
  if (scaler_) scaler_->restore(state);
  if (auto it = state.find(kNonfiniteSkips); it != state.end()) {
    if (it->second.dtype() != DType::Int64 || it->second.numel() != 1)
      throw Error(std::string("the saved '") + kNonfiniteSkips + "' is not an int64 scalar");
    nonfinite_skips_ = it->second.data<int64_t>()[0];
    state.erase(it);
  }
  optimizer_.load_state(state);
  if (device_optimizer_) device_optimizer_->state_loaded();
}

bool Trainer::applies_optimizer_step_alone(const TrainerOptions& options) {
  // No device optimizer (CUDA), no loss scaler (fp16): the constructor makes them from these options.
  return options.device.kind != DeviceKind::Cuda && options.precision != Precision::fp16 &&
         !options.skip_nonfinite_steps && options.clip_grad_norm <= 0;
}

std::span<float> Trainer::parameter_values(const std::string& name) {
  for (const Slot& s : slots_)
    if (s.name == name) return training_->graph.value(s.value).data->data<float>();
  throw Error("no trained parameter '" + name + "'");
}

bool Trainer::update_loss_scale(const std::map<std::string, Tensor>& gradients) {
  if (scaler_) return scaler_->update(gradients);
  if (!options_.skip_nonfinite_steps) return true;
  for (const auto& [name, g] : gradients) {
    const auto values = g.data<float>();
    if (std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); })) continue;
    ++nonfinite_skips_;
    return false;
  }
  return true;
}

bool Trainer::skips_for_loss(const std::map<std::string, Tensor>& out) const {
  return options_.skip_nonfinite_steps && !std::isfinite(out.at(loss_.loss).data<float>()[0]);
}

std::map<std::string, Tensor> Trainer::loss_scaler_state() const {
  std::map<std::string, Tensor> state = scaler_ ? scaler_->state_tensors() : std::map<std::string, Tensor>{};
  if (options_.skip_nonfinite_steps) {
    Tensor skips(DType::Int64, {});
    skips.data<int64_t>()[0] = nonfinite_skips_;
    state[kNonfiniteSkips] = skips;
  }
  return state;
}

namespace {

// Of the labels `y` that are not ignored: how many there are and how many the argmax of their class
// scores gets right. Logits (B, C) for labels (B), or (B, T, C) with classes last for labels (B, T);
// other layouts count labels but no hits (accuracy is then NaN).
std::pair<int64_t, int64_t> counted_and_correct(const Tensor* logits, const Tensor& y, const LossSpec& loss) {
  const int64_t ignore_index =
      loss.kind == LossKind::SoftmaxCrossEntropy ? loss.ignore_index : std::numeric_limits<int64_t>::min();
  int64_t counted = 0, correct = 0;
  const auto labels = y.data<int64_t>();
  const int64_t classes = logits ? logits->sizes().back() : 0;
  const bool rows_match = logits && (logits->rank() == 2 || loss.classes_last) &&
                          logits->numel() == static_cast<int64_t>(labels.size()) * classes;
  for (std::size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] == ignore_index) continue;
    ++counted;
    if (rows_match) correct += argmax_row(logits->data<float>().subspan(i * classes, classes)) == labels[i];
  }
  return {counted, rows_match ? correct : -1};
}

}  // namespace

Trainer::Evaluation Trainer::evaluate(const DataInputs& inputs, const Tensor& labels, int64_t batch) {
  Evaluation e;
  const int64_t n = labels.sizes().empty() ? 0 : labels.sizes()[0];
  if (n == 0) {
    e.loss = e.accuracy = std::numeric_limits<double>::quiet_NaN();
    return e;
  }
  const int64_t classes = class_count(*eval_graph_, loss_.logits);
  const bool cross_entropy = options_.loss.kind == LossKind::SoftmaxCrossEntropy;
  const bool class_scores = cross_entropy || classes > 0;  // the logits score classes: accuracy means something
  int64_t correct = 0, counted = 0;
  double loss_sum = 0;
  session_->release_buffers();
  for (int64_t begin = 0; begin < n; begin += batch) {
    const int64_t b = std::min(batch, n - begin);
    const Tensor y = slice_rows(labels, begin, begin + b);
    std::map<std::string, Tensor> feed = named_inputs(inputs.slice_rows(begin, begin + b));
    if (!loss_.labels.empty()) feed[loss_.labels] = loss_targets(options_.loss, y, classes);
    std::map<std::string, Tensor> out = eval_session_->run(feed);
    const Tensor* logits = class_scores && !loss_.logits.empty() ? &out.at(loss_.logits) : nullptr;
    const auto [batch_counted, batch_correct] = counted_and_correct(logits, y, options_.loss);
    // mean reductions give the batch mean (cross-entropy: over the labels not ignored); sum the batch sum
    const double l = out.at(loss_.loss).data<float>()[0], weight = cross_entropy ? batch_counted : b;
    loss_sum += options_.loss.reduction == LossReduction::Mean ? l * weight : l;
    counted += cross_entropy ? batch_counted : b;
    correct = batch_correct < 0 || correct < 0 ? -1 : correct + batch_correct;
  }
  eval_session_->release_buffers();
  e.samples = n;
  e.labels_counted = counted;
  e.loss = counted > 0 ? loss_sum / counted : std::numeric_limits<double>::quiet_NaN();
  e.accuracy = class_scores && correct >= 0 && counted > 0 ? static_cast<double>(correct) / counted
                                                           : std::numeric_limits<double>::quiet_NaN();
  return e;
}

void Trainer::release_buffers() {
  session_->release_buffers();
  eval_session_->release_buffers();
}

std::map<std::string, Tensor> Trainer::running_statistics() const {
  std::map<std::string, Tensor> result;
  const Graph& g = training_->graph;
  for (ValueId id : g.initializers) {
    const Value& v = g.value(id);
    if (v.role == ValueRole::State && v.data) result[v.name] = *v.data;
  }
  return result;
}

void Trainer::running_statistics_changed() {
  if (!device_initializers_) return;
  const Graph& g = training_->graph;
  for (ValueId id : g.initializers)
    if (g.value(id).role == ValueRole::State) device_initializers_->mark_host_changed(g.value(id).name);
}

int Trainer::share_parameters_of(const Trainer& first) {
  if (device_initializers_ || first.device_initializers_)
    throw Error("sharing parameters between trainers is built for the CPU");
  std::map<std::string, const Tensor*> theirs;
  const Graph& other = first.training_->graph;
  for (ValueId id : other.initializers)
    if (const Value& v = other.value(id); v.role == ValueRole::Parameter && v.data) theirs[v.name] = &*v.data;
  int shared = 0;
  for (const Slot& s : slots_) {
    Value& mine = training_->graph.value(s.value);
    const auto it = theirs.find(mine.name);
    if (!mine.data || it == theirs.end() || it->second->dtype() != mine.data->dtype() ||
        it->second->sizes() != mine.data->sizes())
      continue;
    const Tensor previous = *mine.data;
    mine.data = *it->second;
    // The evaluation graph held the same buffer as the training graph's value.
    for (ValueId id : eval_graph_->initializers)
      if (Value& v = eval_graph_->value(id); v.data && v.data->raw() == previous.raw()) v.data = *it->second;
    ++shared;
  }
  return shared;
}

std::map<std::string, Tensor> Trainer::trained_initializers() const {
  std::map<std::string, Tensor> result;
  const Graph& g = training_->graph;
  if (device_initializers_) device_initializers_->sync_to_host();
  for (ValueId id : g.initializers) {
    const Value& v = g.value(id);
    if ((v.role == ValueRole::Parameter || v.role == ValueRole::State) && v.data) {
      result[v.name] = *v.data;
      // The caller holds the host buffers and may write them: the device copy is refreshed at the next run.
      if (device_initializers_) device_initializers_->mark_host_changed(v.name);
    }
  }
  return result;
}

}  // namespace onnxtrain
