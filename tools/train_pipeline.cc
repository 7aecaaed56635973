// `onnxtrain train --strategy dp --replicas R`: R data-parallel replicas on threads (data_parallel.h).
// `onnxtrain train --strategy naive|pipedream|spectrain|gpipe --stages N`: the model split into N
// pipeline stages (from --plan plan.json, else planned here with the analytic cost model), trained by
// PipelineTrainer with one thread per stage, then evaluated and written like a one-device run.
//
// One PipelineTrainer::train call per epoch: the pipeline fills and drains once per epoch (1F1B), so
// epochs of many mini-batches keep the fill/drain share small; with --checkpoint-every K, once every K
// mini-batches (checkpoints are taken drained). --dump-gradients is for --strategy single only.
//
// Across processes (started by mpirun, or torchrun-style with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT):
// every process loads the same data with the same seed and runs its part — dp: one replica per rank
// (--replicas, when given, must equal the process count); pipelines: one stage per rank (--stages must
// equal it). Rank 0 prints, evaluates and writes the model (pipelines gather it there first); the last
// stage's rank prints the pipeline's progress. Data-parallel and pipeline runs write sharded checkpoints:
// every rank (replica or stage) its share of the tensors, rank 0 the manifest (executor/checkpoint.h),
// which any layout — another replica or stage count, one device — resumes from.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "executor/checkpoint.h"
#include "executor/comm/launch.h"
#include "executor/data_parallel.h"
#include "executor/pipeline/pipeline_trainer.h"
#include "frontend/data_loader.h"
#include "frontend/importer.h"
#include "graph/error.h"
#include "partitioner/cost_model.h"
#include "partitioner/plan_io.h"
#include "partitioner/planner.h"
#include "tools/pipeline_trace.h"
#include "tools/run_plan_options.h"
#include "tools/text_file.h"
#include "tools/train_epochs.h"
#include "tools/train_options.h"

namespace onnxtrain::cli {
namespace {

// Across processes the launcher (mpirun) stops the surviving ranks with SIGTERM when one dies; each then
// says which step it was in before it exits (async-signal-safe: a preformatted line, write, _exit).
char g_rank_text[16] = "0";

extern "C" void on_launcher_termination(int) {
  char line[160];
  char digits[24];
  int64_t step = g_last_step.load();
  int n = 0;
  do digits[n++] = static_cast<char>('0' + step % 10);
  while ((step /= 10) > 0 && n < 20);
  const char* parts[] = {"onnxtrain: rank ", g_rank_text, ": terminated by the launcher after step ", nullptr,
                         " (another process of the run failed or was killed; see its rank above)\n"};
  size_t at = 0;
  for (const char* p : parts) {
    if (!p) {
      while (n > 0 && at < sizeof line - 1) line[at++] = digits[--n];
      continue;
    }
    for (; *p && at < sizeof line - 1; ++p) line[at++] = *p;
  }
  [[maybe_unused]] const ssize_t written = ::write(STDERR_FILENO, line, at);
  ::_exit(143);
}

void report_termination_as_rank(int rank) {
  std::snprintf(g_rank_text, sizeof g_rank_text, "%d", rank);
  std::signal(SIGTERM, on_launcher_termination);
}

std::vector<std::string> forward_node_names(const TrainingGraph& t) {
  std::vector<std::string> names;
  for (size_t i = 0; i < t.forward_node_count; ++i) names.push_back(t.graph.node(t.graph.order()[i]).name);
  return names;
}

nlohmann::json data_parallel_report_json(const DataParallelTrainer::Timing& t, int replicas) {
  return {{"kind", "data_parallel"},
          {"replicas", replicas},
          {"steps", t.steps},
          {"step_seconds", t.step_seconds},
          {"allreduce_seconds", t.allreduce_seconds},
          {"allreduce_bytes_per_step", t.allreduce_bytes_per_step},
          {"buckets", t.buckets},
          {"replica_compute_seconds", t.compute_seconds},
          {"replica_exchange_seconds", t.exchange_seconds}};
}

nlohmann::json pipeline_report_json(const PipelineReport& r) {
  nlohmann::json stages = nlohmann::json::array();
  for (const StageReport& s : r.stages) {
    stages.push_back({{"stage", s.stage},
                      {"first_node", s.first_node},
                      {"end_node", s.end_node},
                      {"threads", s.threads},
                      {"wall_seconds", s.wall_seconds},
                      {"idle_seconds", s.idle_seconds},
                      {"bubble_fraction", s.bubble_fraction},
                      {"weight_bytes", s.weight_bytes},
                      {"working_bytes", s.working_bytes},
                      {"stash_bytes", s.peak_stash_bytes},
                      {"activation_bytes", s.peak_activation_bytes},
                      {"optimizer_bytes", s.optimizer_bytes},
                      {"gradient_bytes", s.gradient_bytes},
                      {"gradient_sum_bytes", s.gradient_sum_bytes},
                      {"prediction_bytes", s.prediction_bytes},
                      {"staleness", s.mean_staleness},
                      // NaN (no prediction scored) is not JSON: null.
                      {"prediction_error", std::isfinite(s.prediction_error) && s.predictions > 0
                                               ? nlohmann::json(s.prediction_error)
                                               : nlohmann::json()}});
  }
  return {{"kind", "pipeline"},
          {"strategy", std::string(pipeline_strategy_name(r.strategy))},
          {"stages", stages},
          {"micro_batches", r.micro_batches},
          {"wall_seconds", r.wall_seconds}};
}

// The first forward node of each stage: from the plan file, or the planner.
std::vector<int64_t> stage_starts(const TrainOptions& o, const Graph& graph, const LossSpec& loss,
                                  int64_t micro_batch) {
  // The training graph the stages run (bf16: with autocast's Cast nodes, which the plan places too; a
  // language model's loss with its (N, T, V) logits reshaped, as the trainer attaches it).
  TrainingRecipeOptions options{.loss = loss,
                                .precision = precision_from_name(o.precision),
                                .live_conv_taps_only = trains_live_conv_taps_only(o)};
  options.set_cpu_rewrites(trains_with_cpu_rewrites(o));
  const TrainingRecipe recipe = make_training_recipe(graph, options);
  const TrainingGraph& training = recipe.training;
  Plan plan;
  if (!o.plan.empty()) {
    try {
      plan = read_plan(o.plan, forward_node_names(training));
    } catch (const Error& e) {
      // A plan's node list is the training graph's for one precision: bf16's has autocast's Cast nodes.
      throw Error(std::string(e.what()) + " (if the plan was made for another --precision: make it with onnxtrain " +
                  "partition --precision " + o.precision + ")");
    }
    if (static_cast<int>(plan.stages.size()) != o.stages) {
      throw Error(o.plan + ": the plan has " + std::to_string(plan.stages.size()) + " stages; --stages is " +
                  std::to_string(o.stages));
    }
    for (size_t k = 0; k < plan.stages.size(); ++k) {
      if (plan.stages[k].replicas != o.replicas) {
        std::fprintf(stderr,
                     "note: %s gives stage %zu %d replica(s); this run trains %d per stage (--replicas, across "
                     "processes: mpirun or torchrun-style launch)\n",
                     o.plan.c_str(), k, plan.stages[k].replicas, o.replicas);
        break;
      }
    }
  } else {
    // A fixed nominal CPU (partitioner/device.h): the split does not depend on the load at start.
    // `onnxtrain partition --profile -o plan.json` gives a measured plan for --plan.
    const DeviceDescription cpu = nominal_cpu();
    const CostProfile profile = build_cost_profile(training, micro_batch, cpu);
    plan = plan_pipeline(profile, run_plan_options({.stages = o.stages,
                                                    .strategy = o.strategy,
                                                    .micro_batches = o.micro_batches,
                                                    .optimizer = o.optimizer,
                                                    .prediction_metrics = o.prediction_metrics == "on",
                                                    .cpu_executor = o.device == "cpu",
                                                    .link = {cpu.link.name, cpu.link.bandwidth, cpu.link.latency_s}}));
  }
  std::vector<int64_t> starts;
  for (const StagePlan& s : plan.stages) starts.push_back(s.first_node);
  return starts;
}

// The options every process of a run must share, by flag (what only one process uses, such as
// --metrics or -o, is left out).
nlohmann::json options_every_rank_shares(const TrainOptions& o) {
  return {{"model", std::filesystem::path(o.model).filename().string()},
          {"--data", o.data},
          {"--test-data", o.test_data},
          {"--epochs", o.epochs},
          {"--batch", o.batch},
          {"--lr", o.lr},
          {"--optimizer", o.optimizer},
          {"--momentum", o.momentum},
          {"--weight-decay", o.weight_decay},
          {"--schedule", o.schedule},
          {"--warmup-steps", o.warmup_steps},
          {"--loss", o.loss},
          {"--seed", o.seed},
          {"--validation", o.validation},
          {"--limit-batches", o.limit_batches},
          {"--seq-len", o.seq_len},
          {"--normalize", o.normalize},
          {"--running-variance", o.running_variance},
          {"--precision", o.precision},
          {"--strategy", o.strategy},
          {"--stages", o.stages},
          {"--replicas", o.replicas},
          {"--micro-batches", o.micro_batches},
          {"--plan", o.plan},
          {"--spectrain-target", o.spectrain_target},
          {"--vertical-sync", o.vertical_sync},
          {"--deferred-bn", o.deferred_bn},
          {"--predict", o.predict},
          {"--prediction-metrics", o.prediction_metrics},
          {"--bucket-mb", o.bucket_mb},
          {"--checkpoint-dir", o.checkpoint_dir},
          {"--checkpoint-every", o.checkpoint_every},
          {"--keep-checkpoints", o.keep_checkpoints},
          {"--resume", o.resume},
          {"--resume-from", o.resume_from},
          {"--kernels", o.kernels},
          // What changes the gradients or the data one rank computes (an outside check trained ranks of
          // different --label-smoothing or --augment into one model without a word).
          {"--label-smoothing", o.label_smoothing},
          {"--augment", o.augment},
          {"--accumulate", o.accumulate},
          {"--clip-grad-norm", o.clip_grad_norm},
          {"--on-nonfinite", o.on_nonfinite},
          {"--freeze", o.freeze},
          {"--init-from", std::filesystem::path(o.init_from).filename().string()},
          {"--keep-training-mode", o.keep_training_mode},
          {"--bake-normalization", o.bake_normalization}};
}

// At rendezvous, before any collective of the strategy: rank 0's options go to every rank, each compares
// them with its own, and all stop together when any differs (the differing rank names the option), so a
// mismatch neither trains silently nor stalls until --comm-timeout.
// RunRole::leader_decides over the processes of `world` (rank 0 leads): a one-byte broadcast. Null without one.
std::function<bool(bool, const std::string&)> leader_decides_over(Communicator* world) {
  if (!world) return nullptr;
  return [world](bool decision, const std::string& what) {
    uint8_t byte = decision ? 1 : 0;
    world->broadcast({reinterpret_cast<std::byte*>(&byte), 1}, 0, what);
    return byte != 0;
  };
}

void check_every_rank_has_the_same_options(const TrainOptions& o, Communicator& world) {
  std::string text = options_every_rank_shares(o).dump();
  uint64_t length = text.size();
  world.broadcast({reinterpret_cast<std::byte*>(&length), sizeof length}, 0, "rank 0's options: length");
  std::string rank0(length, '\0');
  if (world.rank() == 0) rank0 = text;
  world.broadcast({reinterpret_cast<std::byte*>(rank0.data()), rank0.size()}, 0, "rank 0's options");
  const nlohmann::json mine = nlohmann::json::parse(text), theirs = nlohmann::json::parse(rank0);
  std::string difference;
  for (const auto& [flag, value] : mine.items()) {
    if (theirs.contains(flag) && theirs[flag] == value) continue;
    difference = flag + " " + value.dump() + ", but rank 0 has " + flag + " " +
                 (theirs.contains(flag) ? theirs[flag].dump() : std::string("(none)"));
    break;
  }
  // The differing rank stops first: its abort carries its message to the others, who wait in the
  // all-reduce below (a rank that threw after the all-reduce could abort the others before they read it).
  if (!difference.empty())
    throw Error("rank " + std::to_string(world.rank()) + " was started with " + difference +
                ": every process of a run must be started with the same options");
  float differing = 0.f;
  world.all_reduce_sum({&differing, 1}, "options check");
}

}  // namespace

namespace {
int run_in(const TrainOptions& o, const LaunchInfo& launch, Communicator* world);
}  // namespace

int run_pipeline_training(const TrainOptions& o) {
  // Data-parallel replicas combine their gradients before one step (fp16: one skip decision on the sum);
  // pipeline stages step on their own, so fp16 would need every stage to agree on a skip.
  if (o.precision == "fp16" && o.strategy != "dp") {
    throw Error("--precision fp16 with --strategy " + o.strategy +
                ": pipeline stages step on their own and cannot agree on skipping a step for inf/NaN gradients; "
                "use --precision bf16 (no loss scaling), or --strategy single or dp");
  }
  // Processes started together (mpirun, torchrun) share one world; run directly, there is none.
  const LaunchInfo launch = detect_launch();
  const std::unique_ptr<Communicator> world =
      launch.kind == LaunchInfo::Kind::direct
          ? nullptr
          : make_world_communicator(launch, std::chrono::milliseconds(static_cast<int64_t>(o.comm_timeout * 1000)));
  try {
    if (world) check_every_rank_has_the_same_options(o, *world);
    return run_in(o, launch, world.get());
  } catch (const std::exception& e) {
    if (world) world->abort(e.what());  // the other processes stop now, naming this rank, not at their timeout
    throw;
  }
}

namespace {

// Every process writes the shards it holds (`parts`: shard index and content), then, once all are on
// disk, rank 0 writes the manifest of all `shards` (executor/checkpoint.h).
// Returns the manifest's path (rank 0; "" elsewhere).
std::string write_sharded(const TrainOptions& o, const std::string& dir, Communicator* world, int rank,
                          TrainingCheckpoint header, const std::vector<std::pair<int, TrainingCheckpoint>>& parts,
                          int shards) {
  for (const auto& [index, part] : parts) write_checkpoint_shard(dir, part, index);
  if (world) world->barrier("checkpoint of step " + std::to_string(header.step) + ": every shard written");
  if (rank != 0) return "";
  header.tensors.clear();
  header.optimizer_state.clear();
  header.shards = shard_files(header.step, shards);
  return write_checkpoint(dir, header, static_cast<int>(o.keep_checkpoints));
}

int run_in(const TrainOptions& o, const LaunchInfo& launch, Communicator* world) {
  const bool pipeline = o.strategy != "dp";
  const int rank = world ? world->rank() : 0, ranks = world ? world->size() : 1;
  if (world) report_termination_as_rank(rank);
  if (world && pipeline && o.stages * o.replicas != ranks) {
    const int needed = o.stages * o.replicas;
    throw Error("--stages " + std::to_string(o.stages) +
                (o.replicas > 1 ? " --replicas " + std::to_string(o.replicas) : "") + " across " +
                std::to_string(ranks) + " processes (" + launch_kind_name(launch.kind) +
                "): one stage per process, so start " + std::to_string(needed) + " processes (mpirun -np " +
                std::to_string(needed) + ")");
  }
  if (!world && pipeline && o.replicas > 1) {
    throw Error("--stages with --replicas (pipeline × data parallelism) runs across processes: mpirun -np " +
                std::to_string(o.stages * o.replicas) + " onnxtrain train ...");
  }
  if (world && !pipeline && o.replicas != 1 && o.replicas != ranks) {
    throw Error("--replicas " + std::to_string(o.replicas) + " across " + std::to_string(ranks) +
                " processes: one replica per process (leave --replicas out, or start " + std::to_string(o.replicas) +
                ")");
  }
  // Threads place their stages or replicas on consecutive devices; a process uses its local rank's device (before
  // the data is made: a missing GPU is reported at once).
  const int devices_here = world ? 1 : pipeline ? o.stages : o.replicas;
  const Device device =
      training_device(o, devices_here, world ? launch.local_rank : 0,
                      pipeline ? "--stages " + std::to_string(o.stages) : "--replicas " + std::to_string(o.replicas));
  TrainingData data(o, device);
  const int64_t per_epoch = data.per_epoch, total_steps = data.total_steps;
  const nlohmann::json export_info = checkpoint_export_info(o, data.model.graph, data.train);
  const std::string where =
      world ? " on " + std::to_string(ranks) + " processes (" + launch_kind_name(launch.kind) + ")" : "";

  if (rank == 0) data.print_data_line(o);
  if (!pipeline) {
    DataParallelTrainer trainer(data.model.graph, {.trainer = trainer_options(o, total_steps, device, data.train),
                                                   .replicas = world ? 1 : o.replicas,
                                                   .bucket_bytes = static_cast<int64_t>(o.bucket_mb * 1e6),
                                                   .world = world});
    const int replicas = trainer.global_replicas();
    RunRole role{.prints_progress = rank == 0, .leads = rank == 0, .step_by_step = true, .stops_on_signal = !world};
    role.leader_decides = leader_decides_over(world);
    role.report = [&] { return data_parallel_report_json(trainer.timing(), trainer.global_replicas()); };
    const nlohmann::json config = checkpoint_config(o, total_steps);
    role.first_step =
        resume_or_refuse(o, data.model.graph, config, rank, [&](const TrainingCheckpoint& c, const std::string& path) {
          trainer.restore(c.tensors, c.optimizer_state, path);
          check_resumed_step(c, trainer.replica(0), per_epoch, path);
        });
    // Every rank writes the share of the (identical) replica state it owns, then rank 0 the manifest.
    role.checkpoint = [&, replicas](const std::string& dir, int64_t step) {
      TrainingCheckpoint all = checkpoint_header(o, step, per_epoch, config, export_info);
      all.tensors = trainer.trained_initializers();
      all.optimizer_state = trainer.replica(0).optimizer().state_tensors();
      all.optimizer_state.merge(trainer.replica(0).loss_scaler_state());  // fp16: the scaler, for an exact resume
      std::vector<std::pair<int, TrainingCheckpoint>> parts;
      for (int r = rank; r < (world ? rank + 1 : replicas); ++r) {  // threads: this process writes them all
        parts.emplace_back(r, all);
        take_shard(all, r, replicas, parts.back().second);
      }
      return write_sharded(o, dir, world, rank, all, parts, replicas);
    };
    if (rank == 0) {
      std::fprintf(
          stderr, "training %s with %d data-parallel replicas (%s)%s%s, %lld epochs x %lld mini-batches of %lld\n",
          o.model.c_str(), replicas, world ? "processes" : "threads", where.c_str(), step_summary(o).c_str(),
          static_cast<long long>(o.epochs), static_cast<long long>(per_epoch), static_cast<long long>(o.batch));
    }
    role.print_report = [&] {
      const DataParallelTrainer::Timing& t = trainer.timing();
      if (t.steps == 0) return;
      print_loss_scale(trainer.replica(0).loss_scaler());  // the same on every replica
      print_nonfinite_skips(trainer.replica(0));
      const double step_ms = 1e3 * t.step_seconds / static_cast<double>(t.steps);
      if (t.on_devices) {
        std::printf(
            "data parallel: %d replicas on GPUs, %.2f ms per step, gradients all-reduced by NCCL on the "
            "devices (%.2f MB per replica per step)\n",
            replicas, step_ms, t.allreduce_bytes_per_step / 1e6);
        return;
      }
      const double reduce_ms = 1e3 * t.allreduce_seconds / static_cast<double>(t.steps);
      std::printf(
          "data parallel: %d replicas, %.2f ms per step, gradient all-reduce %.2f ms per step %s(%.1f%% of the "
          "step, %.2f MB per replica per step%s; waiting for the slowest replica included)\n",
          replicas, step_ms, reduce_ms, t.buckets > 1 ? "not overlapped " : "", 100 * reduce_ms / step_ms,
          t.allreduce_bytes_per_step / 1e6,
          t.buckets > 1 ? (", " + std::to_string(t.buckets) + " buckets").c_str() : "");
    };
    return run_epochs(o, trainer, data, role);
  }
  PipelineOptions p;
  p.trainer = trainer_options(o, total_steps, device, data.train);
  p.strategy = parse_pipeline_strategy(o.strategy);
  p.stages = o.stages;
  p.micro_batches = o.micro_batches;
  p.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.comm_timeout * 1000));
  p.spectrain_target = parse_spectrain_target(o.spectrain_target);
  p.measure_prediction = o.prediction_metrics == "on";
  p.vertical_sync = o.vertical_sync;
  p.deferred_batch_norm = o.deferred_bn;
  p.predict = o.predict;
  p.world = world;
  p.replicas = o.replicas;
  p.trace = !o.trace.empty();
  if (world) p.mini_batches_done = &g_last_step;  // the SIGTERM line of a rank without losses
  if (p.trace && world)
    throw Error("--trace: pipelines over processes are not traced yet; run the stages in one process");
  const bool micro_batched = strategy_traits(p.strategy).flushes || strategy_traits(p.strategy).accumulates;
  const int64_t micro_batch = micro_batched ? std::max<int64_t>(1, o.batch / o.micro_batches) : o.batch;
  p.stage_starts = stage_starts(o, data.model.graph, p.trainer.loss, micro_batch);
  PipelineTrainer trainer(data.model.graph, p);

  std::string starts;
  for (int64_t s : trainer.stage_starts()) starts += (starts.empty() ? "" : ",") + std::to_string(s);
  if (rank == 0) {
    const std::string copies = o.replicas > 1 ? " x " + std::to_string(o.replicas) + " data-parallel replicas" : "";
    std::fprintf(
        stderr,
        "training %s with %s over %d stages%s%s%s (first nodes %s%s), %lld epochs x %lld mini-batches of %lld\n",
        o.model.c_str(), o.strategy.c_str(), o.stages, copies.c_str(), where.c_str(), step_summary(o).c_str(),
        starts.c_str(), o.plan.empty() ? ", planned here" : ", from the plan", static_cast<long long>(o.epochs),
        static_cast<long long>(per_epoch), static_cast<long long>(o.batch));
  }
  // Pipeline 0's last stage has the losses; rank 0 (pipeline 0's first stage) gathers the model.
  RunRole role{.prints_progress = world ? rank == o.stages - 1 : true, .leads = rank == 0, .stops_on_signal = !world};
  // Checkpoints are taken where the pipeline has drained: each train() call runs --checkpoint-every
  // mini-batches, so that many also sets how often the pipeline fills and drains.
  const nlohmann::json config = checkpoint_config(o, total_steps);
  role.first_step =
      resume_or_refuse(o, data.model.graph, config, rank, [&](const TrainingCheckpoint& c, const std::string& path) {
        trainer.restore(c.tensors, c.optimizer_state, path, c.predictor_state);
      });
  role.checkpoint = [&, config](const std::string& dir, int64_t step) {  // a shard per stage, from pipeline 0
    std::vector<std::pair<int, TrainingCheckpoint>> parts;
    for (int k = 0; k < o.stages; ++k) {
      if (world && rank != k) continue;
      parts.emplace_back(k, checkpoint_header(o, step, per_epoch, config, export_info));
      std::tie(parts.back().second.tensors, parts.back().second.optimizer_state) = trainer.stage_state(k);
      parts.back().second.predictor_state = trainer.stage_predictor_state(k);
    }
    return write_sharded(o, dir, world, rank, checkpoint_header(o, step, per_epoch, config, export_info), parts,
                         o.stages);
  };
  if (world) role.sync_model = [&] { return trainer.gather_trained_initializers(); };
  role.leader_decides = leader_decides_over(world);
  if (!world) role.report = [&] { return pipeline_report_json(trainer.report()); };
  role.print_report = [&] {
    if (world) return;
    std::printf("%s", format_pipeline_report(trainer.report()).c_str());
    if (o.trace.empty()) return;
    nlohmann::json events = nlohmann::json::array();
    append_trace_events(events, trainer.trace(),
                        "measured: " + o.strategy + ", " + std::to_string(o.stages) + " stages", 1,
                        o.micro_batches > 1);
    write_text_file(o.trace, nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump());
    std::fprintf(stderr, "wrote the trace %s (open it in Perfetto or chrome://tracing)\n", o.trace.c_str());
  };
  return run_epochs(o, trainer, data, role);
}

}  // namespace

}  // namespace onnxtrain::cli
