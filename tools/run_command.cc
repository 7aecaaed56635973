// `onnxtrain run MODEL --input NAME=FILE ... [-o DIR] [--bench N] [--device cpu|cuda[:N]]`: inference on
// the CPU or a GPU; writes every graph output as DIR/NAME.npy.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>

#include "executor/inference_session.h"
#include "frontend/importer.h"
#include "frontend/npy.h"
#include "graph/error.h"
#include "tools/cli_choices.h"
#include "tools/commands.h"
#include "tools/device_option.h"

namespace onnxtrain::cli {

namespace {

struct RunOptions {
  std::string model;
  std::vector<std::string> inputs;
  std::string output_dir = ".";
  int bench = 0;
  std::string kernels;
  std::string device = "cpu";
};

std::map<std::string, Tensor> read_inputs(const Graph& graph, const std::vector<std::string>& specs) {
  std::map<std::string, Tensor> inputs;
  for (const std::string& spec : specs) {
    auto eq = spec.find('=');
    std::string name, file;
    if (eq == std::string::npos) {
      if (graph.inputs.size() != 1) {
        throw Error("--input " + spec + ": the model has " + std::to_string(graph.inputs.size()) +
                    " inputs, so say which one: --input NAME=FILE");
      }
      name = graph.value(graph.inputs[0]).name;
      file = spec;
    } else {
      name = spec.substr(0, eq);
      file = spec.substr(eq + 1);
    }
    std::string names;  // the model's inputs, for a name it lacks
    bool known = false;
    for (ValueId id : graph.inputs) {
      known = known || graph.value(id).name == name;
      names += (names.empty() ? "" : ", ") + graph.value(id).name;
    }
    if (!known) throw Error("--input " + spec + ": the model has no input '" + name + "' (its inputs: " + names + ")");
    if (inputs.count(name)) throw Error("--input " + spec + ": input '" + name + "' is given twice");
    inputs[name] = read_tensor_file(file);
  }
  return inputs;
}

// Output names can hold '/' or ':' (exporters' scoped names): keep them usable as file names.
std::string file_name_for(std::string name) {
  std::replace_if(
      name.begin(), name.end(), [](char c) { return c == '/' || c == '\\' || c == ':'; }, '_');
  return name + ".npy";
}

void run_model(const RunOptions& options) {
  ImportedModel model = import_model(options.model);
  std::map<std::string, Tensor> inputs = read_inputs(model.graph, options.inputs);
  std::map<std::string, std::vector<int64_t>> sizes;
  for (const auto& [name, tensor] : inputs) sizes[name] = tensor.sizes();
  if (SymbolBindings dims = input_dim_bindings(model.graph, sizes); !dims.empty())
    model = import_model(options.model, {.dims = dims});
  InferenceSession session(model.graph, options.kernels, device_option(options.device));
  auto outputs = session.run(inputs);

  std::filesystem::create_directories(options.output_dir);
  for (const auto& [name, tensor] : outputs) {
    const std::string path = (std::filesystem::path(options.output_dir) / file_name_for(name)).string();
    write_npy(path, tensor);
    std::printf("%s: %s %s -> %s\n", name.c_str(), std::string(dtype_name(tensor.dtype())).c_str(),
                Shape::of(tensor.sizes()).to_string().c_str(), path.c_str());
  }
  if (options.bench <= 0) return;

  // The run above prepared the kernels and warmed the caches; time the next N.
  std::vector<double> ms;
  for (int i = 0; i < options.bench; ++i) {
    auto start = std::chrono::steady_clock::now();
    session.run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  double mean = 0;
  for (double m : ms) mean += m / ms.size();
  const Tensor& first = inputs.begin()->second;
  const int64_t batch = first.rank() > 0 ? first.sizes()[0] : 1;
  std::printf("bench: %d runs on %s, latency mean %.3f ms, median %.3f ms, min %.3f ms; %.1f samples/s (batch %lld)\n",
              options.bench, session.device().name().c_str(), mean, ms[ms.size() / 2], ms.front(),
              1000.0 * batch / ms[ms.size() / 2], static_cast<long long>(batch));
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand("run", "Run a model's forward pass and write its outputs as .npy");
  cmd->add_option("model", options->model, "the .onnx file")->required();
  cmd->add_option("--input,-i", options->inputs,
                  "NAME=FILE for each graph input (.npy, or .pb: an ONNX TensorProto); FILE alone when the model "
                  "has one input; repeat for several inputs")
      ->required()
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("-o,--output-dir", options->output_dir, "where to write NAME.npy for each output (default .)");
  cmd->add_option("--bench", options->bench, "after the first run, time N more runs and print latency and samples/s")
      ->check(non_negative_number);
  cmd->add_option("--kernels", options->kernels, "kernel implementation to use (\"reference\": the plain loops)");
  cmd->add_option("--device", options->device,
                  "cpu (the default) | cuda | cuda:N: where the forward pass runs (a GPU run's latency includes the "
                  "input upload and the output download); a node without a CUDA kernel is an error, never a CPU "
                  "fallback");
  cmd->callback([options] { run_model(*options); });
}

}  // namespace onnxtrain::cli
