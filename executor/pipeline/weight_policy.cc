#include "executor/pipeline/weight_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "graph/error.h"

namespace onnxtrain {

WeightPolicy::WeightPolicy(PipelineStrategy strategy, bool vertical_sync, std::vector<Parameter> parameters,
                           Optimizer optimizer, bool measure_prediction, WeightMemory memory)
    : weights_(strategy_traits(strategy).weights),
      vertical_sync_(vertical_sync && weights_ == WeightHandling::stash),
      measure_prediction_(measure_prediction),
      parameters_(std::move(parameters)),
      optimizer_(std::move(optimizer)),
      memory_(std::move(memory)) {
  lazy_stash_ = strategy == PipelineStrategy::pipedream && !vertical_sync_;
  size_t total = 0;
  for (const Parameter& p : parameters_) {
    if (p.working.dtype() != DType::Float32) {
      throw Error("pipeline stage parameter '" + p.name + "' is " + std::string(dtype_name(p.working.dtype())) +
                  "; only float32 parameters are trained");
    }
    offsets_.push_back(total);
    sizes_.push_back(static_cast<size_t>(p.working.numel()));
    total += sizes_.back();
  }
  master_ = memory_.make(total);
  for (size_t i = 0; i < parameters_.size(); ++i)
    memory_.upload(master_.data() + offsets_[i], parameters_[i].working.data<float>());
  // The device optimizer's state is what checkpoints and the report read through the host Optimizer.
  if (memory_.on_device())
    optimizer_.set_state_sync([this](std::map<std::string, ParamState>& states) { memory_.sync_state(states); });
  if (weights_ == WeightHandling::predict) memory_.enable_prediction(optimizer_);
  working_version_ = version();
}

std::vector<float> WeightPolicy::master() const {
  std::vector<float> out(master_.size);
  memory_.download(out, master_.data());
  return out;
}

std::vector<float> WeightPolicy::master(size_t parameter) const {
  std::vector<float> out(sizes_.at(parameter));
  memory_.download(out, master_.data() + offsets_[parameter]);
  return out;
}

WeightArray WeightPolicy::array_for_copy(size_t n) const {
  for (size_t i = spare_.size(); i-- > 0;) {
    if (spare_[i].size != n) continue;
    WeightArray a = std::move(spare_[i]);
    spare_.erase(spare_.begin() + static_cast<std::ptrdiff_t>(i));
    return a;
  }
  return memory_.make(n);
}

void WeightPolicy::release(WeightArray&& array) {
  if (spare_.size() < kMaxSpare) spare_.push_back(std::move(array));
}

WeightArray WeightPolicy::copy_of(const WeightArray& source) const {
  WeightArray a = array_for_copy(source.size);
  memory_.copy(a.data(), source.data(), source.size);
  return a;
}

WeightArray WeightPolicy::copy_of_working() const {
  WeightArray copy = array_for_copy(master_.size);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Parameter& p = parameters_[i];
    memory_.copy(copy.data() + offsets_[i], memory_.working(p.name, p.working), sizes_[i]);
  }
  return copy;
}

void WeightPolicy::write_working(const WeightArray& source) {
  ++working_writes_;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Parameter& p = parameters_[i];
    memory_.copy(memory_.working(p.name, p.working), source.data() + offsets_[i], sizes_[i]);
  }
}

// Ŵ(s) per parameter, the optimizer's own rule run s updates ahead (executor/weight_prediction.h), into
// the working weights (WeightMemory::predict, on the device for a stage on a GPU).
void WeightPolicy::write_predicted(int64_t s) {
  ++working_writes_;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Parameter& p = parameters_[i];
    memory_.predict(optimizer_, p.name, memory_.working(p.name, p.working), master_.data() + offsets_[i], sizes_[i], s);
  }
}

// The working weights (all parameters), copied to the host.
std::vector<float> WeightPolicy::working_values() const {
  std::vector<float> out(master_.size);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const Parameter& p = parameters_[i];
    memory_.download(std::span<float>(out).subspan(offsets_[i], sizes_[i]), memory_.working(p.name, p.working), false);
  }
  memory_.wait();
  return out;
}

// SpecTrain's working weights for a pass with s != 0. The prediction is scored against the version it
// aimed at, W_(v+s), when the stage gets there (host copies of Ŵ and W are kept until then).
void WeightPolicy::predict(const Pass& pass) {
  working_version_ = -1;
  write_predicted(pass.s);
  if (!measure_prediction_ || pass.s <= 0) return;
  pending_.push_back({.target = version() + pass.s, .predicted = working_values(), .unpredicted = master()});
  const auto scoring = static_cast<int64_t>(pending_.size() * 2 * master_.size * sizeof(float));
  stats_.peak_scoring_bytes = std::max(stats_.peak_scoring_bytes, scoring);
}

const WeightArray& WeightPolicy::version_weights(int64_t v) const {
  if (v == version()) return master_;
  for (const auto& [hv, w] : history_)
    if (hv == v) return w;
  ONNXTRAIN_CHECK(false, "vertical sync: stage lost weight version " + std::to_string(v) + " (now at " +
                             std::to_string(version()) + ")");
  return master_;
}

int64_t WeightPolicy::before_forward(const Pass& pass) {
  int64_t read = version();
  switch (weights_) {
    case WeightHandling::current:
      if (working_version_ != version()) write_working(master_);
      working_version_ = version();
      break;
    case WeightHandling::stash: {
      if (vertical_sync_) {
        // Later forwards ask for versions >= this one (stage 0's versions only grow): older ones go.
        while (!history_.empty() && history_.front().first < pass.sync_version) {
          release(std::move(history_.front().second));
          history_.pop_front();
        }
        read = pass.sync_version;
      }
      const int64_t s = predict_stashed_ ? std::max<int64_t>(pass.s, 0) : 0;
      const StashId id{read, s};
      Stash& stash = stashes_[id];
      if (s > 0) {
        if (stash.readers == 0) {
          write_predicted(s);
          stash.weights = copy_of_working();
        } else {
          write_working(stash.weights);  // the same Ŵ(s) from the same W
        }
        working_version_ = -1;
        read += s;
      } else {
        const WeightArray& w = version_weights(read);
        if (working_version_ != read) write_working(w);
        working_version_ = read;
        if (stash.readers == 0) {
          if (lazy_stash_ && read == version()) {
            stash.on_master = true;
          } else {
            stash.weights = copy_of(w);
          }
        }
      }
      ++stash.readers;
      stash_of_[pass.stash_key] = id;
      note_stash();
      break;
    }
    case WeightHandling::predict:
      read = version() + pass.s;
      if (pass.s == 0) {
        if (working_version_ != version()) write_working(master_);
        working_version_ = version();
        break;
      }
      predict(pass);
      break;
  }
  ++stats_.forward_passes;
  stats_.forward_gap += static_cast<double>(std::llabs(pass.mini_batch - read));
  return read;
}

int64_t WeightPolicy::before_backward(const Pass& pass) {
  int64_t read = version();
  if (weights_ == WeightHandling::stash) {
    auto it = stash_of_.find(pass.stash_key);
    ONNXTRAIN_CHECK(it != stash_of_.end(),
                    "pipedream: no stashed weights for the backward of mini-batch " + std::to_string(pass.mini_batch));
    const StashId id = it->second;
    read = id.first + id.second;
    Stash& stash = stashes_.at(id);
    // The stash is W at that version, or Ŵ(s) from it.
    const int64_t holds = id.second == 0 ? read : -1;
    if (stash.on_master) {
      ONNXTRAIN_CHECK(read == version(), "pipedream: a stash kept on the master outlived its version");
      if (working_version_ != holds) write_working(master_);
    } else if (working_version_ != holds || holds < 0) {
      write_working(stash.weights);
    }
    working_version_ = holds;
    if (--stash.readers == 0) {
      if (!stash.on_master) release(std::move(stash.weights));
      stashes_.erase(id);
    }
    stash_of_.erase(it);
  } else if (weights_ == WeightHandling::predict && pass.s != 0) {
    read = version() + pass.s;
    predict(pass);
  } else {
    if (working_version_ != version()) write_working(master_);
    working_version_ = version();
  }
  ++stats_.backward_passes;
  stats_.backward_gap += static_cast<double>(std::llabs(pass.mini_batch - read));
  return read;
}

void WeightPolicy::materialize_stashes() {
  for (auto& [id, stash] : stashes_) {
    if (!stash.on_master) continue;
    stash.weights = copy_of(master_);
    stash.on_master = false;
  }
  note_stash();
}

void WeightPolicy::step_with(std::span<const float* const> gradients, float grad_scale) {
  ONNXTRAIN_CHECK(gradients.size() == parameters_.size(), "weight policy: one gradient per parameter expected");
  materialize_stashes();  // the stashes still reading the master keep the version it is leaving
  // In host memory the update writes the working weights too: a next pass that reads W reads them as they
  // are (no copy of W before it); one that reads a stash or a prediction writes its weights over them, as
  // before. Nothing else is in the working weights across a step.
  const bool mirror = !memory_.on_device();
  std::vector<DeviceParamSlot> slots;
  slots.reserve(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    slots.push_back({.name = parameters_[i].name,
                     .value = master_.data() + offsets_[i],
                     .grad = gradients[i],
                     .numel = static_cast<int64_t>(sizes_[i]),
                     .mirror = mirror ? parameters_[i].working.data<float>().data() : nullptr});
  }
  memory_.step(optimizer_, slots, grad_scale);
  if (mirror) {
    ++working_writes_;
    working_version_ = version();
  }
  score_predictions();
}

void WeightPolicy::step(std::span<const float* const> gradients) {
  if (vertical_sync_) {
    history_.emplace_back(version(), copy_of(master_));  // a later stage-0 version may still name this one
    note_stash();
  }
  step_with(gradients);
}

void WeightPolicy::accumulate(std::span<const float* const> gradients, float weight) {
  ONNXTRAIN_CHECK(gradients.size() == parameters_.size(), "weight policy: one gradient per parameter expected");
  if (accumulated_.size != master_.size) accumulated_ = memory_.make(master_.size);
  for (size_t i = 0; i < parameters_.size(); ++i)
    memory_.accumulate(accumulated_.data() + offsets_[i], gradients[i], sizes_[i], weight, !accumulating_);
  accumulating_ = true;
}

std::vector<Tensor> WeightPolicy::accumulate_in_place(bool& adds) {
  ONNXTRAIN_CHECK(!memory_.on_device(), "gradients accumulate in place only in host memory");
  if (accumulated_.size != master_.size) accumulated_ = memory_.make(master_.size);
  std::vector<Tensor> sums;
  sums.reserve(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    auto* at = reinterpret_cast<std::byte*>(accumulated_.data() + offsets_[i]);
    sums.push_back(Tensor::wrap(DType::Float32, parameters_[i].working.sizes(),
                                std::shared_ptr<std::byte>(at, [](std::byte*) {})));  // accumulated_'s memory
  }
  adds = accumulating_;
  accumulating_ = true;
  return sums;
}

void WeightPolicy::flush(float scale) {
  ONNXTRAIN_CHECK(accumulating_, "gpipe flush without accumulated gradients");
  // In host memory the update multiplies by `scale` as it reads the sum: one pass over it less.
  const bool in_step = memory_.scales_in_step();
  if (scale != 1.0f && !in_step) memory_.scale(accumulated_.data(), accumulated_.size, scale);
  std::vector<const float*> grads;
  for (size_t i = 0; i < parameters_.size(); ++i) grads.push_back(accumulated_.data() + offsets_[i]);
  step_with(grads, in_step ? scale : 1.0f);
  accumulating_ = false;
}

void WeightPolicy::reduce_accumulated(const std::function<void(std::span<float>)>& reduce) {
  ONNXTRAIN_CHECK(accumulating_, "reduce_accumulated without accumulated gradients");
  if (!memory_.on_device()) {
    reduce(accumulated_.host);
    return;
  }
  std::vector<float> host(accumulated_.size);
  memory_.download(host, accumulated_.data());
  reduce(host);
  memory_.upload(accumulated_.data(), host);
}

void WeightPolicy::predict_stashed() {
  ONNXTRAIN_CHECK(weights_ == WeightHandling::stash && !vertical_sync_,
                  "weight policy: predicted stashes need a stashing strategy without vertical sync");
  predict_stashed_ = true;
  memory_.enable_prediction(optimizer_);
}

// SpecTrain: predictions are scored against the version they aimed at when the stage reaches it.
void WeightPolicy::score_predictions() {
  const int64_t now = version();
  std::vector<float> w;  // W_now on the host, fetched once if some prediction is due
  std::erase_if(pending_, [&](const Prediction& p) {
    if (p.target > now) return false;
    if (p.target < now) {
      ++stats_.dropped_predictions;
      return true;
    }
    if (w.empty()) w = master();
    double num = 0, den = 0;
    for (size_t e = 0; e < w.size(); ++e) {
      const double a = static_cast<double>(p.predicted[e]) - w[e];
      const double b = static_cast<double>(p.unpredicted[e]) - w[e];
      num += a * a;
      den += b * b;
    }
    if (den > 0) {
      ++stats_.predictions;
      stats_.prediction_error += std::sqrt(num) / std::sqrt(den);
    } else {
      ++stats_.dropped_predictions;
    }
    return true;
  });
}

void WeightPolicy::sync_working() {
  if (working_version_ != version()) write_working(master_);
  working_version_ = version();
  memory_.sync_working_to_host();
}

void WeightPolicy::restore(const std::map<std::string, Tensor>& values,
                           const std::map<std::string, Tensor>& optimizer_state,
                           const std::map<std::string, Tensor>& predictor_state) {
  materialize_stashes();
  std::map<std::string, Tensor> mine;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const std::string& name = parameters_[i].name;
    auto it = values.find(name);
    if (it == values.end() || it->second.dtype() != DType::Float32 ||
        it->second.numel() != static_cast<int64_t>(sizes_[i]))
      throw Error("the saved state has no float32 value of " + std::to_string(sizes_[i]) + " elements for '" + name +
                  "'");
    memory_.upload(master_.data() + offsets_[i], it->second.data<float>());
    for (auto s = optimizer_state.lower_bound(name + "/");
         s != optimizer_state.end() && s->first.rfind(name + "/", 0) == 0; ++s)
      mine.insert(*s);
  }
  if (auto g = optimizer_state.find("global_step"); g != optimizer_state.end()) mine.insert(*g);
  optimizer_.load_state(mine);
  memory_.state_loaded();
  std::vector<std::pair<std::string, size_t>> sized;
  for (size_t i = 0; i < parameters_.size(); ++i) sized.emplace_back(parameters_[i].name, sizes_[i]);
  memory_.load_prediction_state(predictor_state, sized);
  write_working(master_);
  working_version_ = version();
  memory_.sync_working_to_host();
  pending_.clear();
  history_.clear();
}

void WeightPolicy::end_run() {
  stats_.dropped_predictions += static_cast<int64_t>(pending_.size());
  pending_.clear();
  history_.clear();
}

int64_t WeightPolicy::stash_bytes() const {
  int64_t bytes = 0;
  for (const auto& [id, stash] : stashes_) bytes += static_cast<int64_t>(stash.weights.size * sizeof(float));
  for (const auto& [v, w] : history_) bytes += static_cast<int64_t>(w.size * sizeof(float));
  return bytes;
}

void WeightPolicy::note_stash() { stats_.peak_stash_bytes = std::max(stats_.peak_stash_bytes, stash_bytes()); }

int64_t WeightPolicy::optimizer_state_bytes() const {
  int64_t bytes = 0;
  for (const auto& [name, s] : optimizer_.states())
    for (const auto& [n, t] : s.tensors) bytes += static_cast<int64_t>(t.nbytes());
  return bytes;
}

}  // namespace onnxtrain
