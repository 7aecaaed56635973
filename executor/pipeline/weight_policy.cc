#include "executor/pipeline/weight_policy.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "graph/error.h"

namespace onnxtrain {

WeightPolicy::WeightPolicy(PipelineStrategy strategy, bool vertical_sync, std::vector<Parameter> parameters,
                           Optimizer optimizer, bool measure_prediction)
    : strategy_(strategy),
      vertical_sync_(vertical_sync && strategy == PipelineStrategy::pipedream),
      measure_prediction_(measure_prediction),
      parameters_(std::move(parameters)),
      optimizer_(std::move(optimizer)) {
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
  master_.resize(total);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    auto w = parameters_[i].working.data<float>();
    std::copy(w.begin(), w.end(), master_.begin() + static_cast<std::ptrdiff_t>(offsets_[i]));
  }
  working_version_ = version();
}

void WeightPolicy::write_working(std::span<const float> source) {
  ++working_writes_;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    auto w = parameters_[i].working.data<float>();
    const float* src = source.data() + offsets_[i];
    if (w.data() != src) std::memcpy(w.data(), src, sizes_[i] * sizeof(float));
  }
}

// Ŵ = W − s·d per parameter, d = lr·v from the optimizer's own state (lr of the stage's next update).
void WeightPolicy::write_predicted(int64_t s, std::vector<float>* predicted) {
  ++working_writes_;
  const double lr = optimizer_.current_lr();
  const float sf = static_cast<float>(s);
  for (size_t i = 0; i < parameters_.size(); ++i) {
    std::span<const float> w = master(i);
    displacement_.resize(sizes_[i]);
    const auto state = optimizer_.states().find(parameters_[i].name);
    if (state == optimizer_.states().end()) {
      std::fill(displacement_.begin(), displacement_.end(), 0.0f);  // never updated: no direction yet
    } else {
      optimizer_.displacement(state->second, w, lr, displacement_);
    }
    auto out = parameters_[i].working.data<float>();
    for (size_t e = 0; e < w.size(); ++e) out[e] = w[e] - sf * displacement_[e];
  }
  if (predicted) {
    predicted->resize(master_.size());
    for (size_t i = 0; i < parameters_.size(); ++i) {
      auto out = parameters_[i].working.data<float>();
      std::copy(out.begin(), out.end(), predicted->begin() + static_cast<std::ptrdiff_t>(offsets_[i]));
    }
  }
}

// SpecTrain's working weights for a pass with s != 0. The prediction is scored against W_i when the
// stage gets there; when it already holds W_i (or is past it) there is nothing to score.
void WeightPolicy::predict(const Pass& pass) {
  working_version_ = -1;
  if (!measure_prediction_ || pass.mini_batch <= version()) {
    write_predicted(pass.s, nullptr);
    return;
  }
  Prediction p{.target = pass.mini_batch};
  write_predicted(pass.s, &p.predicted);
  p.unpredicted = master_;
  pending_.push_back(std::move(p));
}

std::span<const float> WeightPolicy::version_weights(int64_t v) const {
  if (v == version()) return master_;
  for (const auto& [hv, w] : history_)
    if (hv == v) return w;
  ONNXTRAIN_CHECK(false, "vertical sync: stage lost weight version " + std::to_string(v) + " (now at " +
                             std::to_string(version()) + ")");
  return {};
}

int64_t WeightPolicy::before_forward(const Pass& pass) {
  int64_t read = version();
  switch (strategy_) {
    case PipelineStrategy::naive:
    case PipelineStrategy::gpipe:
      if (working_version_ != version()) write_working(master_);
      working_version_ = version();
      break;
    case PipelineStrategy::pipedream: {
      if (vertical_sync_) {
        // Later forwards ask for versions >= this one (stage 0's versions only grow): older ones go.
        while (!history_.empty() && history_.front().first < pass.sync_version) history_.pop_front();
        read = pass.sync_version;
      }
      std::span<const float> w = version_weights(read);
      if (working_version_ != read) write_working(w);
      working_version_ = read;
      Stash& stash = stashes_[pass.stash_key];
      stash.version = read;
      stash.weights.assign(w.begin(), w.end());
      note_stash();
      break;
    }
    case PipelineStrategy::spectrain:
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
  if (strategy_ == PipelineStrategy::pipedream) {
    auto it = stashes_.find(pass.stash_key);
    ONNXTRAIN_CHECK(it != stashes_.end(),
                    "pipedream: no stashed weights for the backward of mini-batch " + std::to_string(pass.mini_batch));
    read = it->second.version;
    if (working_version_ != read) write_working(it->second.weights);  // the stash is W at that version
    working_version_ = read;
    stashes_.erase(it);
  } else if (strategy_ == PipelineStrategy::spectrain && pass.s != 0) {
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

std::vector<ParamSlot> WeightPolicy::slots(std::span<const std::span<const float>> gradients) {
  ONNXTRAIN_CHECK(gradients.size() == parameters_.size(), "weight policy: one gradient per parameter expected");
  std::vector<ParamSlot> out;
  out.reserve(parameters_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    out.push_back({parameters_[i].name, std::span<float>(master_).subspan(offsets_[i], sizes_[i]), gradients[i]});
  }
  return out;
}

void WeightPolicy::step(std::span<const std::span<const float>> gradients) {
  if (vertical_sync_) {
    history_.emplace_back(version(), master_);  // a later stage-0 version may still name this one
    note_stash();
  }
  optimizer_.step(slots(gradients));
  score_predictions();
}

void WeightPolicy::accumulate(std::span<const std::span<const float>> gradients, float weight) {
  ONNXTRAIN_CHECK(gradients.size() == parameters_.size(), "weight policy: one gradient per parameter expected");
  accumulated_.resize(master_.size());
  for (size_t i = 0; i < parameters_.size(); ++i) {
    ONNXTRAIN_CHECK(gradients[i].size() == sizes_[i], "gradient of '" + parameters_[i].name + "' has the wrong size");
    float* acc = accumulated_.data() + offsets_[i];
    const float* g = gradients[i].data();
    if (!accumulating_) {
      if (weight == 1.0f) {
        std::memcpy(acc, g, sizes_[i] * sizeof(float));
      } else {
        for (size_t e = 0; e < sizes_[i]; ++e) acc[e] = weight * g[e];
      }
    } else if (weight == 1.0f) {
      for (size_t e = 0; e < sizes_[i]; ++e) acc[e] += g[e];
    } else {
      for (size_t e = 0; e < sizes_[i]; ++e) acc[e] += weight * g[e];
    }
  }
  accumulating_ = true;
}

void WeightPolicy::flush(float scale) {
  ONNXTRAIN_CHECK(accumulating_, "gpipe flush without accumulated gradients");
  if (scale != 1.0f)
    for (float& g : accumulated_) g *= scale;
  std::vector<std::span<const float>> grads;
  for (size_t i = 0; i < parameters_.size(); ++i)
    grads.push_back(std::span<const float>(accumulated_).subspan(offsets_[i], sizes_[i]));
  optimizer_.step(slots(grads));
  accumulating_ = false;
  score_predictions();
}

// SpecTrain: predictions for mini-batch i are scored against W_i when the stage reaches it.
void WeightPolicy::score_predictions() {
  const int64_t now = version();
  std::erase_if(pending_, [&](const Prediction& p) {
    if (p.target > now) return false;
    if (p.target < now) {
      ++stats_.dropped_predictions;
      return true;
    }
    double num = 0, den = 0;
    for (size_t e = 0; e < master_.size(); ++e) {
      const double a = static_cast<double>(p.predicted[e]) - master_[e];
      const double b = static_cast<double>(p.unpredicted[e]) - master_[e];
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
}

void WeightPolicy::restore(const std::map<std::string, Tensor>& values,
                           const std::map<std::string, Tensor>& optimizer_state) {
  std::map<std::string, Tensor> mine;
  for (size_t i = 0; i < parameters_.size(); ++i) {
    const std::string& name = parameters_[i].name;
    auto it = values.find(name);
    if (it == values.end() || it->second.dtype() != DType::Float32 || it->second.numel() != static_cast<int64_t>(sizes_[i]))
      throw Error("the saved state has no float32 value of " + std::to_string(sizes_[i]) + " elements for '" + name + "'");
    const auto v = it->second.data<float>();
    std::copy(v.begin(), v.end(), master_.begin() + static_cast<std::ptrdiff_t>(offsets_[i]));
    for (auto s = optimizer_state.lower_bound(name + "/"); s != optimizer_state.end() && s->first.rfind(name + "/", 0) == 0; ++s)
      mine.insert(*s);
  }
  if (auto g = optimizer_state.find("global_step"); g != optimizer_state.end()) mine.insert(*g);
  optimizer_.load_state(mine);
  write_working(master_);
  working_version_ = version();
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
  for (const auto& [key, stash] : stashes_) bytes += static_cast<int64_t>(stash.weights.size() * sizeof(float));
  for (const auto& [v, w] : history_) bytes += static_cast<int64_t>(w.size() * sizeof(float));
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
