// `onnxtrain train MODEL --data SPEC -o OUT.onnx [...]`: trains a model on one device (the CPU) and writes
// it back with the trained parameters and BatchNorm running statistics.
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "executor/trainer.h"
#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"
#include "frontend/model_writer.h"
#include "graph/error.h"
#include "tools/commands.h"

namespace onnxtrain::cli {

namespace {

struct TrainOptions {
  std::string model, data = "fashion-mnist", output, optimizer = "momentum", schedule = "constant";
  std::string loss = "cross-entropy", metrics, kernels;
  int64_t epochs = 1, batch = 64, warmup_steps = 0, limit_batches = 0, log_every = 100;
  double lr = 0.01, momentum = 0.9, weight_decay = 0, validation = 0.1;
  uint64_t seed = 0;
  bool momentum_given = false;
};

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long s = std::lround(seconds);
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", s / 3600, (s / 60) % 60);
  else std::snprintf(buf, sizeof buf, "%ldm%02lds", s / 60, s % 60);
  return buf;
}

void train_model(const TrainOptions& o) {
  ImportedModel model = import_model(o.model);
  if (model.graph.inputs.size() != 1) {
    throw Error(o.model + ": training needs a model with one data input; it has " + std::to_string(model.graph.inputs.size()));
  }
  const Value& input = model.graph.value(model.graph.inputs[0]);

  Dataset train = load_dataset(o.data, {.split = "train", .normalize = Normalization::MeanStd, .seed = o.seed});
  check_matches_model_input(train, input.name, input.shape);
  DataLoader loader(train, {.batch = o.batch, .shuffle = true, .seed = o.seed, .drop_last = false,
                            .validation_fraction = o.validation});
  const int64_t per_epoch = o.limit_batches > 0 ? std::min(o.limit_batches, loader.batches_per_epoch())
                                                 : loader.batches_per_epoch();
  const int64_t total_steps = per_epoch * o.epochs;

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
  Trainer trainer(model.graph, t);

  std::ofstream metrics;
  if (!o.metrics.empty()) {
    metrics.open(o.metrics, std::ios::trunc);
    if (!metrics) throw Error(o.metrics + ": cannot write the metrics file");
  }
  std::fprintf(stderr, "data: %s\n", train.description.c_str());
  std::fprintf(stderr, "training %s: %lld epochs x %lld batches of %lld, %s lr %g (%s), loss %s; validation %lld samples%s\n",
               o.model.c_str(), static_cast<long long>(o.epochs), static_cast<long long>(per_epoch),
               static_cast<long long>(o.batch), o.optimizer.c_str(), o.lr,
               lr_schedule_kind_name(t.schedule.kind), o.loss.c_str(), static_cast<long long>(loader.validation().size()),
               trainer.running_stat_nodes() ? (", " + std::to_string(trainer.running_stat_nodes()) +
                                               " BatchNorm nodes with running statistics").c_str() : "");

  const bool terminal = ::isatty(STDERR_FILENO);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  int64_t samples = 0, step = 0;
  double samples_per_s = 0;
  Trainer::Evaluation last{};
  for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
    loader.seek(epoch, 0);
    for (int64_t i = 0; i < per_epoch; ++i) {
      Batch b = loader.next();
      const double lr = trainer.optimizer().current_lr();
      const float loss = trainer.train_step(b.x, b.y);
      ++step;
      const int64_t n = b.y.sizes()[0];
      samples += n;
      const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
      samples_per_s = samples / std::max(elapsed, 1e-9);
      if (!std::isfinite(loss)) throw Error("the loss became " + std::to_string(loss) + " at step " + std::to_string(step) + ": lower --lr");
      const double eta = elapsed / step * (total_steps - step);
      if (metrics.is_open()) {
        metrics << nlohmann::json{{"step", step}, {"epoch", epoch}, {"loss", loss}, {"lr", lr}, {"samples_per_s", samples_per_s}}.dump() << "\n";
      }
      if (terminal) {
        std::fprintf(stderr, "\r\033[Kstep %lld/%lld  epoch %lld/%lld  loss %.4f  %.0f samples/s  ETA %s",
                     static_cast<long long>(step), static_cast<long long>(total_steps), static_cast<long long>(epoch + 1),
                     static_cast<long long>(o.epochs), loss, samples_per_s, format_duration(eta).c_str());
      } else if (step == 1 || step % o.log_every == 0 || step == total_steps) {
        std::fprintf(stderr, "step %lld/%lld epoch %lld loss %.4f lr %.4g %.0f samples/s ETA %s\n",
                     static_cast<long long>(step), static_cast<long long>(total_steps), static_cast<long long>(epoch + 1),
                     loss, lr, samples_per_s, format_duration(eta).c_str());
      }
    }
    if (terminal) std::fprintf(stderr, "\n");
    const Dataset& val = loader.validation();
    if (val.size() > 0) {
      last = trainer.evaluate(val.inputs, val.labels, std::max<int64_t>(o.batch, 256));
      std::printf("epoch %lld: validation loss %.4f, accuracy %.2f%% (%lld samples)\n", static_cast<long long>(epoch + 1),
                  last.loss, 100 * last.accuracy, static_cast<long long>(last.samples));
      std::fflush(stdout);
      if (metrics.is_open()) {
        metrics << nlohmann::json{{"epoch", epoch}, {"val_loss", last.loss}, {"val_accuracy", last.accuracy}}.dump() << "\n";
      }
    }
  }
  if (metrics.is_open()) metrics.flush();
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  write_trained_model(o.model, o.output, trainer.trained_initializers());
  std::printf("trained %lld steps in %.1f s; wrote %s\n", static_cast<long long>(step), seconds, o.output.c_str());
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model on the CPU and write it with the trained parameters (and BatchNorm running statistics).\n"
      "Not yet: checkpoints, --resume, --dump-gradients, the BatchNorm running-variance flag.");
  cmd->add_option("model", o->model, "the .onnx file to train (one data input; the loss attaches to its first output)")->required();
  cmd->add_option("-o,--output", o->output, "where to write the trained .onnx (atomically; checked by the ONNX checker)")->required();
  cmd->add_option("--data", o->data,
                  "training data: fashion-mnist (default), mnist:DIR, idx:IMAGES,LABELS, cifar10:DIR, npz:FILE, "
                  "npy:X.npy,Y.npy, synthetic[:C,H,W:CLASSES:N]; inputs normalised by mean/std");
  cmd->add_option("--epochs", o->epochs, "passes over the training rows (default 1)")->check(CLI::PositiveNumber);
  cmd->add_option("--batch", o->batch, "samples per step (default 64)")->check(CLI::PositiveNumber);
  cmd->add_option("--lr", o->lr, "base learning rate (default 0.01)")->check(CLI::PositiveNumber);
  cmd->add_option("--optimizer", o->optimizer,
                  "sgd | momentum (SGD with --momentum, the default) | nesterov | adam | adamw | adagrad; torch.optim semantics");
  cmd->add_option("--momentum", o->momentum, "momentum of momentum/nesterov, or of sgd when given (default 0.9)")
      ->each([o](const std::string&) { o->momentum_given = true; });
  cmd->add_option("--weight-decay", o->weight_decay, "L2 weight decay (decoupled for adamw; default 0)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--schedule", o->schedule,
                  "learning-rate schedule per step: constant (default) | step (x0.1 after each third of the steps) | "
                  "cosine (down to 0 at the last step)");
  cmd->add_option("--warmup-steps", o->warmup_steps, "linear warm-up from lr/3 over the first N steps (default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--loss", o->loss,
                  "cross-entropy (default) | mse | l1 | bce-with-logits (one-hot targets from the class labels) | "
                  "output:NAME (a scalar loss the model computes)");
  cmd->add_option("--seed", o->seed, "seed of the shuffle and of synthetic data (default 0)");
  cmd->add_option("--validation", o->validation, "fraction of the training rows held out for validation each epoch (default 0.1)")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--limit-batches", o->limit_batches, "stop each epoch after K batches (quick runs; default all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--log-every", o->log_every, "when stderr is not a terminal: a log line every N steps (default 100)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--metrics", o->metrics,
                  "write FILE.jsonl: one JSON object per step {step,epoch,loss,lr,samples_per_s} and per epoch "
                  "{epoch,val_loss,val_accuracy}");
  cmd->add_option("--kernels", o->kernels, "kernel implementation to use (\"reference\": the plain loops)");
  cmd->callback([o] { train_model(*o); });
}

}  // namespace onnxtrain::cli
