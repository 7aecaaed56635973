// What `onnxtrain train` was asked to do: filled by the command line (train_command.cc), carried out
// by run_training (train_run.cc).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "executor/checkpoint.h"
#include "executor/trainer.h"
#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"
#include "frontend/model_writer.h"

namespace onnxtrain::cli {

struct TrainOptions {
  std::string model, data = "fashion-mnist", output, optimizer = "momentum", schedule = "constant";
  std::string loss = "cross-entropy", metrics, kernels, running_variance = "unbiased", dump_gradients;
  std::string normalize = "mean-std";
  std::string device = "cpu";                          // cpu | cuda | cuda:N (the first of the devices a run uses)
  std::string checkpoint_dir, resume_from, test_data;  // test_data: "" = the source's test split, "none"
  int64_t epochs = 1, batch = 64, warmup_steps = 0, limit_batches = 0, log_every = 100;
  int64_t seq_len = 0;  // tokens:/text: data: tokens per sample (0: the model input's static length)
  int64_t checkpoint_every = 0, keep_checkpoints = 3;
  int64_t patience = 0;     // early stopping: epochs without a better validation loss (0: never)
  std::string save_best;    // where the model of the best validation loss so far is written
  std::string tensorboard;  // a folder for TensorBoard event files (frontend/tensorboard_events.h)
  std::string augment;      // "crop:P,flip": training-time image augmentation (LoaderOptions::Augment)
  double lr = 0.01, momentum = 0.9, weight_decay = 0, validation = 0.1;
  double clip_grad_norm = 0;   // single, dp, cs, ps on the CPU: torch.nn.utils.clip_grad_norm_ (executor/optimizer.h)
  int64_t accumulate = 1;      // single and dp on the CPU: each step's batch runs as K passes, one update
  double label_smoothing = 0;  // cross-entropy: PyTorch's label_smoothing (graph/autodiff/loss.h)
  uint64_t seed = 0;
  bool momentum_given = false, resume = false;
  bool keep_training_mode = false;    // write BatchNormalization/Dropout as exported (training mode)
  bool bake_normalization = false;    // fold the input preprocessing into the written model
  std::string x_key, y_key;           // npz: the arrays of the inputs and the labels
  std::string freeze;                 // regex: matching parameters are not trained
  std::string config_file;            // --config (expanded into options before parsing: tools/config_file.h)
  std::string resolved_config;        // every option as CLI11's TOML (config_to_str), written to OUTPUT.toml
  std::string init_from;              // initial weights: a checkpoint or an ONNX model (tools/init_from.h)
  std::string on_nonfinite = "stop";  // stop | skip (the step, GradScaler-style; single and dp)
  std::string precision = "fp32";     // fp32 | bf16 | fp16: mixed precision (graph/mixed_precision.h)
  bool tf32 = false;  // CUDA: TF32 tensor cores for convolutions and matrix products (kernels/cuda/math_mode.h)
  // Pipeline training (train_pipeline.cc): strategy single = one device (train_run.cc).
  std::string strategy = "single", plan, spectrain_target = "sequential";
  std::string prediction_metrics = "on";  // spectrain: score each prediction in the report (host copies)
  int stages = 1, replicas = 1;
  int64_t micro_batches = 1;
  bool vertical_sync = false, deferred_bn = false, predict = false, report = false;
  std::string trace;         // pipelines: write a Chrome trace of every stage's instructions here
  double bucket_mb = 0;      // dp: all-reduce buckets of this many MB during the backward pass; 0: one after it
  double comm_timeout = 60;  // seconds any process waits for another (runs over several processes)
  // Replicated strategies in one process (train_replicated.cc): --central-storage (with --strategy dp)
  // and --strategy ps with --servers shards and --ps-predict.
  bool central_storage = false, ps_predict = false;
  int servers = 1;
};

// Trains as `o` says and writes o.output. Throws Error for bad input; returns the process exit code
// (130 when SIGINT stopped the run after writing a checkpoint).
int run_training(const TrainOptions& o);
int run_pipeline_training(const TrainOptions& o);    // --strategy dp|naive|pipedream|spectrain|gpipe
int run_replicated_training(const TrainOptions& o);  // --central-storage --strategy dp, --strategy ps

// Shared by both (train_common.cc).
std::string format_duration(double seconds);  // "1m05s", "2h03m"
std::string progress_bar(double done);        // "[#######.............]"
// The divergence guard: Error when a step's loss is not finite (naming the step and what to try), or when
// a trained float tensor holds a NaN or an infinity (naming it), so that such a model is never written.
void check_finite_loss(float loss, int64_t step);
// --on-nonfinite: stop (check_finite_loss) or skip: the trainer skipped a non-finite step, which is said,
// and 10 in a row stop the run. Called with each step's loss in order.
class NonFiniteGuard {
 public:
  explicit NonFiniteGuard(const std::string& on_nonfinite) : skip_(on_nonfinite == "skip") {}
  void check(float loss, int64_t step);

 private:
  bool skip_;
  int64_t in_a_row_ = 0;
};
// After an evaluation ("validation", "test"): a non-finite loss means the weights diverged (outputs overflow
// even when every weight is finite), so nothing is written.
void check_finite_evaluation(double loss, const std::string& split);
// before_training: the model as imported (a NaN there is the file's, not the learning rate's).
void check_finite_model(const std::map<std::string, Tensor>& model, bool before_training = false);
// The optimizer of --optimizer, --momentum and --weight-decay (trainer_options' own).
OptimizerConfig optimizer_config(const TrainOptions& o);
// Whether the trainers train only the live taps of single-pixel convolutions (graph/autodiff/live_conv_taps.h):
// what every graph that plans or resumes their training must agree on.
bool trains_live_conv_taps_only(const TrainOptions& o);
// Whether the trainers apply the CPU's graph rewrites (TrainingRecipeOptions::set_cpu_rewrites: tap-major
// weights, float32 stem and depthwise convolutions, the fusions): everywhere but on a GPU, as Trainer decides.
// With them, convolutions over small planes train on tap-major weights (graph/autodiff/tap_major_conv_weights.h).
bool trains_with_cpu_rewrites(const TrainOptions& o);
// Under --precision bf16/fp16 on the CPU, where the model has Convs that stay float32 there
// (graph/mixed_precision.h conv_stays_float32_on_cpu): "; N convolution(s) in float32 (...)", for the
// precision line. Empty otherwise.
std::string float32_conv_note(const Graph& model, const TrainOptions& o);
// `device`: where the (first) trainer runs, from training_device. Per-position labels in `train` put the
// cross-entropy's class axis last (language models' (N, T, V) logits).
TrainerOptions trainer_options(const TrainOptions& o, int64_t total_steps, Device device, const Dataset& train);
// The learning rate of each update of a run of `total_steps` steps (--lr, --schedule, --warmup-steps).
LrSchedule lr_schedule(const TrainOptions& o, int64_t total_steps);
// The model's (first) data input; Error naming the file when it has none.
const Value& data_input(const Graph& model, const std::string& model_file);
// The training data (`train` null) or the test data (`train` gives its normalisation) of `spec` for the
// model's data input: integer ids when the input is an integer type, the input's name for npz archives,
// --seq-len (or the input's static length) for token streams. Throws Error when the data do not fit the
// input or the labels exceed the model's classes.
Dataset load_model_data(const TrainOptions& o, const Graph& model, const std::string& spec,
                        const Dataset* train = nullptr);
// Imports the model again with the data input's other symbolic dims (a sequence length) bound to the
// training data's sizes, so the shapes exporters compute from them (attention masks, position ids) are
// static; leaves it as it is when there are none.
void bind_model_to_data(ImportedModel& model, const TrainOptions& o, const Dataset& train);
// The test data (test_spec), loaded before training so that a bad file fails before any step; nullopt
// when the run has no test pass.
std::optional<Dataset> load_test_data(const TrainOptions& o, const Graph& model, const Dataset& train);
// "loss 0.4321, accuracy 84.10% (6000 samples)"; with per-position labels also the perplexity (exp of the
// mean loss per token) and the tokens counted.
std::string evaluation_text(const Trainer::Evaluation& e, const Dataset& data);
// PREFIX_loss, PREFIX_accuracy (and PREFIX_perplexity) of a --metrics line.
void add_evaluation_fields(nlohmann::json& line, const std::string& prefix, const Trainer::Evaluation& e,
                           const Dataset& data);
// Cross-entropy labels above the model's class count: Error naming the data by its spec (--data, --test-data).
void check_labels_fit_model(const Dataset& data, const std::string& spec, const Graph& model, const TrainOptions& o);
// The first device of a run that places `devices` stages or replicas on consecutive devices from it
// (offset by the process's local rank under a launcher). Throws Error when --device is malformed or
// names more CUDA devices than are visible.
Device training_device(const TrainOptions& o, int devices, int local_rank = 0, const std::string& what = "");
// How the data loader makes a batch's input for a trainer on `device`: page-locked memory on a CUDA
// device (an asynchronous upload, kernels/cuda/cuda_runtime.h pinned_tensor), recycled host blocks otherwise
// (executor/host_memory.h recycled_host_tensor: no page faults for batches beyond the mmap threshold).
std::function<Tensor(DType, std::vector<int64_t>)> batch_allocator(const Device& device);
std::string test_spec(const TrainOptions& o);  // the data spec of the test pass; "" for none
// --augment "crop:P,flip" (either, in any order); a usage error (exit 2) for anything else.
LoaderOptions::Augment parse_augment(const std::string& text);
// For a strategy's start line: "" for fp32 without --accumulate, ", Conv/Gemm/MatMul in bfloat16" (or
// float16 with dynamic loss scaling), ", gradients accumulated over K passes per step".
std::string step_summary(const TrainOptions& o);
// The end of an fp16 run: the loss scale and the steps skipped (nothing without a scaler).
void print_loss_scale(const LossScaler* scaler);
// The end of an --on-nonfinite skip run: how many steps were skipped (nothing when none).
void print_nonfinite_skips(const Trainer& trainer);
Normalization normalization(const TrainOptions& o);
// How the trained model is written: inference mode unless --keep-training-mode, the preprocessing of
// `train` in its metadata, or in its first nodes with --bake-normalization (for `model`'s data input).
ModelWriteOptions model_write_options(const TrainOptions& o, const Graph& model, const Dataset& train);
// The options a resumed run must share with the run that wrote the checkpoint (any layout: one device,
// replicas, processes).
nlohmann::json checkpoint_config(const TrainOptions& o, int64_t total_steps);
// OUTPUT.toml beside the written model: the options the run resolved (o.resolved_config, which `train
// --config` reads back), headed by comments with the build's version, the time and the preprocessing
// applied to `train` (scale, mean, std). Nothing when o.resolved_config is empty.
void write_run_config(const TrainOptions& o, const Dataset& train);
// How `onnxtrain export` writes a checkpoint's model as this run writes OUTPUT (TrainingCheckpoint::export_info):
// the source model's absolute path and model_write_options as JSON (parsed back in export_command.cc).
nlohmann::json checkpoint_export_info(const TrainOptions& o, const Graph& model, const Dataset& train);
// A checkpoint after `step` steps without tensors: the data position, seed, config and export info.
TrainingCheckpoint checkpoint_header(const TrainOptions& o, int64_t step, int64_t per_epoch,
                                     const nlohmann::json& config, const nlohmann::json& export_info);
// After `trainer` (one device, or a data-parallel replica) restored checkpoint `c` (file `path`): its
// step, the optimizer's steps plus the fp16 steps skipped for inf/NaN gradients (they used their batch
// too) and its data position must agree; Error otherwise.
void check_resumed_step(const TrainingCheckpoint& c, const Trainer& trainer, int64_t per_epoch,
                        const std::string& path);
// What every strategy trains on, made in one place: the model (its sequence dims bound to the data), the
// training data, the test split (loaded before training, so that a bad file fails now and not after the
// run), the loader (shuffled by --seed, --validation held out, batches allocated for `device`) and the
// step counts. Neither copied nor moved: the loader reads `train` where it is.
struct TrainingData {
  TrainingData(const TrainOptions& o, const Device& device);
  TrainingData(const TrainingData&) = delete;
  TrainingData& operator=(const TrainingData&) = delete;

  ImportedModel model;
  Dataset train;
  std::optional<Dataset> test;
  DataLoader loader;
  int64_t per_epoch;      // --limit-batches, else the loader's batches per epoch
  int64_t total_steps;    // per_epoch × --epochs
  int64_t batch_rows;     // rows of a full mini-batch: --batch, or every training row where they are fewer
  std::string init_line;  // --init-from: what was loaded (printed by print_data_line)

  // Prints "data: ..." (the training data's description), with --freeze the parameters it froze, with
  // --init-from what it loaded.
  // The data line, --init-from and --freeze, and warnings about the model's export (export_pitfalls).
  void print_data_line(const TrainOptions& o) const;
};
// For a run on the CPU whose thread count OMP_NUM_THREADS does not fix: a step hook that samples how busy
// other processes keep this process's CPUs (at most every 0.5 s) and lowers or restores the OpenMP thread
// count to match (graph/load_adaptive_threads.h), printing each change. Null otherwise: then runs repeat bit
// for bit, whereas a thread count that changes changes the last bits of oneDNN's reductions.
std::function<void()> load_adaptive_threads(const TrainOptions& o);
// --resume / --resume-from: reads the checkpoint to continue from (--resume-from FILE, else the newest of
// --checkpoint-dir), checks its options against `config`, hands it to `restore` and returns its step; 0 for
// a fresh run. A fresh run into a directory that holds checkpoints is refused (rotation would keep the old
// run's newer ones), and so is a damaged newest checkpoint, naming the newest intact one. After
// --resume-from FILE the directory's newer checkpoints are renamed NAME.superseded. A checkpoint of an
// earlier build with whole weights where `model`'s convolutions now train their live taps is converted.
int64_t resume_or_refuse(const TrainOptions& o, const Graph& model, const nlohmann::json& config, int rank,
                         const std::function<void(const TrainingCheckpoint&, const std::string&)>& restore);

}  // namespace onnxtrain::cli
