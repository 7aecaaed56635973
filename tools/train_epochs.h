// The epoch loop of `onnxtrain train`, one for every strategy: progress, --metrics, validation,
// checkpoints (every --checkpoint-every steps and on SIGINT/SIGTERM), the test pass, the end-of-run report
// and the written model. A template over the trainer (train(count, next, on_loss), evaluate,
// trained_initializers): Trainer for one device (through OneDeviceRun, train_run.cc), PipelineTrainer,
// DataParallelTrainer, CentralStorageTrainer and ParameterServerTrainer.
//
// Trainers that take one mini-batch at a time (one device, dp, central storage) are called step by step,
// so a stop signal is honoured after the step in flight. Pipelines and the parameter server are called
// with chunks of many mini-batches (each fills and drains once): a signal is honoured where the chunk
// ends, at the next --checkpoint-every boundary or the end of the epoch, which is also where the
// uninterrupted run drains, so a resumed run takes the same steps.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>

#include "executor/cuda_run_profile.h"
#include "frontend/data_loader.h"
#include "frontend/model_writer.h"
#include "frontend/tensorboard_events.h"
#include "graph/autodiff/live_conv_taps.h"
#include "graph/error.h"
#include "tools/model_import.h"
#include "tools/train_options.h"

namespace onnxtrain::cli {

// The last step a process has seen finish (its SIGTERM message names it; train_pipeline.cc).
inline std::atomic<int64_t> g_last_step{0};
// The first SIGINT/SIGTERM of a run in one process; 0 while none came.
inline std::atomic<int> g_stop_signal{0};

// While alive, the first SIGINT or SIGTERM asks the loop to checkpoint and stop; the handler then steps
// aside, so a second one ends the process at once.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
};

// --metrics: one JSON object per line, every write checked (a full disk is an Error, not a short file).
// A resumed run appends to the file, a fresh one starts it anew. Closed (not opened) when `path` is "".
// --tensorboard DIR: the same figures as scalars in a TensorBoard event file (frontend/tensorboard_events.h):
// a step line's fields as train/loss, train/lr, train/samples_per_s (and ps's staleness) at that step; an
// epoch's val_* and the final test_* fields as val/loss, val/accuracy, test/accuracy, ... at the last step.
class MetricsFile {
 public:
  MetricsFile(const std::string& path, bool append, const std::string& tensorboard_dir = "");
  ~MetricsFile();
  MetricsFile(const MetricsFile&) = delete;
  MetricsFile& operator=(const MetricsFile&) = delete;
  bool is_open() const { return file_ != nullptr || tensorboard_ != nullptr; }
  void write(nlohmann::json line);  // adds wall_time; a no-op when closed

 private:
  void write_scalars(const nlohmann::json& line, double wall_time);
  std::string path_;
  std::FILE* file_ = nullptr;
  std::unique_ptr<TensorBoardEvents> tensorboard_;
  int64_t last_step_ = 0;  // the step of the last step line: where epoch and test figures go
};

// What this process does in a run over several processes (one process: everything).
struct RunRole {
  bool prints_progress = true;  // steps and losses (the process that has the losses)
  bool leads = true;            // evaluates, prints results, writes the model
  // True when the trainer is called one mini-batch at a time (see the top of this file).
  bool step_by_step = false;
  // False across processes: the ranks could not agree where to stop (the launcher's SIGTERM ends them).
  bool stops_on_signal = true;
  // Called by every process before an evaluation and before the model is written; returns the whole
  // model on the leading process (a collective when the model is spread over processes).
  std::function<std::map<std::string, Tensor>()> sync_model;
  // Writes a checkpoint of the state after `steps_done` steps into `dir` and returns its path; null when
  // the strategy writes none.
  std::function<std::string(const std::string& dir, int64_t steps_done)> checkpoint;
  // Extra fields of a step's --metrics line (the push's staleness for ps).
  std::function<void(int64_t mini_batch, nlohmann::json& line)> step_fields;
  // The strategy's report as JSON, written to --metrics as {"report": ...} after the last step (per stage
  // or replica timing, bubble, memory, staleness: what `onnxtrain bench` reads).
  std::function<nlohmann::json()> report;
  // The end of the run on the leading process, before the test pass: the strategy's report, the loss scale.
  std::function<void()> print_report;
  int64_t first_step = 0;  // steps already done (a resumed run)
  // Across processes, a collective every process calls: the leading process's `decision` for all (the early
  // stop of --patience, which only the leader evaluates); null in one process.
  std::function<bool(bool decision, const std::string& what)> leader_decides;
  // Called on the training thread before each call of the trainer (load_adaptive_threads); may be null.
  std::function<void()> between_steps;
};

// Where a stop signal puts its checkpoint: --checkpoint-dir, else OUTPUT.checkpoints.
std::string stop_checkpoint_dir(const TrainOptions& o);
// The message and exit code of a run stopped by a signal after `step` (checkpoint `path`; "" for none).
int report_stop(const TrainOptions& o, int64_t step, const std::string& path);
// One progress line (terminal: redrawn in place) and its --metrics line; samples/s counts batch_rows a step.
void print_step(const TrainOptions& o, int64_t batch_rows, int64_t step, int64_t first_step, int64_t total_steps,
                int64_t epoch, float loss, double lr, double elapsed_s, bool terminal);

// The epoch of the lowest validation loss so far (--patience, --save-best).
struct BestEpoch {
  double loss = std::numeric_limits<double>::infinity();
  int64_t epoch = 0;
  bool improves(double l, int64_t at) {
    if (!(l < loss)) return false;
    loss = l, epoch = at;
    return true;
  }
};

template <typename MultiBatchTrainer>
int run_epochs(const TrainOptions& o, MultiBatchTrainer& trainer, TrainingData& data, const RunRole& role) {
  DataLoader& loader = data.loader;
  const std::optional<Dataset>& test = data.test;
  const int64_t per_epoch = data.per_epoch;
  // One writer per file across processes; a resumed run continues the file.
  MetricsFile metrics(role.prints_progress ? o.metrics : "", o.resume || !o.resume_from.empty(),
                      role.prints_progress ? o.tensorboard : "");
  const int64_t total_steps = data.total_steps;
  const LrSchedule schedule = lr_schedule(o, total_steps);
  const bool terminal = ::isatty(STDERR_FILENO);
  std::optional<StopSignals> signals;
  if (role.stops_on_signal) signals.emplace();
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::mutex print;  // losses arrive on the last stage's thread
  if (role.first_step == 0) check_finite_model(trainer.trained_initializers(), true);
  int64_t done = role.first_step;
  bool stop_announced = false;
  NonFiniteGuard nonfinite(o.on_nonfinite);
  BestEpoch best;  // --patience, --save-best (in a resumed run: since the resume)
  const std::optional<int64_t> fixed = fixed_batch(data.model.graph);
  // In one process a stop signal ends an evaluation pass between its chunks of batches (a validation pass
  // of 54,000 rows took 14 s); nullopt then. Processes of one run stop together at a step instead.
  const bool evaluation_stops = role.stops_on_signal && !role.leader_decides;
  auto evaluate = [&](const Dataset& data, const std::string& split,
                      const std::string& label) -> std::optional<Trainer::Evaluation> {
    // A fixed batch (an export without a dynamic batch axis) runs in batches of its size: rows beyond the
    // last whole batch are not scored.
    const int64_t batch = fixed.value_or(std::max<int64_t>(o.batch, 256));
    const int64_t rows = fixed ? data.size() - data.size() % *fixed : data.size();
    if (rows == 0)
      throw Error(split + ": fewer rows (" + std::to_string(data.size()) + ") than the model's fixed batch");
    const DataInputs inputs = data.model_inputs();
    const int64_t chunk = evaluation_stops ? 16 * batch : rows;
    Trainer::Evaluation e;
    double loss_sum = 0, correct = 0, weights = 0;
    for (int64_t begin = 0; begin < rows; begin += chunk) {
      if (evaluation_stops && g_stop_signal != 0) return std::nullopt;
      const int64_t end = std::min(rows, begin + chunk);
      const Trainer::Evaluation part =
          begin == 0 && end == data.size()
              ? trainer.evaluate(inputs, data.labels, batch)
              : trainer.evaluate(inputs.slice_rows(begin, end), slice_rows(data.labels, begin, end), batch);
      // Means over labels counted (per sample where a loss counts none): weighted back into sums.
      const auto weight = static_cast<double>(part.labels_counted > 0 ? part.labels_counted : part.samples);
      loss_sum += part.loss * weight, correct += part.accuracy * weight, weights += weight;
      e.samples += part.samples, e.labels_counted += part.labels_counted;
    }
    e.loss = loss_sum / std::max(weights, 1e-300);
    e.accuracy = correct / std::max(weights, 1e-300);
    std::printf("%s: %s %s", label.c_str(), split.c_str(), evaluation_text(e, data).c_str());
    if (fixed)
      std::printf(" (the model's batch is fixed at %lld: %lld of %lld rows scored)", static_cast<long long>(*fixed),
                  static_cast<long long>(rows), static_cast<long long>(data.size()));
    std::printf("\n");
    std::fflush(stdout);
    check_finite_evaluation(e.loss, split);
    return e;
  };
  // A signal that ended an evaluation: the checkpoint and the exit code of a stop between steps.
  auto stop_in_evaluation = [&] {
    if (terminal && role.prints_progress) std::fprintf(stderr, "\n");
    return report_stop(o, done, role.checkpoint ? role.checkpoint(stop_checkpoint_dir(o), done) : "");
  };
  for (int64_t epoch = role.first_step / per_epoch; epoch < o.epochs; ++epoch) {
    for (int64_t at = epoch == role.first_step / per_epoch ? role.first_step % per_epoch : 0; at < per_epoch;) {
      if (g_stop_signal != 0 && role.stops_on_signal) {
        if (terminal && role.prints_progress) std::fprintf(stderr, "\n");
        return report_stop(o, done, role.checkpoint ? role.checkpoint(stop_checkpoint_dir(o), done) : "");
      }
      // Up to the next --checkpoint-every boundary, else to the end of the epoch.
      int64_t chunk = o.checkpoint_every > 0 && role.checkpoint
                          ? std::min(per_epoch - at, o.checkpoint_every - (epoch * per_epoch + at) % o.checkpoint_every)
                          : per_epoch - at;
      if (role.step_by_step) chunk = 1;
      loader.seek(epoch, at);
      if (role.between_steps) role.between_steps();
      trainer.train(
          chunk,
          [&] {
            HostPhaseTimer phase("the next batch (data loader)");
            Batch b = loader.next();
            return std::pair(b.inputs(), b.y);
          },
          [&](int64_t mini_batch, float loss) {
            HostPhaseTimer phase("progress and metrics");
            std::lock_guard<std::mutex> lock(print);
            const int64_t step = mini_batch + 1;
            g_last_step = step;
            nonfinite.check(loss, step);  // thrown on the loss's thread: the strategy stops every worker
            if (!role.prints_progress) return;
            if (g_stop_signal != 0 && role.stops_on_signal && chunk > 1 && !stop_announced) {
              stop_announced = true;
              std::fprintf(stderr,
                           "\n%s: stopping after step %lld, where the pipeline drains (again: stop at once, "
                           "without a checkpoint)\n",
                           strsignal(g_stop_signal.load()), static_cast<long long>(epoch * per_epoch + at + chunk));
            }
            const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
            print_step(o, data.batch_rows, step, role.first_step, total_steps, epoch, loss, schedule.lr_at(mini_batch),
                       elapsed, terminal);
            nlohmann::json line{{"step", step},
                                {"epoch", epoch + 1},
                                {"loss", loss},
                                {"lr", schedule.lr_at(mini_batch)},
                                {"time_s", elapsed},
                                {"samples_per_s", static_cast<double>((step - role.first_step) * data.batch_rows) /
                                                      std::max(elapsed, 1e-9)}};
            if (role.step_fields) role.step_fields(mini_batch, line);
            metrics.write(line);
          });
      at += chunk;
      done = epoch * per_epoch + at;
      if (role.checkpoint && o.checkpoint_every > 0 && done % o.checkpoint_every == 0)
        role.checkpoint(o.checkpoint_dir, done);
    }
    if (terminal && role.prints_progress) std::fprintf(stderr, "\n");
    const Dataset& val = loader.validation();
    // Without held-out rows the test split shows the progress (not after the last epoch: the final pass does).
    const Dataset* progress = val.size() > 0 ? &val : test && epoch + 1 < o.epochs ? &*test : nullptr;
    if (!progress) continue;
    const std::map<std::string, Tensor> synced = role.sync_model ? role.sync_model() : std::map<std::string, Tensor>{};
    // The leading process evaluates; it alone decides an early stop (--patience), and tells the others.
    bool interrupted = false;
    auto validate = [&] {
      const std::optional<Trainer::Evaluation> evaluation =
          evaluate(*progress, progress == &val ? "validation" : "test", "epoch " + std::to_string(epoch + 1));
      interrupted = !evaluation;
      if (interrupted || progress != &val) return false;
      const Trainer::Evaluation& e = *evaluation;
      nlohmann::json line{{"epoch", epoch + 1}};
      add_evaluation_fields(line, "val", e, val);
      metrics.write(line);
      if (best.improves(e.loss, epoch + 1) && !o.save_best.empty()) {
        const std::map<std::string, Tensor> model = role.sync_model ? synced : trainer.trained_initializers();
        check_finite_model(model);
        write_trained_model(o.model, o.save_best, with_full_conv_weights(data.model.graph, model),
                            model_write_options(o, data.model.graph, data.train));
        std::printf("epoch %lld: the lowest validation loss so far; wrote %s\n", static_cast<long long>(epoch + 1),
                    o.save_best.c_str());
      }
      if (o.patience <= 0 || epoch + 1 - best.epoch < o.patience) return false;
      std::printf("early stop after epoch %lld: no lower validation loss for %lld epoch%s (best %.4f, epoch %lld)\n",
                  static_cast<long long>(epoch + 1), static_cast<long long>(o.patience), o.patience == 1 ? "" : "s",
                  best.loss, static_cast<long long>(best.epoch));
      return true;
    };
    bool stop = role.leads && validate();
    if (interrupted) return stop_in_evaluation();
    if (o.patience > 0 && role.leader_decides)
      stop = role.leader_decides(stop, "early stop after epoch " + std::to_string(epoch + 1));
    if (stop) break;
  }
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  if (role.leads && role.print_report) role.print_report();
  if (role.report && metrics.is_open()) metrics.write(nlohmann::json{{"report", role.report()}});
  // What the training steps kept for their next runs is not needed any more: the evaluation and the
  // model's writing (its file is read again) start from that memory instead of adding to it.
  if constexpr (requires { trainer.release_buffers(); }) trainer.release_buffers();
  const std::map<std::string, Tensor> model = role.sync_model ? role.sync_model() : trainer.trained_initializers();
  if (!role.leads) return 0;
  if (test) {
    const std::optional<Trainer::Evaluation> e = evaluate(*test, "test", "final");
    if (!e) return stop_in_evaluation();
    nlohmann::json line;
    add_evaluation_fields(line, "test", *e, *test);
    metrics.write(line);
  }
  check_finite_model(model);
  write_trained_model(o.model, o.output, with_full_conv_weights(data.model.graph, model),
                      model_write_options(o, data.model.graph, data.train));
  write_run_config(o, data.train);
  std::printf("trained %lld steps in %.1f s; wrote %s\n", static_cast<long long>(done - role.first_step), seconds,
              o.output.c_str());
  return 0;
}

}  // namespace onnxtrain::cli
