// The body of `onnxtrain train`: data, trainer, the step loop with progress, checkpoints and SIGINT,
// validation each epoch, the test split at the end, the trained model out.
//
// Checkpoints are written after step k when k is a multiple of --checkpoint-every, when SIGINT or
// SIGTERM arrives (then the run stops with exit code 130), and never in between steps. A checkpoint
// holds what the next step depends on: parameters, BN running statistics, optimizer state and step
// (which is also the Dropout run index) and the data position; the shuffle order of an epoch is a pure
// function of (seed, epoch). So a run resumed from the checkpoint of step k takes exactly the steps
// k+1, k+2, ... that the uninterrupted run took, and ends with the same parameters bit for bit (on the
// same machine and thread count: oneDNN picks its kernels by CPU).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "executor/checkpoint.h"
#include "executor/pipeline/schedule.h"
#include "executor/trainer.h"
#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"
#include "frontend/model_writer.h"
#include "frontend/npy.h"
#include "graph/error.h"
#include "kernels/cuda/math_mode.h"
#include "tools/train_options.h"

namespace onnxtrain::cli {
namespace {

std::atomic<int> g_stop_signal{0};

// The first SIGINT/SIGTERM asks the loop to checkpoint and stop; the handler then steps aside, so a
// second one ends the process at once.
void request_stop(int signal) {
  g_stop_signal = signal;
  std::signal(signal, SIG_DFL);
}

struct StopSignals {
  StopSignals() {
    g_stop_signal = 0;
    std::signal(SIGINT, request_stop);
    std::signal(SIGTERM, request_stop);
  }
  ~StopSignals() {
    std::signal(SIGINT, SIG_DFL);
    std::signal(SIGTERM, SIG_DFL);
  }
};

void dump_gradients(Trainer& trainer, const Batch& b, const std::string& dir) {
  std::filesystem::create_directories(dir);
  float loss = 0;
  const std::map<std::string, Tensor> grads = trainer.compute_gradients(b.x, b.y, &loss);
  for (const auto& [name, g] : grads) {
    std::string file = name;
    std::replace(file.begin(), file.end(), '/', '_');  // ONNX names may hold slashes
    write_npy(dir + "/" + file + ".npy", g);
  }
  std::fprintf(stderr, "wrote the gradients of %zu parameters for the first batch (loss %.6f) to %s\n", grads.size(),
               loss, dir.c_str());
}

}  // namespace

int run_training(const TrainOptions& o) {
  if (o.tf32) {
    if (o.device == "cpu") throw Error("--tf32 applies to CUDA kernels: use it with --device cuda");
    cuda::set_allow_tf32(true);  // before any kernel is prepared
  }
  if (!o.trace.empty() && !is_pipeline_strategy(o.strategy)) {
    throw Error("--trace records pipeline stages: use it with --strategy " + pipeline_strategy_names());
  }
  // Pipeline options the other strategies would ignore in silence (the pipeline checks which strategy).
  for (const auto& [given, flag] : {std::pair{o.vertical_sync, "--vertical-sync"}, std::pair{o.deferred_bn, "--deferred-bn"},
                                  std::pair{o.predict, "--predict"}})
    if (given && !is_pipeline_strategy(o.strategy))
      throw Error(std::string(flag) + " is a pipeline option: use it with --strategy " + pipeline_strategy_names());
  if (!o.dump_gradients.empty() && std::filesystem::exists(o.dump_gradients) &&
      !std::filesystem::is_directory(o.dump_gradients))
    throw Error("--dump-gradients " + o.dump_gradients + ": not a directory (the gradients go there as NAME.npy)");
  check_output_path(o.output);  // before any step: a bad -o must not cost the training
  if (o.checkpoint_every > 0 && o.checkpoint_dir.empty())
    throw Error("--checkpoint-every " + std::to_string(o.checkpoint_every) +
                " needs --checkpoint-dir DIR: where to write the checkpoints");
  if (o.central_storage || o.strategy == "ps" || o.ps_predict || o.servers != 1) return run_replicated_training(o);
  if (o.strategy != "single") return run_pipeline_training(o);
  if (o.resume && o.checkpoint_dir.empty()) throw Error("--resume needs --checkpoint-dir: where to find the checkpoint");
  const Device device = training_device(o, 1);  // before the data is made: a missing GPU is reported at once
  ImportedModel model = import_model(o.model);
  Dataset train = load_model_data(o, model.graph, o.data);
  bind_model_to_data(model, o, train);
  // The test split is loaded before training, so that a missing file fails now and not after the run.
  const std::optional<Dataset> test = load_test_data(o, model.graph, train);
  DataLoader loader(train, {.batch = o.batch, .shuffle = true, .seed = o.seed, .drop_last = false,
                            .validation_fraction = o.validation, .allocate_input = batch_allocator(device)});
  const int64_t per_epoch = o.limit_batches > 0 ? std::min(o.limit_batches, loader.batches_per_epoch())
                                                 : loader.batches_per_epoch();
  const int64_t total_steps = per_epoch * o.epochs;
  const TrainerOptions options = trainer_options(o, total_steps, device, train);
  Trainer trainer(model.graph, options);
  const nlohmann::json config = checkpoint_config(o, total_steps);

  int64_t step = 0;
  if (!o.resume && !o.checkpoint_dir.empty() && latest_checkpoint(o.checkpoint_dir)) {
    // Rotation keeps the highest steps: a fresh run would leave the old run's newer checkpoints in place.
    throw Error("--checkpoint-dir " + o.checkpoint_dir + " already holds checkpoints (newest " +
                *latest_checkpoint(o.checkpoint_dir) + "): add --resume to continue that run, or choose another directory");
  }
  if (o.resume) {
    const std::optional<std::string> path = latest_checkpoint(o.checkpoint_dir);
    if (!path) throw Error("--resume: no checkpoint in " + o.checkpoint_dir);
    const TrainingCheckpoint c = read_checkpoint(*path);
    check_checkpoint_config(c, config, *path);
    check_checkpoint_matches(c, trainer.trained_initializers(), *path);
    trainer.restore(c.tensors, c.optimizer_state);
    step = c.step;
    check_resumed_step(c, trainer, per_epoch, *path);
    std::fprintf(stderr, "resumed from %s at step %lld\n", path->c_str(), static_cast<long long>(step));
  }
  auto save_checkpoint = [&](const std::string& dir) {
    TrainingCheckpoint c{.step = step, .next_epoch = step / per_epoch, .next_batch = step % per_epoch,
                         .seed = o.seed, .config = config, .tensors = trainer.trained_initializers(),
                         .optimizer_state = trainer.optimizer().state_tensors()};
    c.optimizer_state.merge(trainer.loss_scaler_state());  // fp16: the scaler, for an exact resume
    return write_checkpoint(dir, c, static_cast<int>(o.keep_checkpoints));
  };

  std::ofstream metrics;
  if (!o.metrics.empty()) {
    metrics.open(o.metrics, o.resume ? std::ios::app : std::ios::trunc);
    if (!metrics) throw Error(o.metrics + ": cannot write the metrics file");
  }
  std::fprintf(stderr, "data: %s\n", train.description.c_str());
  if (o.precision != "fp32") {
    std::fprintf(stderr, "precision %s: Conv, Gemm and MatMul in %s, float32 master weights%s\n", o.precision.c_str(),
                 o.precision == "bf16" ? "bfloat16" : "float16",
                 trainer.loss_scaler() ? ", dynamic loss scaling" : "");
  }
  std::fprintf(stderr, "training %s: %lld epochs x %lld batches of %lld, %s lr %g (%s), loss %s; validation %lld samples%s\n",
               o.model.c_str(), static_cast<long long>(o.epochs), static_cast<long long>(per_epoch),
               static_cast<long long>(o.batch), o.optimizer.c_str(), o.lr, lr_schedule_kind_name(options.schedule.kind),
               o.loss.c_str(), static_cast<long long>(loader.validation().size()),
               trainer.running_stat_nodes() ? (", " + std::to_string(trainer.running_stat_nodes()) +
                                               " BatchNorm nodes with running statistics").c_str() : "");

  auto evaluate_test = [&](const std::string& label) {
    const Trainer::Evaluation e = trainer.evaluate(test->inputs, test->labels, std::max<int64_t>(o.batch, 256));
    std::printf("%s: test %s\n", label.c_str(), evaluation_text(e, *test).c_str());
    std::fflush(stdout);
    check_finite_evaluation(e.loss, "test");
    return e;
  };

  const bool terminal = ::isatty(STDERR_FILENO);
  StopSignals signals;
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  const int64_t first_step = step;
  int64_t samples = 0;
  for (int64_t epoch = step / per_epoch; epoch < o.epochs; ++epoch) {
    loader.seek(epoch, step % per_epoch);
    for (int64_t i = step % per_epoch; i < per_epoch; ++i) {
      Batch b = loader.next();
      if (step == 0 && !o.dump_gradients.empty()) dump_gradients(trainer, b, o.dump_gradients);
      const double lr = trainer.optimizer().current_lr();
      const float loss = trainer.train_step(b.x, b.y);
      ++step;
      samples += b.y.sizes()[0];
      const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
      const double samples_per_s = samples / std::max(elapsed, 1e-9);
      check_finite_loss(loss, step);
      const double eta = elapsed / static_cast<double>(step - first_step) * static_cast<double>(total_steps - step);
      if (metrics.is_open()) {
        metrics << nlohmann::json{{"step", step}, {"epoch", epoch}, {"loss", loss}, {"lr", lr}, {"time_s", elapsed},
                                  {"samples_per_s", samples_per_s}}.dump() << "\n";
      }
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
      if (!o.checkpoint_dir.empty() && o.checkpoint_every > 0 && step % o.checkpoint_every == 0) {
        save_checkpoint(o.checkpoint_dir);
      }
      if (g_stop_signal != 0) {
        if (terminal) std::fprintf(stderr, "\n");
        if (metrics.is_open()) metrics.flush();
        const std::string dir = o.checkpoint_dir.empty() ? o.output + ".checkpoints" : o.checkpoint_dir;
        const std::string path = save_checkpoint(dir);
        std::fprintf(stderr, "%s: stopped after step %lld; checkpoint %s. Continue with the same command and "
                     "--checkpoint-dir %s --resume\n", strsignal(g_stop_signal.load()), static_cast<long long>(step),
                     path.c_str(), dir.c_str());
        return 130;
      }
    }
    if (terminal) std::fprintf(stderr, "\n");
    const Dataset& val = loader.validation();
    if (val.size() == 0 && test && epoch + 1 < o.epochs) {  // no held-out rows: the test split shows progress
      evaluate_test("epoch " + std::to_string(epoch + 1));
    } else if (val.size() > 0) {
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
  if (test) {
    const Trainer::Evaluation e = evaluate_test("final");
    nlohmann::json line;
    add_evaluation_fields(line, "test", e, *test);
    if (metrics.is_open()) metrics << line.dump() << "\n";
  }
  if (metrics.is_open()) metrics.flush();
  print_loss_scale(trainer.loss_scaler());
  const std::map<std::string, Tensor> trained = trainer.trained_initializers();
  check_finite_model(trained);
  write_trained_model(o.model, o.output, trained, model_write_options(o, train));
  std::printf("trained %lld steps in %.1f s; wrote %s\n", static_cast<long long>(step - first_step), seconds,
              o.output.c_str());
  return 0;
}

}  // namespace onnxtrain::cli
