// The epoch loop of `onnxtrain train` for trainers that take many mini-batches per call (pipelines,
// data-parallel replicas, central storage, the parameter server): progress, --metrics, validation,
// checkpoints at chunk boundaries, the test pass and the written model. A template over the trainer
// (train(count, next, on_loss), evaluate, trained_initializers), instantiated in train_pipeline.cc and
// train_replicated.cc.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>

#include "frontend/data_loader.h"
#include "frontend/model_writer.h"
#include "graph/error.h"
#include "tools/train_options.h"

namespace onnxtrain::cli {

// The last step a process has seen finish (its SIGTERM message names it; train_pipeline.cc).
inline std::atomic<int64_t> g_last_step{0};

// The epochs of a run with a trainer that takes many mini-batches per call (PipelineTrainer,
// DataParallelTrainer): progress, metrics, validation, the test pass and the written model.
// What this process does in a run over several processes (one process: everything).
struct RunRole {
  bool prints_progress = true;  // steps and losses (the process that has the losses)
  bool leads = true;            // evaluates, prints results, writes the model
  // Called by every process before an evaluation and before the model is written; returns the whole
  // model on the leading process (a collective when the model is spread over processes).
  std::function<std::map<std::string, Tensor>()> sync_model;
  // Called after every `checkpoint_every` steps with the steps done.
  std::function<void(int64_t steps_done)> checkpoint;
  // Extra fields of a step's --metrics line (the push's staleness for ps).
  std::function<void(int64_t mini_batch, nlohmann::json& line)> step_fields;
  // The strategy's report as JSON, written to --metrics as {"report": ...} after the last step (per stage
  // or replica timing, bubble, memory, staleness: what `onnxtrain bench` reads).
  std::function<nlohmann::json()> report;
  int64_t first_step = 0;  // steps already done (a resumed run)
};

template <typename MultiBatchTrainer>
int run_epochs(const TrainOptions& o, MultiBatchTrainer& trainer, DataLoader& loader, const Dataset& train,
               const std::optional<Dataset>& test, int64_t per_epoch, const std::function<void()>& print_report, const RunRole& role) {
  std::ofstream metrics;
  if (!o.metrics.empty() && role.prints_progress) {  // one writer per file across processes
    metrics.open(o.metrics, std::ios::trunc);
    if (!metrics) throw Error(o.metrics + ": cannot write the metrics file");
  }
  const int64_t total_steps = per_epoch * o.epochs;
  const bool terminal = ::isatty(STDERR_FILENO);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::mutex print;  // losses arrive on the last stage's thread
  int64_t done = role.first_step;
  for (int64_t epoch = role.first_step / per_epoch; epoch < o.epochs; ++epoch) {
    // Chunks of --checkpoint-every steps (else the whole epoch), each followed by a checkpoint.
    for (int64_t at = epoch == role.first_step / per_epoch ? role.first_step % per_epoch : 0; at < per_epoch;) {
    const int64_t chunk = o.checkpoint_every > 0 && role.checkpoint
                              ? std::min(per_epoch - at, o.checkpoint_every - (epoch * per_epoch + at) % o.checkpoint_every)
                              : per_epoch - at;
    loader.seek(epoch, at);
    trainer.train(
        chunk, [&] { Batch b = loader.next(); return std::pair(b.x, b.y); },
        [&](int64_t mini_batch, float loss) {
          std::lock_guard<std::mutex> lock(print);
          const int64_t step = mini_batch + 1;
          done = step;
          g_last_step = step;
          check_finite_loss(loss, step);  // thrown on the loss's thread: the strategy stops every worker
          if (!role.prints_progress) return;
          const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
          const double samples_per_s = static_cast<double>((step - role.first_step) * o.batch) / std::max(elapsed, 1e-9);
          const double eta = elapsed / static_cast<double>(std::max<int64_t>(1, step - role.first_step)) *
                             static_cast<double>(total_steps - step);
          if (metrics.is_open()) {
            nlohmann::json line{{"step", step},   {"epoch", epoch},        {"loss", loss},
                                 {"time_s", elapsed}, {"samples_per_s", samples_per_s}};
            if (role.step_fields) role.step_fields(mini_batch, line);
            metrics << line.dump() << "\n";
          }
          if (terminal) {
            std::fprintf(stderr, "\r\033[K%s step %lld/%lld  epoch %lld/%lld  loss %.4f  %.0f samples/s  ETA %s",
                         progress_bar(static_cast<double>(step) / static_cast<double>(total_steps)).c_str(),
                         static_cast<long long>(step), static_cast<long long>(total_steps),
                         static_cast<long long>(epoch + 1), static_cast<long long>(o.epochs), loss, samples_per_s,
                         format_duration(eta).c_str());
          } else if (step == 1 || step % o.log_every == 0 || step == total_steps) {
            std::fprintf(stderr, "step %lld/%lld epoch %lld loss %.4f %.0f samples/s ETA %s\n", static_cast<long long>(step),
                         static_cast<long long>(total_steps), static_cast<long long>(epoch + 1), loss, samples_per_s,
                         format_duration(eta).c_str());
          }
        });
    at += chunk;
    done = epoch * per_epoch + at;
    if (role.checkpoint && (o.checkpoint_every > 0 ? done % o.checkpoint_every == 0 : false)) role.checkpoint(done);
    }
    if (terminal && role.prints_progress) std::fprintf(stderr, "\n");
    const Dataset& val = loader.validation();
    if (val.size() > 0 && role.sync_model) role.sync_model();
    if (val.size() > 0 && role.leads) {
      const Trainer::Evaluation e = trainer.evaluate(val.inputs, val.labels, std::max<int64_t>(o.batch, 256));
      std::printf("epoch %lld: validation %s\n", static_cast<long long>(epoch + 1), evaluation_text(e, val).c_str());
      std::fflush(stdout);
      check_finite_evaluation(e.loss, "validation");
      nlohmann::json line{{"epoch", epoch}};
      add_evaluation_fields(line, "val", e, val);
      if (metrics.is_open()) metrics << line.dump() << "\n";
    }
  }
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  print_report();
  if (metrics.is_open() && role.report) metrics << nlohmann::json{{"report", role.report()}}.dump() << "\n";
  const std::map<std::string, Tensor> model = role.sync_model ? role.sync_model() : trainer.trained_initializers();
  if (!role.leads) return 0;
  if (test) {
    const Trainer::Evaluation e = trainer.evaluate(test->inputs, test->labels, std::max<int64_t>(o.batch, 256));
    std::printf("final: test %s\n", evaluation_text(e, *test).c_str());
    check_finite_evaluation(e.loss, "test");
    nlohmann::json line;
    add_evaluation_fields(line, "test", e, *test);
    if (metrics.is_open()) metrics << line.dump() << "\n";
  }
  if (metrics.is_open()) metrics.flush();
  check_finite_model(model);
  write_trained_model(o.model, o.output, model, model_write_options(o, train));
  std::printf("trained %lld steps in %.1f s; wrote %s\n", static_cast<long long>(done), seconds, o.output.c_str());
  return 0;
}

}  // namespace onnxtrain::cli
