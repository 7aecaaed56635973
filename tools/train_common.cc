// Helpers shared by the one-device and the pipeline paths of `onnxtrain train`.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "kernels/cuda/cuda_runtime.h"
#include "kernels/cuda/device_query.h"
#include "tools/train_options.h"

namespace onnxtrain::cli {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

// "[#######.............]" for a fraction done in [0, 1].
std::string progress_bar(double done) {
  constexpr int kWidth = 20;
  const int filled = std::clamp(static_cast<int>(done * kWidth), 0, kWidth);
  return "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
}

TrainerOptions trainer_options(const TrainOptions& o, int64_t total_steps, Device device) {
  TrainerOptions t;
  t.loss = parse_loss_spec(o.loss);
  apply_optimizer_name(o.optimizer, t.optimizer);
  t.optimizer.weight_decay = o.weight_decay;
  if (o.momentum_given || o.optimizer == "momentum" || o.optimizer == "nesterov") {
    if (t.optimizer.kind == OptimizerKind::sgd) t.optimizer.momentum = o.momentum;
  }
  t.schedule = {.kind = lr_schedule_kind_from_name(o.schedule), .base_lr = o.lr,
                .step_size = std::max<int64_t>(1, total_steps / 3),
                .t_max = std::max<int64_t>(1, total_steps - o.warmup_steps), .warmup_steps = o.warmup_steps};
  t.kernels = o.kernels;
  t.device = device;
  t.seed = o.seed;
  t.running_variance = running_variance_from_name(o.running_variance);
  return t;
}

Device training_device(const TrainOptions& o, int devices, int local_rank, const std::string& what) {
  if (o.device == "cpu") return Device::cpu();
  int first = 0;
  if (o.device != "cuda") {
    const std::string index = o.device.rfind("cuda:", 0) == 0 ? o.device.substr(5) : "";
    if (index.empty() || index.find_first_not_of("0123456789") != std::string::npos || index.size() > 3) {
      throw Error("--device " + o.device + ": expected cpu, cuda or cuda:N");
    }
    first = std::stoi(index);
  }
  first += local_rank;
  const int visible = cuda::device_count();
  if (visible == 0) {
    throw Error("--device " + o.device + ": no CUDA device is visible (" + cuda::query_devices().unavailable_reason + ")");
  }
  if (first + devices > visible) {
    const std::string needed = devices == 1 ? "cuda:" + std::to_string(first)
                                            : "cuda:" + std::to_string(first) + "..cuda:" + std::to_string(first + devices - 1);
    throw Error("--device " + o.device + (what.empty() ? "" : " with " + what) + " needs " + needed + ", but " +
                std::to_string(visible) + " CUDA device" + (visible == 1 ? " is" : "s are") +
                " visible (one device per stage or replica; set CUDA_VISIBLE_DEVICES or use fewer)");
  }
  return Device::cuda(first);
}

// --test-data: "" = the training source's own test split where it has one; "none" = no test pass.
std::string test_spec(const TrainOptions& o) {
  if (o.test_data == "none") return "";
  if (!o.test_data.empty()) return o.test_data;
  for (const char* source : {"fashion-mnist", "mnist:", "cifar10:", "synthetic"}) {
    if (o.data.rfind(source, 0) == 0) return o.data;
  }
  return "";
}

Normalization normalization(const TrainOptions& o) {
  return o.normalize == "none" ? Normalization::None : Normalization::MeanStd;
}

// The options a resumed run must share with the run that wrote the checkpoint. The epoch count may
// grow on resume unless the schedule depends on the total number of steps.
nlohmann::json checkpoint_config(const TrainOptions& o, int64_t total_steps) {
  nlohmann::json c = {{"model", std::filesystem::path(o.model).filename().string()},
                      {"data", o.data},
                      {"batch", o.batch},
                      {"optimizer", o.optimizer},
                      {"lr", o.lr},
                      {"momentum", o.momentum},
                      {"weight_decay", o.weight_decay},
                      {"schedule", o.schedule},
                      {"warmup_steps", o.warmup_steps},
                      {"loss", o.loss},
                      {"seed", o.seed},
                      {"validation", o.validation},
                      {"limit_batches", o.limit_batches},
                      {"running_variance", o.running_variance},
                      {"normalize", o.normalize}};
  if (o.schedule != "constant") c["total_steps"] = total_steps;
  return c;
}

}  // namespace onnxtrain::cli
