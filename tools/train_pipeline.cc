// `onnxtrain train --strategy dp --replicas R`: R data-parallel replicas on threads (data_parallel.h).
// `onnxtrain train --strategy naive|pipedream|spectrain|gpipe --stages N`: the model split into N
// pipeline stages (from --plan plan.json, else planned here with the analytic cost model), trained by
// PipelineTrainer with one thread per stage, then evaluated and written like a one-device run.
//
// One PipelineTrainer::train call per epoch: the pipeline fills and drains once per epoch (1F1B), so
// epochs of many mini-batches keep the fill/drain share small. Checkpoints of pipeline runs are not
// written yet (a clear error), and neither is --dump-gradients.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "executor/data_parallel.h"
#include "executor/pipeline/pipeline_trainer.h"
#include "frontend/data_loader.h"
#include "frontend/importer.h"
#include "frontend/model_writer.h"
#include "graph/error.h"
#include "partitioner/cost_model.h"
#include "partitioner/plan_io.h"
#include "partitioner/planner.h"
#include "tools/train_options.h"

namespace onnxtrain::cli {
namespace {

std::vector<std::string> forward_node_names(const TrainingGraph& t) {
  std::vector<std::string> names;
  for (size_t i = 0; i < t.forward_node_count; ++i) names.push_back(t.graph.node(t.graph.order()[i]).name);
  return names;
}

// The first forward node of each stage: from the plan file, or the planner.
std::vector<int64_t> stage_starts(const TrainOptions& o, const Graph& graph, int64_t micro_batch) {
  Trainer prepared(graph, {.loss = parse_loss_spec(o.loss)});  // the training graph the stages run
  const TrainingGraph& training = prepared.training_graph();
  Plan plan;
  if (!o.plan.empty()) {
    plan = read_plan(o.plan, forward_node_names(training));
    if (static_cast<int>(plan.stages.size()) != o.stages) {
      throw Error(o.plan + ": the plan has " + std::to_string(plan.stages.size()) + " stages; --stages is " +
                  std::to_string(o.stages));
    }
  } else {
    // A fixed nominal CPU, not this machine's measured rates, so that the split (and with it every number
    // of the run) does not depend on the load at start. `onnxtrain partition --profile -o plan.json` gives
    // a measured plan for --plan.
    DeviceDescription cpu{.name = "nominal CPU", .source = "fixed", .fp32_flops = 1e11, .memory_bandwidth = 2e10,
                          .kernel_overhead_s = 1e-6, .link = {"shared memory", 1e10, 1e-6}};
    const CostProfile profile = build_cost_profile(training, micro_batch, cpu);
    plan = plan_pipeline(profile, {.stages = o.stages, .micro_batches = std::max<int64_t>(o.micro_batches, 1),
                                   .link = {cpu.link.name, cpu.link.bandwidth, cpu.link.latency_s}});
  }
  std::vector<int64_t> starts;
  for (const StagePlan& s : plan.stages) starts.push_back(s.first_node);
  return starts;
}

// The epochs of a run with a trainer that takes many mini-batches per call (PipelineTrainer,
// DataParallelTrainer): progress, metrics, validation, the test pass and the written model.
template <typename MultiBatchTrainer>
int run_epochs(const TrainOptions& o, MultiBatchTrainer& trainer, DataLoader& loader, const Dataset& train,
               int64_t per_epoch, const std::function<void()>& print_report) {
  std::ofstream metrics;
  if (!o.metrics.empty()) {
    metrics.open(o.metrics, std::ios::trunc);
    if (!metrics) throw Error(o.metrics + ": cannot write the metrics file");
  }
  const int64_t total_steps = per_epoch * o.epochs;
  const bool terminal = ::isatty(STDERR_FILENO);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  std::mutex print;  // losses arrive on the last stage's thread
  int64_t done = 0;
  for (int64_t epoch = 0; epoch < o.epochs; ++epoch) {
    loader.seek(epoch, 0);
    trainer.train(
        per_epoch, [&] { Batch b = loader.next(); return std::pair(b.x, b.y); },
        [&](int64_t mini_batch, float loss) {
          std::lock_guard<std::mutex> lock(print);
          const int64_t step = mini_batch + 1;
          done = step;
          const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
          const double samples_per_s = static_cast<double>(step * o.batch) / std::max(elapsed, 1e-9);
          const double eta = elapsed / static_cast<double>(step) * static_cast<double>(total_steps - step);
          if (metrics.is_open()) {
            metrics << nlohmann::json{{"step", step}, {"epoch", epoch}, {"loss", loss}, {"samples_per_s", samples_per_s}}.dump() << "\n";
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
    if (terminal) std::fprintf(stderr, "\n");
    const Dataset& val = loader.validation();
    if (val.size() > 0) {
      const Trainer::Evaluation e = trainer.evaluate(val.inputs, val.labels, std::max<int64_t>(o.batch, 256));
      std::printf("epoch %lld: validation loss %.4f, accuracy %.2f%% (%lld samples)\n", static_cast<long long>(epoch + 1),
                  e.loss, 100 * e.accuracy, static_cast<long long>(e.samples));
      std::fflush(stdout);
      if (metrics.is_open()) metrics << nlohmann::json{{"epoch", epoch}, {"val_loss", e.loss}, {"val_accuracy", e.accuracy}}.dump() << "\n";
    }
  }
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  print_report();
  if (const std::string spec = test_spec(o); !spec.empty()) {
    Dataset test = load_dataset(spec, {.split = "test", .normalize = normalization(o), .mean = train.mean,
                                       .std = train.std, .seed = o.seed});
    const Trainer::Evaluation e = trainer.evaluate(test.inputs, test.labels, std::max<int64_t>(o.batch, 256));
    std::printf("final: test loss %.4f, accuracy %.2f%% (%lld samples)\n", e.loss, 100 * e.accuracy,
                static_cast<long long>(e.samples));
    if (metrics.is_open()) metrics << nlohmann::json{{"test_loss", e.loss}, {"test_accuracy", e.accuracy}}.dump() << "\n";
  }
  if (metrics.is_open()) metrics.flush();
  write_trained_model(o.model, o.output, trainer.trained_initializers());
  std::printf("trained %lld steps in %.1f s; wrote %s\n", static_cast<long long>(done), seconds, o.output.c_str());
  return 0;
}

}  // namespace

int run_pipeline_training(const TrainOptions& o) {
  if (!o.checkpoint_dir.empty() || o.resume) {
    throw Error("--checkpoint-dir and --resume work with --strategy single only for now: checkpoints of pipeline "
                "and data-parallel runs are not written yet");
  }
  if (!o.dump_gradients.empty()) throw Error("--dump-gradients works with --strategy single only");
  ImportedModel model = import_model(o.model);
  if (model.graph.inputs.size() != 1) {
    throw Error(o.model + ": training needs a model with one data input; it has " + std::to_string(model.graph.inputs.size()));
  }
  const Value& input = model.graph.value(model.graph.inputs[0]);
  Dataset train = load_dataset(o.data, {.split = "train", .normalize = normalization(o), .seed = o.seed});
  check_matches_model_input(train, input.name, input.shape);
  DataLoader loader(train, {.batch = o.batch, .shuffle = true, .seed = o.seed, .drop_last = false,
                            .validation_fraction = o.validation});
  const int64_t per_epoch = o.limit_batches > 0 ? std::min(o.limit_batches, loader.batches_per_epoch())
                                                 : loader.batches_per_epoch();
  const int64_t total_steps = per_epoch * o.epochs;

  std::fprintf(stderr, "data: %s\n", train.description.c_str());
  if (o.strategy == "dp") {
    DataParallelTrainer trainer(model.graph, {.trainer = trainer_options(o, total_steps), .replicas = o.replicas});
    std::fprintf(stderr, "training %s with %d data-parallel replicas (threads), %lld epochs x %lld mini-batches of %lld\n",
                 o.model.c_str(), o.replicas, static_cast<long long>(o.epochs), static_cast<long long>(per_epoch),
                 static_cast<long long>(o.batch));
    return run_epochs(o, trainer, loader, train, per_epoch, [] {});
  }
  PipelineOptions p;
  p.trainer = trainer_options(o, total_steps);
  p.strategy = parse_pipeline_strategy(o.strategy);
  p.stages = o.stages;
  p.micro_batches = o.micro_batches;
  p.spectrain_target = parse_spectrain_target(o.spectrain_target);
  p.vertical_sync = o.vertical_sync;
  const int64_t micro_batch = p.strategy == PipelineStrategy::gpipe ? std::max<int64_t>(1, o.batch / o.micro_batches) : o.batch;
  p.stage_starts = stage_starts(o, model.graph, micro_batch);
  PipelineTrainer trainer(model.graph, p);

  std::string starts;
  for (int64_t s : trainer.stage_starts()) starts += (starts.empty() ? "" : ",") + std::to_string(s);
  std::fprintf(stderr, "training %s with %s over %d stages (first nodes %s%s), %lld epochs x %lld mini-batches of %lld\n",
               o.model.c_str(), o.strategy.c_str(), o.stages, starts.c_str(), o.plan.empty() ? ", planned here" : ", from the plan",
               static_cast<long long>(o.epochs), static_cast<long long>(per_epoch), static_cast<long long>(o.batch));

  return run_epochs(o, trainer, loader, train, per_epoch,
                    [&] { std::printf("%s", format_pipeline_report(trainer.report()).c_str()); });
}

}  // namespace onnxtrain::cli
