// Helpers shared by the one-device and the pipeline paths of `onnxtrain train`.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <sstream>

#include "executor/host_memory.h"
#include "graph/autodiff/live_conv_taps.h"
#include "graph/autodiff/tap_major_conv_weights.h"
#include "graph/cpu_budget.h"
#include "graph/cpu_contention.h"
#include "graph/load_adaptive_threads.h"
#include "graph/mixed_precision.h"
#include "kernels/cuda/cuda_runtime.h"
#include "tools/cli_choices.h"
#include "tools/commands.h"
#include "tools/device_option.h"
#include "tools/export_pitfalls.h"
#include "tools/init_from.h"
#include "tools/model_import.h"
#include "tools/text_file.h"
#include "tools/train_epochs.h"
#include "tools/train_options.h"

namespace onnxtrain::cli {

void check_finite_loss(float loss, int64_t step) {
  if (std::isfinite(loss)) return;
  throw Error("the loss became " + std::string(std::isnan(loss) ? "NaN" : "infinite") + " at step " +
              std::to_string(step) + ": stopped, nothing written (lower --lr, or check the data for NaN/inf values; " +
              "checkpoints already written are kept)");
}

void NonFiniteGuard::check(float loss, int64_t step) {
  if (!skip_) return check_finite_loss(loss, step);
  if (std::isfinite(loss)) {
    in_a_row_ = 0;
    return;
  }
  constexpr int64_t kMostInARow = 10;
  if (++in_a_row_ >= kMostInARow)
    throw Error("the loss was NaN or infinite at " + std::to_string(kMostInARow) + " steps in a row (the last: step " +
                std::to_string(step) +
                "): stopped, nothing written (lower --lr; checkpoints already written are kept)");
  std::fprintf(stderr, "step %lld: the loss is %s; the step is skipped (--on-nonfinite skip)\n",
               static_cast<long long>(step), std::isnan(loss) ? "NaN" : "infinite");
}

void check_finite_evaluation(double loss, const std::string& split) {
  if (std::isfinite(loss)) return;
  throw Error("the " + split + " loss is " + (std::isnan(loss) ? "NaN" : "infinite") +
              ": the trained weights diverged (their outputs overflow), so the model is not written (lower --lr, or "
              "check the data for NaN/inf values; checkpoints already written are kept)");
}

void check_finite_model(const std::map<std::string, Tensor>& model, bool before_training) {
  for (const auto& [name, t] : model) {
    if (!is_floating(t.dtype())) continue;
    const std::vector<double> values = t.to_double();
    const auto bad = std::count_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); });
    if (bad == 0) continue;
    const std::string count = std::to_string(bad) + " of " + std::to_string(values.size());
    if (before_training)
      throw Error("the model's initial '" + name + "' holds " + count +
                  " values that are NaN or infinite: it cannot train (the file is damaged, or the export went wrong)");
    throw Error("the trained model is not written: '" + name + "' holds " + count +
                " values that are NaN or infinite (the training diverged: lower --lr, or check the data)");
  }
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else
    std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

// "[#######.............]" for a fraction done in [0, 1].
std::string progress_bar(double done) {
  constexpr int kWidth = 20;
  const int filled = std::clamp(static_cast<int>(done * kWidth), 0, kWidth);
  return "[" + std::string(filled, '#') + std::string(kWidth - filled, '.') + "]";
}

namespace {
// A signal after the first stops at once, without a checkpoint, with the exit code of a death by that
// signal (128 + it), after saying so: with the default action (as before) the run vanished without a word.
// Only async-signal-safe calls: write and _exit.
extern "C" void stop_at_once(int signal) {
  static constexpr char kInterrupt[] = "\nonnxtrain: SIGINT again: stopped at once, without a checkpoint\n";
  static constexpr char kTerminate[] =
      "\nonnxtrain: SIGTERM after a stop was asked: stopped at once, without a checkpoint\n";
  const bool interrupt = signal == SIGINT;
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, interrupt ? kInterrupt : kTerminate,
                                                   interrupt ? sizeof kInterrupt - 1 : sizeof kTerminate - 1);
  ::_exit(128 + signal);
}

void request_stop(int signal) {
  // Two signals may reach two threads at once, both before either handler is replaced: the second sees
  // the first's mark.
  if (g_stop_signal.exchange(signal) != 0) stop_at_once(signal);
  std::signal(SIGINT, stop_at_once);
  std::signal(SIGTERM, stop_at_once);
}
}  // namespace

StopSignals::StopSignals() {
  g_stop_signal = 0;
  std::signal(SIGINT, request_stop);
  std::signal(SIGTERM, request_stop);
}

StopSignals::~StopSignals() {
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
}

MetricsFile::MetricsFile(const std::string& path, bool append, const std::string& tensorboard_dir) : path_(path) {
  if (!tensorboard_dir.empty()) tensorboard_ = std::make_unique<TensorBoardEvents>(tensorboard_dir);
  if (path.empty()) return;
  file_ = std::fopen(path.c_str(), append ? "a" : "w");
  if (!file_) throw Error(path + ": cannot write the metrics file: " + std::strerror(errno));
}

MetricsFile::~MetricsFile() {
  if (file_) std::fclose(file_);
}

// Flushed line by line: a run that stops (or is killed) keeps every line it printed, and a full disk is
// reported at the step that met it.
void MetricsFile::write(nlohmann::json line) {
  // TensorBoard's wall_time: seconds since the Unix epoch, so lines of several runs and processes align.
  const double wall_time = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  if (tensorboard_) write_scalars(line, wall_time);
  if (!file_) return;
  line["wall_time"] = wall_time;
  const std::string text = line.dump() + "\n";
  if (std::fwrite(text.data(), 1, text.size(), file_) != text.size() || std::fflush(file_) != 0)
    throw Error(path_ + ": writing the metrics file failed: " + std::strerror(errno));
}

void MetricsFile::write_scalars(const nlohmann::json& line, double wall_time) {
  if (line.contains("report")) return;  // per-stage tables, not curves
  const bool step_line = line.contains("step");
  if (step_line) last_step_ = line["step"].get<int64_t>();
  for (const auto& [key, value] : line.items()) {
    if (!value.is_number() || key == "step" || key == "epoch" || key == "time_s") continue;
    std::string tag = "train/" + key;
    if (!step_line) {
      const size_t split = key.find('_');  // val_loss -> val/loss, test_accuracy -> test/accuracy
      if (split == std::string::npos) continue;
      tag = key.substr(0, split) + "/" + key.substr(split + 1);
    }
    tensorboard_->scalar(tag, value.get<double>(), last_step_, wall_time);
  }
}

std::string stop_checkpoint_dir(const TrainOptions& o) {
  return o.checkpoint_dir.empty() ? o.output + ".checkpoints" : o.checkpoint_dir;
}

int report_stop(const TrainOptions& o, int64_t step, const std::string& path) {
  const char* signal = strsignal(g_stop_signal.load());
  if (path.empty()) {
    std::fprintf(
        stderr, "%s: stopped after step %lld; --strategy %s%s writes no checkpoints yet, so nothing was saved\n",
        signal, static_cast<long long>(step), o.strategy.c_str(), o.central_storage ? " --central-storage" : "");
  } else {
    std::fprintf(stderr,
                 "%s: stopped after step %lld; checkpoint %s. Continue with the same command and "
                 "--checkpoint-dir %s --resume\n",
                 signal, static_cast<long long>(step), path.c_str(), stop_checkpoint_dir(o).c_str());
  }
  return 130;
}

void print_step(const TrainOptions& o, int64_t batch_rows, int64_t step, int64_t first_step, int64_t total_steps,
                int64_t epoch, float loss, double lr, double elapsed_s, bool terminal) {
  const double samples_per_s = static_cast<double>((step - first_step) * batch_rows) / std::max(elapsed_s, 1e-9);
  const double eta = elapsed_s / static_cast<double>(std::max<int64_t>(1, step - first_step)) *
                     static_cast<double>(total_steps - step);
  if (terminal) {
    std::fprintf(stderr, "\r\033[K%s step %lld/%lld  epoch %lld/%lld  loss %.4f  %.0f samples/s  ETA %s",
                 progress_bar(static_cast<double>(step) / static_cast<double>(total_steps)).c_str(),
                 static_cast<long long>(step), static_cast<long long>(total_steps), static_cast<long long>(epoch + 1),
                 static_cast<long long>(o.epochs), loss, samples_per_s, format_duration(eta).c_str());
  } else if (step == first_step + 1 || step % o.log_every == 0 || step == total_steps) {
    std::fprintf(stderr, "step %lld/%lld epoch %lld loss %.4f lr %.4g %.0f samples/s ETA %s\n",
                 static_cast<long long>(step), static_cast<long long>(total_steps), static_cast<long long>(epoch + 1),
                 loss, lr, samples_per_s, format_duration(eta).c_str());
  }
}

LrSchedule lr_schedule(const TrainOptions& o, int64_t total_steps) {
  return {.kind = lr_schedule_kind_from_name(o.schedule),
          .base_lr = o.lr,
          .step_size = std::max<int64_t>(1, total_steps / 3),
          .t_max = std::max<int64_t>(1, total_steps - o.warmup_steps),
          .warmup_steps = o.warmup_steps};
}

OptimizerConfig optimizer_config(const TrainOptions& o) {
  OptimizerConfig c;
  apply_optimizer_name(o.optimizer, c);
  c.weight_decay = o.weight_decay;
  if (o.momentum_given || o.optimizer == "momentum" || o.optimizer == "nesterov") {
    if (c.kind == OptimizerKind::sgd) c.momentum = o.momentum;
  }
  return c;
}

bool trains_live_conv_taps_only(const TrainOptions& o) { return optimizer_config(o).keeps_untouched_elements(); }
bool trains_with_cpu_rewrites(const TrainOptions& o) { return !o.device.starts_with("cuda"); }

std::string float32_conv_note(const Graph& model, const TrainOptions& o) {
  if (o.precision == "fp32" || !trains_with_cpu_rewrites(o)) return "";
  size_t n = 0;
  for (NodeId id : model.order()) n += conv_stays_float32_on_cpu(model, model.node(id));
  if (n == 0) return "";
  return "; " + std::to_string(n) + " convolution" + (n == 1 ? "" : "s") + " (depthwise, or of fewer than " +
         std::to_string(kHalfConvMinChannels) +
         " input channels) in float32 (their half-precision gradients run several times slower on the CPU)";
}

TrainerOptions trainer_options(const TrainOptions& o, int64_t total_steps, Device device, const Dataset& train) {
  TrainerOptions t;
  t.loss = parse_loss_spec(o.loss);
  t.loss.classes_last = train.per_position_labels();
  t.loss.label_smoothing = o.label_smoothing;
  t.clip_grad_norm = o.clip_grad_norm;
  t.accumulate = o.accumulate;
  t.optimizer = optimizer_config(o);
  t.schedule = lr_schedule(o, total_steps);
  t.kernels = o.kernels;
  t.device = device;
  t.seed = o.seed;
  t.running_variance = running_variance_from_name(o.running_variance);
  t.precision = precision_from_name(o.precision);
  t.skip_nonfinite_steps = o.on_nonfinite == "skip";
  return t;
}

Device training_device(const TrainOptions& o, int devices, int local_rank, const std::string& what) {
  return device_option(o.device, devices, local_rank, what);
}

std::function<Tensor(DType, std::vector<int64_t>)> batch_allocator(const Device& device) {
  if (device.kind != DeviceKind::Cuda) return &recycled_host_tensor;
  return [index = device.index](DType dtype, std::vector<int64_t> sizes) {
    return cuda::pinned_tensor(index, dtype, std::move(sizes));
  };
}

// --test-data: "" = the training source's own test split where it has one; "none" = no test pass.
std::string test_spec(const TrainOptions& o) {
  if (o.test_data == "none") return "";
  if (!o.test_data.empty()) return o.test_data;
  for (const char* source : {"fashion-mnist", "mnist:", "cifar10:", "synthetic"}) {
    if (o.data.rfind(source, 0) == 0) return o.data;
  }
  if (o.data.rfind("imagefolder:", 0) == 0) {  // DIR/train with DIR/val or DIR/test beside it
    const std::string dir = o.data.substr(12);
    if (std::filesystem::is_directory(dir + "/train") &&
        (std::filesystem::is_directory(dir + "/val") || std::filesystem::is_directory(dir + "/test")))
      return o.data;
  }
  return "";
}

const Value& data_input(const Graph& model, const std::string& model_file) {
  if (model.inputs.empty()) throw Error(model_file + ": training needs a model with a data input; it has none");
  return model.value(model.inputs[0]);
}

Dataset load_model_data(const TrainOptions& o, const Graph& model, const std::string& spec, const Dataset* train) {
  data_input(model, o.model);  // Error naming the file when there is none
  DatasetOptions options = data_options_for(model, o.seq_len);
  options.split = train ? "test" : "train";
  options.normalize = normalization(o);
  options.seed = o.seed;
  options.x_key = o.x_key, options.y_key = o.y_key;
  if (train) options.mean = train->mean, options.std = train->std;
  Dataset data = load_dataset(spec, options);
  check_data_fits_model(data, model);
  check_labels_fit_model(data, spec, model, o);
  return data;
}

void bind_model_to_data(ImportedModel& model, const TrainOptions& o, const Dataset& train) {
  std::map<std::string, std::vector<int64_t>> sizes;
  for (const auto& [name, tensor] : train.model_inputs().tensors)
    sizes[name.empty() ? data_input(model.graph, o.model).name : name] = tensor.sizes();
  const SymbolBindings dims = input_dim_bindings(model.graph, sizes);
  if (!dims.empty()) model = import_model(o.model, {.freeze_pattern = o.freeze, .dims = dims});
}

std::optional<Dataset> load_test_data(const TrainOptions& o, const Graph& model, const Dataset& train) {
  const std::string spec = test_spec(o);
  if (spec.empty()) return std::nullopt;
  return load_model_data(o, model, spec, &train);
}

namespace {
// The model's trained parameters by name, in initializer order, and those of them --freeze froze.
struct ModelParameters {
  std::vector<std::string> all, frozen;
};
ModelParameters parameters_of(const Graph& graph) {
  ModelParameters p;
  for (ValueId id : graph.initializers) {
    const Value& v = graph.value(id);
    if (v.role != ValueRole::Parameter) continue;
    p.all.push_back(v.name);
    if (v.frozen) p.frozen.push_back(v.name);
  }
  return p;
}

Dataset load_training_data_and_bind(const TrainOptions& o, ImportedModel& model) {
  // Ops onnxtrain has no kernel or gradient for import (inspect lists them) but cannot train: say so
  // before the data is read, not as a shape error of some node after them.
  if (!model.unsupported_ops.empty()) {
    std::string ops;
    for (const std::string& op : model.unsupported_ops) ops += (ops.empty() ? "" : ", ") + op;
    const std::string& first = model.first_unsupported_node;
    throw Error(o.model + ": onnxtrain cannot train " + ops + " yet" +
                (first.empty() ? "" : " (the first: node '" + first + "')") + "; `onnxtrain inspect " + o.model +
                "` lists what it cannot train");
  }
  // The trainers step float32 weights on float32 losses and gradients (mixed precision casts inside).
  if (const DType input = model.graph.value(model.graph.inputs.at(0)).dtype;
      input == DType::Float16 || input == DType::BFloat16 || input == DType::Float64) {
    throw Error(o.model + " computes in " + std::string(dtype_name(input)) +
                " (its input is): onnxtrain trains float32 models. Export it in float32 (model.float())" +
                (input == DType::Float64 ? std::string(": eval and run take this one as it is")
                                         : " and train with --precision fp16 or bf16 for mixed precision"));
  }
  if (const std::string why = batch_not_on_the_first_axis(o.model, model.graph); !why.empty()) throw Error(why);
  if (const std::optional<int64_t> fixed = fixed_batch(model.graph)) {
    const bool splits = o.strategy == "dp" || o.strategy == "ps" || o.central_storage || o.replicas > 1 ||
                        o.micro_batches > 1 || o.accumulate > 1;
    if (o.batch != *fixed)
      throw Error(fixed_batch_text(o.model, model.graph, "train it with --batch " + std::to_string(*fixed)));
    if (splits) {
      throw Error(fixed_batch_text(o.model, model.graph,
                                   "replicas, micro-batches and --accumulate would each feed it part of a batch"));
    }
  }
  Dataset train = load_model_data(o, model.graph, o.data);
  if (o.bake_normalization && is_integer(train.inputs.dtype())) {
    throw Error(
        "--bake-normalization: the model reads integer token ids, which are never scaled or normalised: "
        "there is nothing to bake");
  }
  bind_model_to_data(model, o, train);
  if (const ModelParameters parameters = parameters_of(model.graph); !o.freeze.empty() && parameters.frozen.empty()) {
    std::string names;
    for (const std::string& name : parameters.all)
      if (names.size() < 200) names += (names.empty() ? "" : ", ") + name;
    throw Error("--freeze '" + o.freeze + "' matches no parameter of " + o.model + " (its parameters: " + names + ")");
  }
  return train;
}
}  // namespace

std::function<void()> load_adaptive_threads(const TrainOptions& o) {
  if (o.device != "cpu" || std::getenv("OMP_NUM_THREADS") != nullptr || omp_get_max_threads() < 2) return {};
  auto contention = std::make_shared<CpuContention>(affinity_cpus());
  auto adapt = std::make_shared<LoadAdaptiveThreads>(omp_get_max_threads());
  return [contention, adapt] {
    const std::optional<double> others = contention->others_busy(0.5);
    if (!others) return;
    const int before = adapt->threads(), threads = adapt->update(*others);
    if (threads == before) return;
    omp_set_num_threads(threads);
    std::fprintf(stderr, "%sthreads: %d of %d (other processes keep %.1f CPUs busy)\n",
                 ::isatty(STDERR_FILENO) ? "\n" : "", threads, adapt->budget(), *others);
  };
}

namespace {

// Convolutions whose one output pixel reads only some of their taps train only those (live_conv_taps.h),
// unless weight decay would change the others: said, since checkpoints name them "<W>.live_taps".
void print_live_conv_taps(const Graph& model, const TrainOptions& o) {
  const std::vector<LiveConvTaps> taps = live_conv_taps(model);
  if (taps.empty()) return;
  const bool one = taps.size() == 1;
  if (!trains_live_conv_taps_only(o)) {
    std::fprintf(stderr,
                 "%zu convolution%s with one output pixel train%s every tap (weight decay changes those "
                 "outside the input too)\n",
                 taps.size(), one ? "" : "s", one ? "s" : "");
    return;
  }
  int64_t live = 0, all = 0;
  for (const LiveConvTaps& t : taps) {
    const Tensor& w = *model.value(*model.find_value(t.weight)).data;
    live += t.elements(w.sizes());
    all += w.numel();
  }
  std::fprintf(stderr,
               "%zu convolution%s with one output pixel train%s only the taps that meet the input: %lld of %lld "
               "weights (the others never change without weight decay; the written model has them all)\n",
               taps.size(), one ? "" : "s", one ? "s" : "", static_cast<long long>(live), static_cast<long long>(all));
}

// Convolutions over small planes train on tap-major weights on the CPU (tap_major_conv_weights.h):
// said, since checkpoints name them "<W>.tap_major".
void print_tap_major_conv_weights(const Graph& model, const TrainOptions& o) {
  const size_t n = tap_major_conv_weights(model).size();
  if (n == 0 || !trains_with_cpu_rewrites(o)) return;
  const std::string precision =
      o.precision == "fp32" ? ""
                            : ", in float32 under --precision " + o.precision +
                                  " (half-precision convolutions over such planes run several times slower on the CPU)";
  std::fprintf(stderr,
               "%zu convolution%s over small planes (2 to 16 output positions) train%s on weights held tap-major, the "
               "layout of their CPU kernels%s (checkpoints name them <W>.tap_major; the written model has the usual "
               "layout)\n",
               n, n == 1 ? "" : "s", n == 1 ? "s" : "", precision.c_str());
}

}  // namespace

void TrainingData::print_data_line(const TrainOptions& o) const {
  if (o.device == "cpu") {
    const char* env = std::getenv("OMP_NUM_THREADS");
    std::fprintf(stderr, "threads: %d (%s)\n", omp_get_max_threads(),
                 env ? ("OMP_NUM_THREADS=" + std::string(env)).c_str()
                     : (cpu_budget().describe() + (o.strategy == "single" && omp_get_max_threads() > 1
                                                       ? "; fewer while other processes keep CPUs busy, unless "
                                                         "OMP_NUM_THREADS is set"
                                                       : ""))
                           .c_str());
  }
  std::fprintf(stderr, "data: %s\n", train.description.c_str());
  if (batch_rows < o.batch) {
    std::fprintf(stderr, "--batch %lld is more than the %lld training samples: each mini-batch is all %lld of them\n",
                 static_cast<long long>(o.batch), static_cast<long long>(batch_rows),
                 static_cast<long long>(batch_rows));
  }
  if (o.warmup_steps > 0 && o.warmup_steps >= total_steps) {  // cosine and step then equal constant (an outside check)
    std::fprintf(stderr,
                 "warning: --warmup-steps %lld is not shorter than the run (%lld step%s): the lr rises the whole run, "
                 "never reaches --lr %g, and --schedule %s never starts\n",
                 static_cast<long long>(o.warmup_steps), static_cast<long long>(total_steps),
                 total_steps == 1 ? "" : "s", o.lr, o.schedule.c_str());
  }
  for (const std::string& line : export_pitfalls(o, model.graph)) std::fprintf(stderr, "%s\n", line.c_str());
  if (!init_line.empty()) std::fprintf(stderr, "%s\n", init_line.c_str());
  print_live_conv_taps(model.graph, o);
  print_tap_major_conv_weights(model.graph, o);
  const ModelParameters parameters = parameters_of(model.graph);
  if (parameters.frozen.empty()) return;
  std::string names;
  for (size_t i = 0; i < parameters.frozen.size() && i < 5; ++i) names += (i == 0 ? "" : ", ") + parameters.frozen[i];
  std::fprintf(stderr, "frozen (--freeze): %zu of %zu parameters, not trained: %s%s\n", parameters.frozen.size(),
               parameters.all.size(), names.c_str(), parameters.frozen.size() > 5 ? ", ..." : "");
}

TrainingData::TrainingData(const TrainOptions& o, const Device& device)
    : model(import_model(o.model, {.freeze_pattern = o.freeze})),
      train(load_training_data_and_bind(o, model)),
      test(load_test_data(o, model.graph, train)),
      loader(train, {.batch = o.batch,
                     .shuffle = true,
                     .seed = o.seed,
                     .drop_last = fixed_batch(model.graph).has_value(),  // a smaller last batch would not fit
                     .validation_fraction = o.validation,
                     .allocate_input = batch_allocator(device),
                     .augment = parse_augment(o.augment)}),
      per_epoch(o.limit_batches > 0 ? std::min(o.limit_batches, loader.batches_per_epoch())
                                    : loader.batches_per_epoch()),
      total_steps(per_epoch * o.epochs),
      batch_rows(std::min(o.batch, std::max<int64_t>(1, loader.train_size()))) {
  if (!o.init_from.empty()) init_line = init_from(model.graph, o.init_from);
}

std::string evaluation_text(const Trainer::Evaluation& e, const Dataset& data) {
  char text[160];
  if (data.per_position_labels()) {
    std::snprintf(text, sizeof text, "loss %.4f, perplexity %.2f, accuracy %.2f%% (%lld samples, %lld tokens)", e.loss,
                  std::exp(e.loss), 100 * e.accuracy, static_cast<long long>(e.samples),
                  static_cast<long long>(e.labels_counted));
  } else {
    std::snprintf(text, sizeof text, "loss %.4f, accuracy %.2f%% (%lld samples)", e.loss, 100 * e.accuracy,
                  static_cast<long long>(e.samples));
  }
  return text;
}

void add_evaluation_fields(nlohmann::json& line, const std::string& prefix, const Trainer::Evaluation& e,
                           const Dataset& data) {
  line[prefix + "_loss"] = e.loss;
  line[prefix + "_accuracy"] = e.accuracy;
  if (data.per_position_labels()) line[prefix + "_perplexity"] = std::exp(e.loss);
}

// Labels above the model's class count fail here, naming the data, not later inside a loss node.
void check_labels_fit_model(const Dataset& data, const std::string& spec, const Graph& model, const TrainOptions& o) {
  if (o.loss != "cross-entropy" && o.loss != "softmax-cross-entropy") return;
  if (model.outputs.empty()) return;
  const Shape& logits = model.value(model.outputs.front()).shape;
  if (!logits.rank_known || logits.rank() < 2) return;
  const Dim& classes = data.per_position_labels() ? logits.dims.back() : logits.dims[1];
  if (classes.is_static() && data.classes > classes.value()) {
    throw Error("the labels of " + spec + " go up to " + std::to_string(data.classes - 1) +
                ", but the model's output '" + model.value(model.outputs.front()).name + "' " + logits.to_string() +
                " scores " + std::to_string(classes.value()) + " classes");
  }
}

Normalization normalization(const TrainOptions& o) {
  return o.normalize == "none" ? Normalization::None : Normalization::MeanStd;
}

ModelWriteOptions model_write_options(const TrainOptions& o, const Graph& model, const Dataset& train) {
  ModelWriteOptions options{.inference_mode = !o.keep_training_mode, .metadata = preprocessing_metadata(train)};
  if (o.bake_normalization) {
    options.bake = InputPreprocessing{.input = data_input(model, o.model).name,
                                      .raw_uint8 = train.raw_dtype == "uint8",
                                      .scale = train.input_scale,
                                      .mean = train.mean,
                                      .std = train.std};
    options.metadata = baked_preprocessing_metadata(options.metadata, *options.bake);
  }
  return options;
}

void write_run_config(const TrainOptions& o, const Dataset& train) {
  if (o.resolved_config.empty()) return;
  const std::time_t now = std::time(nullptr);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::string text = "# onnxtrain " + std::string(kOnnxtrainVersion) + " train, finished " + when +
                     "; again with: onnxtrain train --config " + o.output +
                     ".toml\n# the options given; the others had this version's defaults\n";
  for (const auto& [key, value] : preprocessing_metadata(train)) text += "# " + key + " = " + value + "\n";
  write_text_file(o.output + ".toml", text + o.resolved_config);
}

nlohmann::json checkpoint_export_info(const TrainOptions& o, const Graph& model, const Dataset& train) {
  const ModelWriteOptions w = model_write_options(o, model, train);
  nlohmann::json info{{"model", std::filesystem::absolute(o.model).lexically_normal().string()},
                      {"inference_mode", w.inference_mode},
                      {"metadata", w.metadata}};
  if (w.bake) {
    info["bake"] = {{"input", w.bake->input},
                    {"raw_uint8", w.bake->raw_uint8},
                    {"scale", w.bake->scale},
                    {"mean", w.bake->mean},
                    {"std", w.bake->std}};
  }
  return info;
}

TrainingCheckpoint checkpoint_header(const TrainOptions& o, int64_t step, int64_t per_epoch,
                                     const nlohmann::json& config, const nlohmann::json& export_info) {
  return {.step = step,
          .next_epoch = step / per_epoch,
          .next_batch = step % per_epoch,
          .seed = o.seed,
          .config = config,
          .export_info = export_info};
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
  if (o.seq_len > 0) c["seq_len"] = o.seq_len;
  if (!o.x_key.empty()) c["x_key"] = o.x_key;  // only when given: older checkpoints still resume
  if (!o.freeze.empty()) c["freeze"] = o.freeze;
  if (o.label_smoothing > 0) c["label_smoothing"] = o.label_smoothing;
  if (o.clip_grad_norm > 0) c["clip_grad_norm"] = o.clip_grad_norm;
  if (o.accumulate > 1) c["accumulate"] = o.accumulate;
  if (!o.y_key.empty()) c["y_key"] = o.y_key;
  // Checkpoints from before the stratified split held out other rows (the last ones): they must not resume.
  if (o.validation > 0) c["validation_split"] = "stratified";
  // Only when not fp32, so checkpoints written before --precision existed still resume.
  if (o.precision != "fp32") c["precision"] = o.precision;
  return c;
}

namespace {

// The newest checkpoint of `dir` below `step` that reads back intact; "" when there is none.
std::string newest_intact_checkpoint(const std::string& dir, int64_t below_step) {
  std::vector<CheckpointFile> files = list_checkpoints(dir);
  for (auto it = files.rbegin(); it != files.rend(); ++it) {
    if (it->step >= below_step) continue;
    try {
      read_checkpoint(it->path);
      return it->path;
    } catch (const Error&) {
    }
  }
  return "";
}

// --resume-from an older checkpoint of --checkpoint-dir: the newer ones are renamed NAME.superseded (kept,
// but no longer the newest, which a later --resume would pick).
void set_aside_newer_checkpoints(const std::string& dir, int64_t step) {
  for (const CheckpointFile& f : list_checkpoints(dir)) {
    if (f.step <= step) continue;
    std::filesystem::rename(f.path, f.path + ".superseded");
    std::fprintf(stderr, "renamed %s to %s.superseded (newer than the checkpoint resumed from)\n", f.path.c_str(),
                 f.path.c_str());
  }
}

}  // namespace

int64_t resume_or_refuse(const TrainOptions& o, const Graph& model, const nlohmann::json& config, int rank,
                         const std::function<void(const TrainingCheckpoint&, const std::string&)>& restore) {
  const std::optional<std::string> newest =
      o.checkpoint_dir.empty() ? std::nullopt : latest_checkpoint(o.checkpoint_dir);
  if (!o.resume && o.resume_from.empty()) {
    if (rank == 0 && newest) {
      // Rotation keeps the highest steps: a fresh run would leave the old run's newer checkpoints in place.
      throw Error("--checkpoint-dir " + o.checkpoint_dir + " already holds checkpoints (newest " + *newest +
                  "): add --resume to continue that run, or choose another directory");
    }
    return 0;
  }
  const std::string path = !o.resume_from.empty() ? o.resume_from : newest.value_or("");
  if (path.empty()) throw Error("--resume: no checkpoint in " + o.checkpoint_dir);
  TrainingCheckpoint c;
  try {
    c = read_checkpoint(path);
  } catch (const Error& e) {
    if (!o.resume_from.empty()) throw;
    const std::string intact =
        newest_intact_checkpoint(o.checkpoint_dir, list_checkpoints(o.checkpoint_dir).back().step);
    if (intact.empty())
      throw Error(std::string(e.what()) + " (and no older checkpoint in " + o.checkpoint_dir + " is intact)");
    throw Error(std::string(e.what()) + ". The older checkpoint " + intact + " is intact: continue from it with " +
                "--resume-from " + intact);
  }
  check_checkpoint_config(c, config, path);
  // Written before convolutions with one output pixel trained only their live taps (as the trainers decide).
  if (trains_live_conv_taps_only(o) && keep_live_conv_taps(model, c.tensors, c.optimizer_state) > 0 && rank == 0)
    std::fprintf(stderr, "%s holds whole weights of convolutions that now train only their live taps: took those\n",
                 path.c_str());
  // Tap-major weights as this run trains them: an earlier build's or a GPU run's checkpoint on the CPU, or
  // the other way.
  match_tap_major_conv_weights(model, trains_with_cpu_rewrites(o), c.tensors, c.optimizer_state);
  restore(c, path);
  if (rank == 0) {
    if (!o.resume_from.empty() && !o.checkpoint_dir.empty()) set_aside_newer_checkpoints(o.checkpoint_dir, c.step);
    std::fprintf(stderr, "resumed from %s (step %lld%s)\n", path.c_str(), static_cast<long long>(c.step),
                 c.shards.empty() ? "" : (", " + std::to_string(c.shards.size()) + " shards").c_str());
  }
  return c.step;
}

void check_resumed_step(const TrainingCheckpoint& c, const Trainer& trainer, int64_t per_epoch,
                        const std::string& path) {
  if (c.step != trainer.mini_batches_used() || c.next_epoch * per_epoch + c.next_batch != c.step) {
    throw Error("checkpoint " + path + ": its step " + std::to_string(c.step) + " and data position (epoch " +
                std::to_string(c.next_epoch) + ", batch " + std::to_string(c.next_batch) + ") disagree");
  }
}

LoaderOptions::Augment parse_augment(const std::string& text) {
  LoaderOptions::Augment augment;
  if (text.empty()) return augment;
  std::stringstream items(text);
  for (std::string item; std::getline(items, item, ',');) {
    if (item == "flip") {
      augment.flip = true;
    } else if (item.rfind("crop:", 0) == 0 && item.size() > 5 && item.size() <= 9 &&
               item.find_first_not_of("0123456789", 5) == std::string::npos && std::stoll(item.substr(5)) > 0) {
      augment.crop_padding = std::stoll(item.substr(5));
    } else {
      usage_error("--augment " + text + ": '" + item +
                  "' is not an augmentation; expected crop:P (a random crop with P pixels of padding) and/or flip, "
                  "e.g. --augment crop:4,flip");
    }
  }
  return augment;
}

std::string step_summary(const TrainOptions& o) {
  std::string text;
  if (o.precision == "bf16") text = ", Conv/Gemm/MatMul in bfloat16";
  if (o.precision == "fp16") text = ", Conv/Gemm/MatMul in float16 with dynamic loss scaling";
  if (o.accumulate > 1) text += ", gradients accumulated over " + std::to_string(o.accumulate) + " passes per step";
  return text;
}

void print_nonfinite_skips(const Trainer& trainer) {
  if (trainer.nonfinite_skipped_steps() == 0) return;
  std::fprintf(stderr, "%lld steps skipped for a NaN or infinite loss or gradient (--on-nonfinite skip)\n",
               static_cast<long long>(trainer.nonfinite_skipped_steps()));
}

void print_loss_scale(const LossScaler* scaler) {
  if (!scaler) return;
  std::fprintf(stderr, "loss scale %g; %lld steps skipped for inf/NaN gradients\n", scaler->scale(),
               static_cast<long long>(scaler->skipped_steps()));
}

}  // namespace onnxtrain::cli
