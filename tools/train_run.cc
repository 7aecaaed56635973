// The body of `onnxtrain train` for one device (--strategy single): checks of the options every strategy
// shares, then data, trainer and the epoch loop of train_epochs.h (progress, checkpoints and SIGINT,
// validation each epoch, the test split at the end, the trained model out).
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
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "executor/checkpoint.h"
#include "executor/comm/launch.h"
#include "executor/pipeline/schedule.h"
#include "executor/trainer.h"
#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"
#include "frontend/model_writer.h"
#include "frontend/npy.h"
#include "graph/autodiff/live_conv_taps.h"
#include "graph/error.h"
#include "kernels/backend_info.h"
#include "kernels/cuda/math_mode.h"
#include "tools/cli_choices.h"
#include "tools/output_paths.h"
#include "tools/train_epochs.h"
#include "tools/train_options.h"

namespace onnxtrain::cli {
namespace {

namespace fs = std::filesystem;

// By the model's parameter names, in its layouts: a convolution trained on tap-major weights or on its live
// taps only has its gradient transposed back or set in zeros (an outside check found "W.tap_major.npy").
void dump_gradients(Trainer& trainer, const Graph& model, const Batch& b, const std::string& dir) {
  std::filesystem::create_directories(dir);
  float loss = 0;
  const std::map<std::string, Tensor> grads =
      with_full_conv_gradients(model, trainer.compute_gradients(b.inputs(), b.y, &loss));
  for (const auto& [name, g] : grads) {
    std::string file = name;
    std::replace(file.begin(), file.end(), '/', '_');  // ONNX names may hold slashes
    write_npy(dir + "/" + file + ".npy", g);
  }
  std::fprintf(stderr, "wrote the gradients of %zu parameters for the first batch (loss %.6f) to %s\n", grads.size(),
               loss, dir.c_str());
}

// A one-device Trainer behind the many-mini-batch interface of run_epochs.
class OneDeviceRun {
 public:
  explicit OneDeviceRun(Trainer& trainer) : trainer_(trainer) {}

  std::vector<float> train(int64_t count, const std::function<std::pair<DataInputs, Tensor>()>& next,
                           const std::function<void(int64_t, float)>& on_loss) {
    std::vector<float> losses;
    for (int64_t i = 0; i < count; ++i) {
      const auto [x, y] = next();
      const int64_t mini_batch = trainer_.mini_batches_used();
      losses.push_back(trainer_.train_step(x, y));
      on_loss(mini_batch, losses.back());
    }
    return losses;
  }
  Trainer::Evaluation evaluate(const DataInputs& inputs, const Tensor& labels, int64_t batch) {
    return trainer_.evaluate(inputs, labels, batch);
  }
  std::map<std::string, Tensor> trained_initializers() const { return trainer_.trained_initializers(); }

 private:
  Trainer& trainer_;
};

// --checkpoint-dir must be a folder that exists or can be made, and writable: found now, not at the first
// checkpoint K steps in.
void check_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  fs::path folder(dir);
  if (fs::exists(folder, ec) && !fs::is_directory(folder, ec))
    throw Error("--checkpoint-dir " + dir + ": is not a folder");
  while (!fs::exists(folder, ec) && folder.has_parent_path() && folder != folder.parent_path())
    folder = folder.parent_path();
  if (!fs::exists(folder, ec)) folder = ".";
  if (!fs::is_directory(folder, ec))
    throw Error("--checkpoint-dir " + dir + ": " + folder.string() + " is not a folder");
  if (::access(folder.c_str(), W_OK) != 0)
    throw Error("--checkpoint-dir " + dir + ": the folder " + folder.string() + " is not writable");
}

// Refuses what would be ignored or found late, before any data is made.
void check_common_options(const TrainOptions& o) {
  // Options that do not go together, or that the chosen strategy would ignore in silence: usage errors (exit 2).
  const bool pipeline = is_pipeline_strategy(o.strategy);
  if (o.tf32 && o.device == "cpu") usage_error("--tf32 applies to CUDA kernels: use it with --device cuda");
  if (!o.trace.empty() && !pipeline) {
    usage_error("--trace records pipeline stages: use it with --strategy " + pipeline_strategy_names());
  }
  for (const auto& [given, flag] :
       {std::pair{o.vertical_sync, "--vertical-sync"}, std::pair{o.deferred_bn, "--deferred-bn"},
        std::pair{o.predict, "--predict"}, std::pair{!o.plan.empty(), "--plan"}, std::pair{o.stages > 1, "--stages"}})
    if (given && !pipeline)
      usage_error(std::string(flag) + " is a pipeline option: use it with --strategy " + pipeline_strategy_names());
  bool micro_batched = false;  // gpipe, 1f1b, 2bw: the strategy table's rows that flush or accumulate
  if (pipeline) {
    const StrategyTraits& traits = strategy_traits(parse_pipeline_strategy(o.strategy));
    micro_batched = traits.flushes || traits.accumulates;
  }
  if (o.micro_batches > 1 && !micro_batched)
    usage_error("--micro-batches splits the mini-batches of --strategy gpipe, 1f1b and 2bw only");
  if (o.replicas > 1 && o.strategy == "single" && !o.central_storage)
    usage_error("--replicas " + std::to_string(o.replicas) +
                " needs a replicated strategy: --strategy dp (or dp --central-storage), ps, or a pipeline with "
                "--stages under mpirun");
  if (!o.dump_gradients.empty() && o.strategy != "single")
    usage_error("--dump-gradients works with --strategy single only");
  if ((!o.x_key.empty() || !o.y_key.empty()) && o.data.rfind("npz:", 0) != 0)
    usage_error("--x-key and --y-key name arrays of npz data: use them with --data npz:FILE");
  if (!o.dump_gradients.empty() && std::filesystem::exists(o.dump_gradients) &&
      !std::filesystem::is_directory(o.dump_gradients))
    throw Error("--dump-gradients " + o.dump_gradients + ": not a directory (the gradients go there as NAME.npy)");
  check_output_path(o.output);  // before any step: a bad -o must not cost the training
  // The written model is the source file with its initializers replaced: writing it over the source
  // would leave no untrained model to start again from, and a sidecar naming a file that changed.
  std::vector<NamedPath> inputs = data_spec_files("--data", o.data);
  for (NamedPath& file : data_spec_files("--test-data", o.test_data)) inputs.push_back(file);
  inputs.insert(inputs.end(), {{"the --init-from weights", o.init_from},
                               {"the --plan", o.plan},
                               {"the --resume-from checkpoint", o.resume_from},
                               {"the --config file", o.config_file}});
  refuse_outputs_over_inputs({{"-o", o.output},
                              {"--save-best", o.save_best},
                              {"--metrics", o.metrics},
                              {"--trace", o.trace},
                              {"--tensorboard", o.tensorboard},
                              {"--dump-gradients", o.dump_gradients}},
                             inputs, {"the model being trained", o.model});
  if (!o.checkpoint_dir.empty()) check_checkpoint_dir(o.checkpoint_dir);
  if ((o.patience > 0 || !o.save_best.empty()) && o.validation <= 0)
    usage_error("--patience and --save-best watch the validation loss: keep --validation above 0");
  if (!o.save_best.empty()) check_output_path(o.save_best);
  if (o.clip_grad_norm > 0 && o.strategy != "single" && o.strategy != "dp" && o.strategy != "ps")
    usage_error(
        "--clip-grad-norm works with --strategy single, dp (and --central-storage) and ps (each push's whole "
        "gradient); pipeline stages hold parts of a mini-batch's gradient at different times and do not share its "
        "norm");
  if (o.clip_grad_norm > 0 && o.device != "cpu")
    usage_error("--clip-grad-norm clips on the CPU optimizer's path; the GPU optimizer does not clip yet");
  parse_augment(o.augment);  // a bad --augment is a usage error before any data is read
  if (o.accumulate > 1 && (o.central_storage || (o.strategy != "single" && o.strategy != "dp")))
    usage_error(
        "--accumulate works with --strategy single and dp" +
        std::string(o.strategy == "gpipe" || o.strategy == "1f1b" || o.strategy == "2bw"
                        ? ": --strategy " + o.strategy + " accumulates over its --micro-batches already"
                        : " (pipeline stages, parameter-server workers and central storage do not accumulate)"));
  if (o.accumulate > 1 && o.accumulate > o.batch / std::max<int64_t>(1, o.strategy == "dp" ? o.replicas : 1))
    usage_error("--accumulate " + std::to_string(o.accumulate) + ": each pass needs a row, and a step has " +
                std::to_string(o.batch) + " rows" +
                (o.strategy == "dp" ? " over " + std::to_string(o.replicas) + " replicas" : std::string()) +
                ": give at most that many passes");
  if (o.accumulate > 1 && o.device != "cpu")
    usage_error("--accumulate runs on the CPU; on a GPU, give the batch that fits as --batch");
  if (o.accumulate > 1 && o.bucket_mb > 0)
    usage_error("--accumulate and --bucket-mb: the gradients are all-reduced once, after the last pass of the step");
  if (o.label_smoothing > 0 && o.loss != "cross-entropy" && o.loss != "softmax-cross-entropy")
    usage_error("--label-smoothing smooths the cross-entropy's targets: use it with --loss cross-entropy");
  if (o.checkpoint_every > 0 && o.checkpoint_dir.empty())
    usage_error("--checkpoint-every " + std::to_string(o.checkpoint_every) +
                " needs --checkpoint-dir DIR: where to write the checkpoints");
  if (o.on_nonfinite == "skip" && (o.central_storage || (o.strategy != "single" && o.strategy != "dp")))
    usage_error(
        "--on-nonfinite skip works with --strategy single and dp (pipeline stages and parameter-server "
        "workers step on their own and cannot agree on a skip; central storage does not check yet)");
  if (o.resume && o.checkpoint_dir.empty() && o.resume_from.empty())
    usage_error("--resume needs --checkpoint-dir: where to find the checkpoint (or --resume-from FILE)");
  if (o.precision != "fp32" && o.device == "cpu") {
    // Said before the first step, so that nobody waits on it unknowingly: where oneDNN has no half-precision
    // primitive for this CPU, half precision is the kernels' reference loops (the README's mixed-precision
    // section gives the measured slowdown).
    const std::string isa = query_backend_info().cpu_isa;
    if (o.precision == "bf16" && cpu_has_native_bf16())
      std::fprintf(stderr,
                   "note: --precision bf16 on the CPU: Conv, Gemm and MatMul on oneDNN's bfloat16 primitives (%s)\n",
                   isa.c_str());
    else
      std::fprintf(
          stderr,
          "warning: --precision %s on the CPU computes Conv, Gemm and MatMul in onnxtrain's reference loops "
          "(oneDNN %s: far slower than fp32, which is the faster choice on the CPU\n",
          o.precision.c_str(),
          o.precision == "fp16"
              ? "2.6 has no float16 primitives for the CPU)"
              : ("has bfloat16 primitives only with AVX-512 BF16 or AMX; this CPU's ISA is " + isa + ")").c_str());
  }
}

// Several processes started by a launcher each running --strategy single would train the same model
// twice over and race for one output file.
void refuse_launcher_without_distributed_strategy(const TrainOptions& o) {
  const LaunchInfo launch = detect_launch();
  if (launch.kind == LaunchInfo::Kind::direct || launch.size <= 1) return;
  const std::string what = o.strategy == "single" ? "--strategy single trains in one process"
                           : o.central_storage    ? "--central-storage runs its replicas as threads of one process"
                                                  : "--strategy ps runs its workers as threads of one process";
  throw Error("started as " + std::to_string(launch.size) + " processes (" + launch_kind_name(launch.kind) + "), but " +
              what + ": use --strategy dp (one replica per process) or a pipeline strategy with --stages " +
              std::to_string(launch.size) + ", or start one process");
}

}  // namespace

int run_training(const TrainOptions& o) {
  check_common_options(o);
  if (o.tf32) cuda::set_allow_tf32(true);  // before any kernel is prepared
  const bool replicated_in_process = o.central_storage || o.strategy == "ps" || o.ps_predict || o.servers != 1;
  if (replicated_in_process || o.strategy == "single") refuse_launcher_without_distributed_strategy(o);
  if (replicated_in_process) return run_replicated_training(o);
  if (o.strategy != "single") return run_pipeline_training(o);
  const Device device = training_device(o, 1);  // before the data is made: a missing GPU is reported at once
  TrainingData data(o, device);
  const int64_t per_epoch = data.per_epoch, total_steps = data.total_steps;
  const TrainerOptions options = trainer_options(o, total_steps, device, data.train);
  Trainer trainer(data.model.graph, options);
  const nlohmann::json config = checkpoint_config(o, total_steps);
  const nlohmann::json export_info = checkpoint_export_info(o, data.model.graph, data.train);

  RunRole role{.step_by_step = true, .between_steps = load_adaptive_threads(o)};
  role.first_step =
      resume_or_refuse(o, data.model.graph, config, 0, [&](const TrainingCheckpoint& c, const std::string& path) {
        check_checkpoint_matches(c, trainer.trained_initializers(), path);
        trainer.restore(c.tensors, c.optimizer_state);
        check_resumed_step(c, trainer, per_epoch, path);
      });
  role.checkpoint = [&](const std::string& dir, int64_t step) {
    TrainingCheckpoint c = checkpoint_header(o, step, per_epoch, config, export_info);
    c.tensors = trainer.trained_initializers();
    c.optimizer_state = trainer.optimizer().state_tensors();
    c.optimizer_state.merge(trainer.loss_scaler_state());  // fp16: the scaler, for an exact resume
    return write_checkpoint(dir, c, static_cast<int>(o.keep_checkpoints));
  };
  role.print_report = [&] {
    print_loss_scale(trainer.loss_scaler());
    print_nonfinite_skips(trainer);
  };

  data.print_data_line(o);
  if (o.precision != "fp32") {
    std::fprintf(stderr, "precision %s: Conv, Gemm and MatMul in %s, float32 master weights%s%s\n", o.precision.c_str(),
                 o.precision == "bf16" ? "bfloat16" : "float16", trainer.loss_scaler() ? ", dynamic loss scaling" : "",
                 float32_conv_note(data.model.graph, o).c_str());
  }
  std::fprintf(
      stderr, "training %s: %lld epochs x %lld batches of %lld%s, %s lr %g (%s), loss %s; validation %lld samples%s\n",
      o.model.c_str(), static_cast<long long>(o.epochs), static_cast<long long>(per_epoch),
      static_cast<long long>(o.batch),
      o.accumulate > 1 ? (" in " + std::to_string(o.accumulate) + " passes").c_str() : "", o.optimizer.c_str(), o.lr,
      lr_schedule_kind_name(options.schedule.kind), o.loss.c_str(),
      static_cast<long long>(data.loader.validation().size()),
      trainer.running_stat_nodes()
          ? (", " + std::to_string(trainer.running_stat_nodes()) + " BatchNorm nodes with running statistics").c_str()
          : "");
  if (role.first_step == 0 && !o.dump_gradients.empty()) {
    data.loader.seek(0, 0);
    dump_gradients(trainer, data.model.graph, data.loader.next(), o.dump_gradients);
  }
  OneDeviceRun run(trainer);
  return run_epochs(o, run, data, role);
}

}  // namespace onnxtrain::cli
