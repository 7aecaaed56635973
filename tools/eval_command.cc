// `onnxtrain eval MODEL --data SPEC`: a trained model scored on a dataset, as torchvision's reference
// scripts and Hugging Face's evaluate report it: the cross-entropy loss, top-1 and top-5 accuracy, a
// confusion matrix (up to 20 classes), and for language models (N, T, V) the perplexity and the token
// accuracy. The data go through the preprocessing the model's metadata_props record (onnxtrain.preprocess.*:
// the scale of uint8 pixels, the training run's mean and std), so a model written by `train` scores here
// what its training run's final test line said. A model written with --bake-normalization does its
// preprocessing itself: it is fed the data as the files hold them (uint8 pixels as uint8).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "executor/inference_session.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"
#include "graph/autodiff/loss.h"
#include "graph/autodiff/training_recipe.h"
#include "graph/error.h"
#include "tools/cli_choices.h"
#include "tools/commands.h"
#include "tools/model_import.h"
#include "tools/output_paths.h"
#include "tools/text_file.h"

namespace onnxtrain::cli {

namespace {

struct EvalOptions {
  std::string model, data, split = "test", json, kernels, x_key, y_key;
  int64_t batch = 256, seq_len = 0;
};

// `rows` rows: t's, then copies of its last row (rows 0 or no more than t has: t itself).
Tensor fill_rows(Tensor t, int64_t rows) {
  const int64_t have = t.rank() > 0 ? t.sizes()[0] : 0;
  if (rows <= have || have == 0) return t;
  std::vector<int64_t> sizes = t.sizes();
  sizes[0] = rows;
  Tensor filled(t.dtype(), sizes);
  const size_t row_bytes = t.nbytes() / static_cast<size_t>(have);
  std::memcpy(filled.raw(), t.raw(), t.nbytes());
  for (int64_t r = have; r < rows; ++r)
    std::memcpy(filled.raw() + r * row_bytes, t.raw() + (have - 1) * row_bytes, row_bytes);
  return filled;
}

std::vector<float> floats_of(const std::string& text) {
  std::vector<float> values;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) values.push_back(std::stof(item));
  return values;
}

// The data options the model's metadata imply: its recorded mean and std (none: not normalised; a baked
// model records none, and its uint8 input reads the pixels as integers, unscaled).
DatasetOptions data_options(const EvalOptions& o, const ImportedModel& imported) {
  const Graph& model = imported.graph;
  std::map<std::string, std::string> meta = imported.metadata;
  DatasetOptions options = data_options_for(model, o.seq_len);
  options.split = o.split;
  options.x_key = o.x_key, options.y_key = o.y_key;
  // An image folder's classes by name, as the model learned them: a folder holding only some of them
  // (images of dogs alone) keeps the model's labels instead of numbering its own folders from 0.
  if (meta.count("onnxtrain.class_names")) {
    try {
      options.class_names = nlohmann::json::parse(meta["onnxtrain.class_names"]).get<std::vector<std::string>>();
    } catch (const nlohmann::json::exception&) {
      throw Error(o.model + ": metadata onnxtrain.class_names is not a JSON array of names");
    }
  }
  if (meta.count("onnxtrain.preprocess.mean") && meta.count("onnxtrain.preprocess.std")) {
    try {
      options.normalize = Normalization::MeanStd;
      options.mean = floats_of(meta["onnxtrain.preprocess.mean"]);
      options.std = floats_of(meta["onnxtrain.preprocess.std"]);
    } catch (const std::exception&) {
      throw Error(o.model + ": metadata onnxtrain.preprocess.mean/.std are not comma-separated numbers");
    }
  }
  return options;
}

// A baked model's uint8 input: the pixels, read as integer values, back in uint8 (Error naming the file for
// a value outside 0..255: data of another kind than the model was trained on).
Tensor as_uint8_pixels(const Tensor& values, const std::string& data) {
  Tensor pixels(DType::UInt8, values.sizes());
  auto* out = reinterpret_cast<uint8_t*>(pixels.raw());
  const std::vector<int64_t> all = values.to_int64();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i] < 0 || all[i] > 255)
      throw Error(data + ": value " + std::to_string(all[i]) +
                  " of the inputs is no uint8 pixel, which the model reads");
    out[i] = static_cast<uint8_t>(all[i]);
  }
  return pixels;
}

struct Scores {
  double loss_sum = 0;
  int64_t counted = 0, top1 = 0, top5 = 0;
  std::vector<int64_t> confusion;  // classes × classes: [label][predicted]
};

// Adds one batch's rows (or positions): logits (rows, classes) against labels (rows), -100 ignored.
void score(const float* logits, const int64_t* labels, int64_t rows, int64_t classes, Scores& s) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t label = labels[r];
    if (label == kIgnoredLabel) continue;
    if (label < 0 || label >= classes) {
      throw Error("label " + std::to_string(label) + " is outside the model's " + std::to_string(classes) + " classes");
    }
    const float* z = logits + r * classes;
    const float peak = *std::max_element(z, z + classes);
    double sum = 0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c] - peak));
    s.loss_sum += std::log(sum) - static_cast<double>(z[label] - peak);
    int64_t above = 0;  // classes scored higher than the label (ties count for the label, as torch's topk)
    for (int64_t c = 0; c < classes; ++c) above += z[c] > z[label] ? 1 : 0;
    s.top1 += above == 0 ? 1 : 0;
    s.top5 += above < 5 ? 1 : 0;
    ++s.counted;
    if (!s.confusion.empty())
      ++s.confusion[static_cast<size_t>(label * classes + (std::max_element(z, z + classes) - z))];
  }
}

void run_eval(const EvalOptions& o) {
  refuse_outputs_over_inputs({{"--json", o.json}}, data_spec_files("--data", o.data), {"the model evaluated", o.model});
  ImportedModel model = import_model(o.model);
  if (const std::string why = batch_not_on_the_first_axis(o.model, model.graph); !why.empty()) throw Error(why);
  if (model.graph.inputs.empty() || model.graph.outputs.empty())
    throw Error(o.model + ": eval needs a model with a data input and an output");
  const DatasetOptions options = data_options(o, model);
  Dataset data = load_dataset(o.data, options);
  if (model.graph.value(model.graph.inputs[0]).dtype == DType::UInt8)
    data.inputs = as_uint8_pixels(data.inputs, o.data);
  std::map<std::string, std::vector<int64_t>> sizes;
  const DataInputs all = data.model_inputs();
  for (const auto& [name, tensor] : all.tensors) sizes[name.empty() ? options.input_name : name] = tensor.sizes();
  if (SymbolBindings dims = input_dim_bindings(model.graph, sizes); !dims.empty())
    model = import_model(o.model, {.dims = dims});
  check_data_fits_model(data, model.graph);
  const Graph graph = make_inference_graph(model.graph);
  InferenceSession session(graph, o.kernels);
  const std::string logits_name = graph.value(graph.outputs[0]).name;
  const bool per_position = data.per_position_labels();

  // A model exported with a fixed batch runs in batches of that size, the last one filled up with copies
  // of its last row whose outputs are not scored.
  const std::optional<int64_t> fixed = fixed_batch(model.graph);
  const int64_t batch = fixed.value_or(o.batch);
  if (fixed && *fixed != o.batch)
    std::printf("eval: %s has a fixed batch of %lld: evaluating in batches of that size\n", o.model.c_str(),
                static_cast<long long>(*fixed));
  Scores s;
  int64_t classes = 0;
  const int64_t n = data.size();
  for (int64_t begin = 0; begin < n; begin += batch) {
    const int64_t end = std::min(n, begin + batch);
    std::map<std::string, Tensor> feed;
    for (const auto& [name, tensor] : all.tensors)
      feed[name.empty() ? options.input_name : name] = fill_rows(slice_rows(tensor, begin, end), fixed ? batch : 0);
    Tensor logits = session.run(feed).at(logits_name);
    if (fixed && logits.rank() > 0 && logits.sizes()[0] == batch) logits = slice_rows(logits, 0, end - begin);
    if (logits.dtype() == DType::Float64) {  // a model exported in float64: scored as float32 logits
      Tensor narrow(DType::Float32, logits.sizes());
      const auto wide = logits.data<double>();
      std::transform(wide.begin(), wide.end(), narrow.data<float>().begin(),
                     [](double v) { return static_cast<float>(v); });
      logits = std::move(narrow);
    }
    const Tensor labels = slice_rows(data.labels, begin, end);
    if (logits.dtype() != DType::Float32 || logits.rank() != (per_position ? 3 : 2) ||
        logits.sizes()[0] != end - begin) {
      throw Error(o.model + ": the first output '" + logits_name + "' is " + Shape::of(logits.sizes()).to_string() +
                  ": expected float32 logits (batch, " + (per_position ? "T, " : "") + "classes)");
    }
    classes = logits.sizes().back();
    if (s.confusion.empty() && !per_position && classes <= 20)
      s.confusion.assign(static_cast<size_t>(classes * classes), 0);
    score(logits.data<float>().data(), labels.data<int64_t>().data(), labels.numel(), classes, s);
  }
  if (s.counted == 0) throw Error(o.data + ": no labelled samples to evaluate");

  const double loss = s.loss_sum / static_cast<double>(s.counted);
  const double top1 = static_cast<double>(s.top1) / static_cast<double>(s.counted);
  const double top5 = static_cast<double>(s.top5) / static_cast<double>(s.counted);
  std::printf("data: %s\n", data.description.c_str());
  nlohmann::json doc{{"model", o.model}, {"data", o.data}, {"samples", n}, {"loss", loss}, {"classes", classes}};
  if (per_position) {
    std::printf("eval: loss %.4f, perplexity %.2f, token accuracy %.2f%% (%lld samples, %lld tokens)\n", loss,
                std::exp(loss), 100.0 * top1, static_cast<long long>(n), static_cast<long long>(s.counted));
    doc["perplexity"] = std::exp(loss), doc["token_accuracy"] = top1, doc["tokens"] = s.counted;
  } else {
    std::printf("eval: loss %.4f, accuracy %.2f%% (top-1), %.2f%% (top-5) (%lld samples)\n", loss, 100.0 * top1,
                100.0 * top5, static_cast<long long>(n));
    doc["accuracy"] = top1, doc["top5_accuracy"] = top5;
  }
  if (!s.confusion.empty()) {
    std::printf("confusion matrix (rows: label, columns: predicted class)\n      ");
    for (int64_t c = 0; c < classes; ++c) std::printf("%6lld", static_cast<long long>(c));
    std::printf("\n");
    nlohmann::json rows = nlohmann::json::array();
    for (int64_t l = 0; l < classes; ++l) {
      std::printf("%6lld", static_cast<long long>(l));
      std::vector<int64_t> row(s.confusion.begin() + l * classes, s.confusion.begin() + (l + 1) * classes);
      for (int64_t v : row) std::printf("%6lld", static_cast<long long>(v));
      std::printf("\n");
      rows.push_back(row);
    }
    doc["confusion"] = rows;
  }
  if (!o.json.empty()) write_text_file(o.json, doc.dump(2) + "\n");
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand(
      "eval",
      "Score a model on a dataset: loss, top-1 and top-5 accuracy and a confusion matrix (up to 20 classes); "
      "perplexity and token accuracy for language models. The data are preprocessed as the model's metadata "
      "record (the training run's scale, mean and std), so a model `train` wrote scores what its final test line "
      "said");
  cmd->add_option("model", o->model, "the .onnx file (its first output: the logits)")->required();
  cmd->add_option("--data", o->data,
                  "the data, as train's --data (fashion-mnist, npz:FILE, cifar10:DIR, imagefolder:DIR, text:FILE, ...)")
      ->required();
  cmd->add_option("--split", o->split, "test (the default) or train: which split of a source that has both")
      ->check(CLI::IsMember({"test", "train"}));
  cmd->add_option("--batch", o->batch, "samples per forward pass (default 256)")->check(positive_number);
  cmd->add_option("--seq-len", o->seq_len, "tokens:/text: data: tokens per sample (default: the input's static length)")
      ->check(positive_number);
  cmd->add_option("--x-key", o->x_key, "npz data: the array of the inputs");
  cmd->add_option("--y-key", o->y_key, "npz data: the array of the labels");
  cmd->add_option("--json", o->json, "also write the figures (and the confusion matrix) as one JSON document");
  cmd->add_option("--kernels", o->kernels, "kernel implementation to use (\"reference\": the plain loops)");
  cmd->callback([o] { run_eval(*o); });
}

}  // namespace onnxtrain::cli
