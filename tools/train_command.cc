// `onnxtrain train MODEL --data SPEC -o OUT.onnx [...]`: trains a model on one device (the CPU) and writes
// it back with the trained parameters and BatchNorm running statistics.
#include <memory>
#include <string>
#include <vector>

#include "executor/pipeline/schedule.h"
#include "partitioner/plan_io.h"
#include "tools/cli_choices.h"
#include "tools/commands.h"
#include "tools/train_options.h"

namespace onnxtrain::cli {

namespace {

// single, dp, ps and the pipeline strategies (executor/pipeline/schedule.h's table).
std::vector<std::string> strategy_names() {
  std::vector<std::string> names{"single", "dp", "ps"};
  const std::string pipelines = pipeline_strategy_names();
  for (size_t at = 0; at < pipelines.size();) {
    const size_t bar = pipelines.find(" | ", at);
    names.push_back(pipelines.substr(at, bar == std::string::npos ? std::string::npos : bar - at));
    at = bar == std::string::npos ? pipelines.size() : bar + 3;
  }
  return names;
}

// --plan without --stages: the plan's stage count.
void stages_from_plan(TrainOptions& o, const CLI::App& cmd) {
  if (o.plan.empty() || cmd.count("--stages") > 0 || !is_pipeline_strategy(o.strategy)) return;
  o.stages = static_cast<int>(read_plan(o.plan).stages.size());
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model on the CPU and write it with the trained parameters (and BatchNorm running statistics).\n"
      "Threads: the CPUs this process may use (affinity mask, cgroup quota); on one device, fewer while other\n"
      "processes keep some of them busy, back when they stop. OMP_NUM_THREADS=N fixes the count.\n"
      "Deterministic: the same command and seed give the same parameters bit for bit (same machine and a thread\n"
      "count OMP_NUM_THREADS fixes, or one that did not change).\n"
      "SIGINT/SIGTERM write a checkpoint and stop (exit code 130); --resume continues from it. One-device, dp and\n"
      "central-storage runs stop after the step in flight, pipelines and the parameter server where the pipeline\n"
      "next drains (the next --checkpoint-every boundary or the epoch's end); central storage and the parameter\n"
      "server write no checkpoint yet. Across processes the launcher's SIGTERM ends every rank (exit 143).");
  // An option given twice takes its last value: a --config file's options come first (tools/config_file.h).
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("--config", o->config_file,
                  "read options from this TOML file first (key = value per option, as `--key value` would give it, "
                  "e.g. lr = 0.1, strategy = \"pipedream\", model = \"m.onnx\"); options on the command line win. "
                  "Every run writes the options it was given to OUT.onnx.toml, which --config reads back");
  cmd->add_option("model", o->model,
                  "the .onnx file to train (the loss attaches to its first output; a model with several data inputs, "
                  "such as BERT's input_ids, attention_mask and token_type_ids, reads them from npz:FILE; required, on "
                  "the command line or as model = \"FILE\" in --config)");
  // The model as an option too, the key a --config file gives it (tools/config_file.h).
  cmd->add_option("--model", o->model, "the model (as the positional MODEL; the spelling --config files use)")
      ->group("");
  cmd->add_option("-o,--output", o->output,
                  "where to write the trained .onnx (atomically; checked by the ONNX checker). It is ready for "
                  "inference: BatchNormalization uses the trained running statistics (training_mode removed), Dropout "
                  "is off, and metadata_props record the input preprocessing (onnxtrain.preprocess.scale, .mean, "
                  ".std, .layout) and onnxtrain.classes")
      ->required();
  cmd->add_flag("--keep-training-mode", o->keep_training_mode,
                "write BatchNormalization and Dropout as the model had them (training_mode=1 from a train() export), "
                "for further training (onnxtrain reads an inference-mode Dropout as off); ONNX Runtime would then "
                "normalise with each batch's own statistics and apply Dropout");
  cmd->add_flag("--bake-normalization", o->bake_normalization,
                "fold the input preprocessing into the written model as its first nodes (Cast of uint8 data, the "
                "1/255 scale, (x - mean[c]) / std[c]): it then takes the raw values the training files hold, and "
                "its metadata_props say that no preprocessing is left to apply. Without it the preprocessing is "
                "only recorded (onnxtrain.preprocess.*). Integer token ids are never preprocessed");
  cmd->add_option(
      "--data", o->data,
      "training data: fashion-mnist (default), mnist:DIR, idx:IMAGES,LABELS, cifar10:DIR, imagefolder:DIR "
      "(torchvision's ImageFolder: DIR/<class>/<image>.jpg|png, or DIR/train with DIR/val or DIR/test; decoded and "
      "resized to the model's input), npz:FILE, "
      "npy:X.npy,Y.npy, synthetic[:C,H,W:CLASSES:N], tokens:FILE (a token stream: .npy ids or nanoGPT's "
      "uint16 .bin), text:FILE (any file's bytes as tokens 0-255). An npz may name its arrays after the "
      "model's input, with `labels`; a model with several data inputs reads an npz with an array named after "
      "each (integer ones as ids, none normalised) and `labels`. Labels are class indices (N) or one per position "
      "(N,T) for language "
      "models, whose logits are then (N,T,V); -100 marks a label that counts for nothing. A model whose "
      "input is an integer type reads integer data as token ids, unscaled and not normalised");
  cmd->add_option("--augment", o->augment,
                  "training-time augmentation of images (N,C,H,W), new draws every epoch (by --seed): crop:P (a random "
                  "window of the image padded by P black pixels, torchvision's RandomCrop(size, padding=P)) and/or "
                  "flip (RandomHorizontalFlip), e.g. crop:4,flip as CIFAR recipes use; never on validation or test");
  cmd->add_option("--freeze", o->freeze,
                  "parameters whose names match this regex (ECMAScript, searched anywhere in the name) are not "
                  "trained: fine-tuning as requires_grad_(False) does; they are written back unchanged");
  auto* init = cmd->add_option(
      "--init-from", o->init_from,
      "start from these weights: a checkpoint (.otck, or the newest of a checkpoint directory) or an ONNX model "
      "(initializers by name, as load_state_dict). Weights only: the optimizer, schedule and step start afresh, "
      "as this run's options say (fine-tuning, or more epochs after a finished schedule). Parameters the source "
      "lacks keep their initial values and are listed; a shape that differs is an error");
  cmd->add_option(
      "--x-key", o->x_key,
      "npz data: the array of the inputs (default: the model input's name, then x, inputs, x_train/x_test)");
  cmd->add_option("--y-key", o->y_key, "npz data: the array of the labels (default: labels, then y, y_train/y_test)");
  cmd->add_option("--seq-len", o->seq_len,
                  "tokens:/text: data: tokens per sample (default: the model input's static sequence length). The "
                  "stream is cut into windows with next-token labels, at an offset drawn by --seed; the validation "
                  "split is the stream's tail")
      ->check(positive_number);
  cmd->add_option("--epochs", o->epochs, "passes over the training rows (default 1)")->check(positive_number);
  cmd->add_option("--batch", o->batch,
                  "samples per step (default 64): the global mini-batch, which dp replicas, ps workers and pipeline "
                  "copies share and gpipe/1f1b/2bw split into --micro-batches, as PyTorch's global batch size")
      ->check(positive_number);
  cmd->add_option("--lr", o->lr, "base learning rate (default 0.01)")->check(positive_number);
  cmd->add_option(
         "--optimizer", o->optimizer,
         "sgd | momentum (SGD with --momentum, the default) | nesterov | adam | adamw | adagrad; torch.optim semantics")
      ->check(one_of({"sgd", "momentum", "nesterov", "adam", "adamw", "adagrad"}));
  cmd->add_option("--momentum", o->momentum, "momentum of momentum/nesterov, or of sgd when given (default 0.9)")
      ->each([o](const std::string&) { o->momentum_given = true; });
  cmd->add_option("--weight-decay", o->weight_decay, "L2 weight decay (decoupled for adamw; default 0)")
      ->check(non_negative_number);
  cmd->add_option("--schedule", o->schedule,
                  "learning-rate schedule per step: constant (default) | step (x0.1 after each third of the steps) | "
                  "cosine (down to 0 at the last step)");
  cmd->add_option("--warmup-steps", o->warmup_steps, "linear warm-up from lr/3 over the first N steps (default 0)")
      ->check(non_negative_number);
  cmd->add_option("--loss", o->loss,
                  "cross-entropy (default) | mse | l1 | bce-with-logits (one-hot targets from the class labels) | "
                  "output:NAME (a scalar loss the model computes)");
  cmd->add_option("--seed", o->seed, "seed of the shuffle and of synthetic data (default 0)")->check(seed_number);
  cmd->add_option(
         "--validation", o->validation,
         "fraction of the training rows held out for validation each epoch (default 0.1): "
         "drawn by --seed, stratified by class (every class gives its share); for token streams the last windows")
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--limit-batches", o->limit_batches, "stop each epoch after K batches (quick runs; default all)")
      ->check(non_negative_number);
  cmd->add_option("--log-every", o->log_every, "when stderr is not a terminal: a log line every N steps (default 100)")
      ->check(positive_number);
  cmd->add_option(
      "--metrics", o->metrics,
      "write FILE.jsonl: one JSON object per step {step,epoch,loss,lr,time_s (since training began),samples_per_s}, "
      "per epoch {epoch,val_loss,val_accuracy} (and val_perplexity for per-position labels), and for dp and pipelines "
      "the run's report {report:{...}}. Epochs count from 1, as on the console; every line has wall_time (seconds "
      "since the Unix epoch, as TensorBoard's). A resumed run appends");
  cmd->add_option("--tensorboard", o->tensorboard,
                  "write the figures of --metrics as TensorBoard scalars to an event file in DIR (made if needed; "
                  "`tensorboard --logdir DIR`): train/loss, train/lr, train/samples_per_s per step, val/loss and "
                  "val/accuracy per epoch, test/loss and test/accuracy at the end, as SummaryWriter.add_scalar");
  cmd->add_option("--kernels", o->kernels, "kernel implementation to use (\"reference\": the plain loops)");
  cmd->add_option("--device", o->device,
                  "cpu (the default) | cuda | cuda:N: where the forward and backward passes run. With cuda, pipeline "
                  "stages and replica or worker threads take consecutive GPUs from N (stage k on cuda:N+k); a process "
                  "started by mpirun or torchrun takes cuda:N+LOCAL_RANK. Weights and the optimizer step stay on the "
                  "GPU; dp replicas all-reduce their gradients with NCCL, pipeline stages in separate processes send "
                  "activations with NCCL; central storage and parameter-server shards stay in host memory. A node "
                  "without a CUDA kernel is an error before training starts, never a silent CPU fallback");
  cmd->add_flag("--tf32", o->tf32,
                "cuda: let convolutions and matrix products use TF32 tensor cores (operands rounded to 10 mantissa "
                "bits, about 1e-3 relative error, several times faster on Ampere and newer; PyTorch's allow_tf32). "
                "Default: strict float32");
  cmd->add_option(
         "--precision", o->precision,
         "fp32 (the default) | bf16 | fp16: mixed precision as PyTorch's autocast. Conv, Gemm and MatMul "
         "read their operands cast to bfloat16/float16 and compute in it (float accumulation); biases, "
         "normalisation, softmax, losses, elementwise ops and the optimizer stay float32, and so do the "
         "weights (float32 master copies: the written model and checkpoints are float32). fp16 scales the loss "
         "dynamically (GradScaler: 65536 at first, halved and the step skipped when a gradient is inf/NaN, "
         "doubled after 2000 finite steps); bf16 needs no scaling. Every strategy takes bf16; pipelines refuse "
         "fp16 (their stages step on their own, so they cannot agree on a skip)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  cmd->add_option(
         "--on-nonfinite", o->on_nonfinite,
         "stop (the default): a NaN or infinite loss stops the run at once, exit 1, nothing written (checkpoints "
         "already written are kept) | skip: a step whose loss or any gradient is NaN or infinite changes "
         "nothing (weights, optimizer state, BatchNorm statistics), as GradScaler skips an overflowing step; "
         "10 skips in a row stop the run. skip is for --strategy single and dp on the CPU")
      ->check(CLI::IsMember({"stop", "skip"}));
  cmd->add_option("--test-data", o->test_data,
                  "data to report test loss and accuracy on after training (default: the test split of fashion-mnist, "
                  "mnist, cifar10 or synthetic data; none: no test pass)");
  cmd->add_option(
         "--normalize", o->normalize,
         "input normalisation: mean-std (per channel, with the training split's statistics; the default) | none")
      ->check(CLI::IsMember({"mean-std", "none"}));
  cmd->add_option(
         "--bn-running-var", o->running_variance,
         "BatchNorm running variance: unbiased (PyTorch's, the default) | population (the ONNX specification's)")
      ->check(CLI::IsMember({"unbiased", "population"}));
  cmd->add_option(
      "--dump-gradients", o->dump_gradients,
      "write every parameter's gradient of the first step to DIR/NAME.npy (to compare with another framework)");
  cmd->add_option("--checkpoint-dir", o->checkpoint_dir,
                  "directory of checkpoints (parameters, optimizer state, step, data position; written atomically)");
  cmd->add_option("--checkpoint-every", o->checkpoint_every,
                  "write a checkpoint every K steps (default 0: only on SIGINT)")
      ->check(non_negative_number);
  cmd->add_option("--keep-checkpoints", o->keep_checkpoints,
                  "how many of the newest checkpoints to keep (default 3; 0: all)")
      ->check(non_negative_number);
  cmd->add_option(
         "--clip-grad-norm", o->clip_grad_norm,
         "scale the gradients down to this total 2-norm (over every parameter) when it is larger, before "
         "each update, as torch.nn.utils.clip_grad_norm_ (single, dp, central storage, and ps per push, on the CPU; "
         "default 0: off)")
      ->check(non_negative_number);
  cmd->add_option("--accumulate", o->accumulate,
                  "gradient accumulation: each step's --batch runs as K forward and backward passes of batch/K rows "
                  "(per replica for dp), whose gradients add up to the batch's before one update: the memory of a "
                  "batch/K pass for the step of the whole batch, as DeepSpeed's gradient_accumulation_steps "
                  "(--batch stays the samples per update). BatchNorm normalises each pass with its own statistics. "
                  "Single and dp on the CPU (default 1)")
      ->check(positive_number);
  cmd->add_option("--label-smoothing", o->label_smoothing,
                  "cross-entropy against (1 - EPS) on the label plus EPS/C on every class (PyTorch's label_smoothing; "
                  "torchvision's recipes use 0.1). The validation and test losses include it, as the recipes "
                  "report them; `onnxtrain eval` reports the plain cross-entropy (default 0)")
      ->check(non_negative_number & CLI::Range(0.0, 1.0));
  cmd->add_option("--patience", o->patience,
                  "early stopping: end the run after this many epochs without a lower validation loss (the test "
                  "pass and -o then follow as after the last epoch; -o holds the last weights, --save-best the best)")
      ->check(positive_number);
  cmd->add_option("--save-best", o->save_best,
                  "also write the model of the epoch with the lowest validation loss so far to this .onnx file "
                  "(rewritten at each improvement, like -o; score it with `onnxtrain eval`)");
  auto* resume =
      cmd->add_flag("--resume", o->resume,
                    "continue from the newest checkpoint in --checkpoint-dir (refused when it is damaged, naming the "
                    "newest intact one, or was written for another model or other options)");
  auto* resume_from = cmd->add_option(
      "--resume-from", o->resume_from,
      "continue from this checkpoint file (an older one of --checkpoint-dir, whose newer checkpoints are "
      "then renamed NAME.superseded; or one from elsewhere)");
  init->excludes(resume)->excludes(resume_from);  // a resume restores the weights itself
  cmd->add_option(
         "--strategy", o->strategy,
         "single (one device, the default) | dp (--replicas data-parallel replicas on threads) | naive | "
         "pipedream | spectrain | gpipe | 1f1b | 2bw (pipeline training over --stages threads: naive without weight "
         "handling, pipedream stashing weight versions, spectrain predicting them, gpipe and 1f1b flushing each "
         "mini-batch, 2bw double-buffering) | "
         "ps "
         "(asynchronous "
         "parameter server: --replicas workers against --servers shards). Started by mpirun (or torchrun-style "
         "RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT), dp and the pipelines run one replica or stage per process")
      ->check(one_of(strategy_names()));
  cmd->add_option("--replicas", o->replicas,
                  "dp: data-parallel replicas (threads; under mpirun one per process, so leave it out or give the "
                  "process count); ps: workers; with --stages under mpirun: copies of the pipeline, each on its "
                  "rows of every mini-batch (mpirun -np stages*replicas) (default 1)")
      ->check(positive_number);
  cmd->add_option("--stages", o->stages, "pipeline stages (default 1)")->check(positive_number);
  cmd->add_option("--micro-batches", o->micro_batches, "gpipe, 1f1b, 2bw: micro-batches per mini-batch (default 1)")
      ->check(positive_number);
  cmd->add_option("--plan", o->plan,
                  "stage split from `onnxtrain partition -o plan.json` (default: planned at start); --stages defaults "
                  "to its stage count");
  cmd->add_option("--prediction-metrics", o->prediction_metrics,
                  "spectrain: on (default) scores every prediction against the version it aimed at (pred.error in "
                  "the report; keeps host copies of the predicted and current weights until then) | off")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--spectrain-target", o->spectrain_target,
                  "spectrain: sequential (predict W_i, the default) | paper (the SpecTrain paper's timeline)");
  cmd->add_option(
      "--trace", o->trace,
      "pipelines: write FILE.json, a Chrome trace (open in Perfetto or chrome://tracing) with one track per "
      "stage and a span per forward, backward, update, send and receive, labelled with the mini-batch and "
      "the weight version read; a receive's span is the time the stage waited");
  cmd->add_flag("--vertical-sync", o->vertical_sync, "pipedream: every stage uses the weight version stage 0 used");
  cmd->add_flag("--predict", o->predict,
                "2bw: each forward reads SpecTrain's prediction of the weights its mini-batch's update will be "
                "applied to (the optimizer's own rule run s updates ahead) and stashes it for the backward, so the "
                "update is no longer one version stale (PipeDream-2BW with SpecTrain on top)");
  cmd->add_flag("--deferred-bn", o->deferred_bn,
                "gpipe, 1f1b, 2bw: BatchNorm running statistics updated once per mini-batch from all its "
                "micro-batches, as on one device (torchgpipe's DeferredBatchNorm); each micro-batch is still "
                "normalised with its own statistics");
  cmd->add_option(
         "--bucket-mb", o->bucket_mb,
         "dp: all-reduce the gradients in buckets of about this many MB, each as soon as the backward pass "
         "has computed it, overlapping communication with the rest of the backward pass (DDP's bucket_cap_mb); "
         "0: one all-reduce after the backward pass (default 0; the result is the same bit for bit). On GPUs "
         "NCCL all-reduces every gradient in one group after the backward pass and this option does not apply")
      ->check(non_negative_number);
  cmd->add_option("--comm-timeout", o->comm_timeout,
                  "runs over several processes (mpirun, torchrun) and pipeline stages: the longest any process or "
                  "stage waits for another, in seconds, before it stops naming the rank and what it waited for "
                  "(default 60)")
      ->check(positive_number);
  cmd->add_flag("--central-storage", o->central_storage,
                "with --strategy dp: keep the weights and optimizer state once (a master copy) instead of per replica; "
                "replicas copy the weights each step, their gradients are summed into it in replica order and one "
                "optimizer updates it (TF CentralStorageStrategy; the same result as dp bit for bit)");
  cmd->add_option("--servers", o->servers,
                  "ps: parameter-server shards (default 1); parameters are split over them balancing bytes, each "
                  "shard has its own optimizer and applies each pushed gradient as it arrives")
      ->check(positive_number);
  cmd->add_flag("--ps-predict", o->ps_predict,
                "ps: a worker trains on SpecTrain's predicted weights: the shard optimizer's own update rule run s "
                "steps ahead (s: the worker's measured staleness, the mean over its own pushes, rounded); prints the "
                "staleness report either way");
  cmd->callback([o, cmd] {
    // Not ->required(): CLI11 checks that before a --config file could give it.
    if (o->model.empty()) usage_error("model is required: onnxtrain train MODEL ... (or model = \"FILE\" in --config)");
    stages_from_plan(*o, *cmd);
    o->resolved_config = cmd->config_to_str(false, false);  // the options given (the rest: this version's defaults)
    if (const int code = run_training(*o); code != 0) throw CLI::RuntimeError(code);
  });
}

}  // namespace onnxtrain::cli
