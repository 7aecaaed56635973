// `onnxtrain export CHECKPOINT -o OUT.onnx`: a checkpoint's weights written as the trained ONNX model,
// exactly as `train` writes its output (inference mode, the preprocessing in metadata_props, or baked),
// from what the checkpoint records (TrainingCheckpoint::export_info, tools/train_common.cc
// checkpoint_export_info). A run stopped by SIGINT, or the epoch before a divergence, becomes a
// deployable model without training again.
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "executor/checkpoint.h"
#include "frontend/importer.h"
#include "frontend/model_writer.h"
#include "graph/autodiff/live_conv_taps.h"
#include "graph/error.h"
#include "tools/commands.h"
#include "tools/init_from.h"
#include "tools/output_paths.h"
#include "tools/train_options.h"

namespace onnxtrain::cli {

namespace {

struct ExportOptions {
  std::string checkpoint, output, model;
  bool keep_training_mode = false;
};

// ModelWriteOptions as checkpoint_export_info wrote them.
ModelWriteOptions write_options_of(const nlohmann::json& info, const std::string& path) {
  try {
    ModelWriteOptions w{.inference_mode = info.value("inference_mode", true),
                        .metadata = info.value("metadata", std::map<std::string, std::string>{})};
    if (info.contains("bake")) {
      const nlohmann::json& b = info.at("bake");
      w.bake = InputPreprocessing{.input = b.at("input").get<std::string>(),
                                  .raw_uint8 = b.at("raw_uint8").get<bool>(),
                                  .scale = b.at("scale").get<float>(),
                                  .mean = b.at("mean").get<std::vector<float>>(),
                                  .std = b.at("std").get<std::vector<float>>()};
    }
    return w;
  } catch (const nlohmann::json::exception& e) {
    throw Error(path + ": the checkpoint's \"export\" record is malformed: " + e.what());
  }
}

void run_export(const ExportOptions& o) {
  const std::string path = checkpoint_file_of(o.checkpoint, "export");
  std::error_code ec;
  check_output_path(o.output);
  const TrainingCheckpoint c = read_checkpoint(path);
  std::string model = o.model;
  if (model.empty()) {
    if (!c.export_info.contains("model") || !c.export_info.at("model").is_string())
      throw Error(path + ": the checkpoint does not record its model (written before 2026-12-02): give --model");
    model = c.export_info.at("model").get<std::string>();
  }
  if (!std::filesystem::exists(model, ec)) {
    throw Error(path + ": its model " + model + " is not there any more: give --model with the same model's file");
  }
  refuse_outputs_over_inputs({{"-o", o.output}}, {{"the checkpoint", path}},
                             {"the model the checkpoint trained", model});
  // Every parameter and running statistic of the model must come from the checkpoint: a model file that
  // is not the one trained would otherwise be written with some weights untrained.
  const ImportedModel imported = import_model(model);
  // Convolutions that trained only their live taps get their whole weights back (live_conv_taps.h).
  const std::map<std::string, Tensor> tensors = with_full_conv_weights(imported.graph, c.tensors);
  for (ValueId id : imported.graph.initializers) {
    const Value& v = imported.graph.value(id);
    if ((v.role == ValueRole::Parameter || v.role == ValueRole::State) && !tensors.count(v.name))
      throw Error(path + ": holds no '" + v.name + "', a parameter of " + model + " (a checkpoint of another model?)");
  }
  check_finite_model(tensors);
  ModelWriteOptions options = write_options_of(c.export_info, path);
  if (o.keep_training_mode) options.inference_mode = false;
  write_trained_model(model, o.output, tensors, options);
  std::printf("exported step %lld of %s (model %s) to %s%s\n", static_cast<long long>(c.step), path.c_str(),
              model.c_str(), o.output.c_str(), options.inference_mode ? "" : " (training mode kept)");
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto o = std::make_shared<ExportOptions>();
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Write a checkpoint's weights as the trained ONNX model, as `train` writes its output: inference mode, the "
      "preprocessing recorded in metadata_props (or baked, when the run baked it). A run stopped by Ctrl-C, or "
      "an earlier checkpoint of a run that diverged, becomes a deployable model");
  cmd->add_option("checkpoint", o->checkpoint, "a .otck checkpoint, or a --checkpoint-dir (its newest)")->required();
  cmd->add_option("-o,--output", o->output, "the .onnx file to write (replaced atomically)")->required();
  cmd->add_option("--model", o->model,
                  "the model the checkpoint was trained from (default: the path the checkpoint records)");
  cmd->add_flag("--keep-training-mode", o->keep_training_mode,
                "keep BatchNormalization/Dropout in training mode as exported (to train the result further)");
  cmd->callback([o] { run_export(*o); });
}

}  // namespace onnxtrain::cli
