// `onnxtrain inspect MODEL [--json] [--batch B] [--freeze REGEX]`: what a model is made of and what
// onnxtrain can do with it.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>

#include "frontend/importer.h"
#include "graph/model_summary.h"
#include "tools/cli_choices.h"
#include "tools/commands.h"
#include "tools/model_import.h"
#include "tools/text_format.h"

namespace onnxtrain::cli {

namespace {

struct InspectOptions {
  std::string model;
  bool json = false;
  int64_t batch = 0;    // 0: keep the batch symbolic, cost one sample
  int64_t seq_len = 0;  // 0: keep a symbolic sequence dimension
  std::string freeze;
  bool all_nodes = false;
};

std::string opsets_text(const ModelInfo& info) {
  std::string text;
  for (const auto& [domain, version] : info.opsets) {
    text +=
        (text.empty() ? "" : ", ") + (domain.empty() ? std::string("ai.onnx") : domain) + " " + std::to_string(version);
  }
  return text;
}

nlohmann::json to_json(const ImportedModel& model, const ModelSummary& s) {
  using nlohmann::json;
  auto tensors = [](const std::vector<TensorSummary>& list) {
    json a = json::array();
    for (const auto& t : list)
      a.push_back({{"name", t.name}, {"dtype", dtype_name(t.dtype)}, {"shape", t.shape.to_string()}});
    return a;
  };
  json nodes = json::array();
  for (const auto& n : s.nodes) {
    nodes.push_back({{"name", n.name},
                     {"op_type", n.op_type},
                     {"domain", n.domain},
                     {"output_shape", n.output_shape.to_string()},
                     {"parameters", n.parameters},
                     {"forward_flops", n.forward_flops},
                     {"backward_flops", n.backward_flops},
                     {"activation_bytes", n.activation_bytes},
                     {"supported", n.supported},
                     {"typed", n.typed}});
  }
  json opsets = json::object();
  for (const auto& [domain, version] : s.info.opsets) opsets[domain.empty() ? "ai.onnx" : domain] = version;
  const double b = static_cast<double>(s.batch);
  return {{"model", s.info.path},
          {"producer", {{"name", s.info.producer_name}, {"version", s.info.producer_version}}},
          {"ir_version", s.info.ir_version},
          {"opsets", opsets},
          {"batch", s.batch},
          {"batch_symbols", s.info.batch_symbols},
          {"inputs", tensors(s.inputs)},
          {"outputs", tensors(s.outputs)},
          {"op_histogram", s.op_histogram},
          {"nodes", nodes},
          {"totals",
           {{"parameters", s.parameters},
            {"trainable_parameters", s.trainable_parameters},
            {"frozen_parameters", s.frozen_parameters},
            {"parameter_bytes", s.parameter_bytes},
            {"state_elements", s.state_elements},
            {"buffer_elements", s.buffer_elements},
            {"forward_flops_per_sample", s.forward_flops / b},
            {"training_flops_per_sample", (s.forward_flops + s.backward_flops) / b},
            {"activation_bytes_per_sample", static_cast<double>(s.activation_bytes) / b}}},
          {"untrainable_ops", s.untrainable_ops},
          {"untyped_nodes", model.untyped_nodes},
          {"nodes_untyped_after_them", model.untyped_after},
          {"subgraph_weight_elements", model.subgraph_weight_elements},
          {"folded_nodes", model.folded_nodes},
          {"notes", model.notes}};
}

void print_text(const ImportedModel& model, const ModelSummary& s, bool all_nodes) {
  const double b = static_cast<double>(s.batch);
  std::printf("Model     %s\n", s.info.path.c_str());
  std::printf("Producer  %s %s, IR version %lld, opsets: %s\n", s.info.producer_name.c_str(),
              s.info.producer_version.c_str(), static_cast<long long>(s.info.ir_version), opsets_text(s.info).c_str());
  for (const auto& t : s.inputs)
    std::printf("Input     %s: %s %s\n", t.name.c_str(), std::string(dtype_name(t.dtype)).c_str(),
                t.shape.to_string().c_str());
  for (const auto& t : s.outputs)
    std::printf("Output    %s: %s %s\n", t.name.c_str(), std::string(dtype_name(t.dtype)).c_str(),
                t.shape.to_string().c_str());
  std::printf("Costs     for a batch of %lld (--batch B to change); %d nodes folded into constants\n",
              static_cast<long long>(s.batch), model.folded_nodes);

  std::printf("\nOps (%zu nodes):", s.nodes.size());
  for (const auto& [op, count] : s.op_histogram) std::printf(" %s %d,", op.c_str(), count);
  std::printf("\n\n%-4s %-36s %-22s %-20s %10s %10s %10s\n", "#", "node", "op", "output shape", "params", "fwd FLOPs",
              "act bytes");
  constexpr size_t kShown = 60;
  for (size_t i = 0; i < s.nodes.size(); ++i) {
    if (!all_nodes && i == kShown) {
      std::printf("     … %zu more nodes (--all to list every node)\n", s.nodes.size() - kShown);
      break;
    }
    const auto& n = s.nodes[i];
    std::string op = n.domain.empty() ? n.op_type : n.domain + "." + n.op_type;
    std::printf("%-4zu %-36s %-22s %-20s %10s %10s %10s\n", i, clip(n.name, 36).c_str(),
                (op + (n.supported ? "" : " (!)")).c_str(), clip(n.output_shape.to_string(), 20).c_str(),
                human(static_cast<double>(n.parameters)).c_str(), human(n.forward_flops).c_str(),
                human(static_cast<double>(n.activation_bytes)).c_str());
  }
  std::printf("\nTotals\n");
  std::printf("  parameters          %s (%lld trainable, %lld frozen; %s bytes)\n",
              human(static_cast<double>(s.parameters)).c_str(), static_cast<long long>(s.trainable_parameters),
              static_cast<long long>(s.frozen_parameters), human(static_cast<double>(s.parameter_bytes)).c_str());
  std::printf("  state / buffers     %lld BatchNorm running-stat elements, %lld integer buffer elements\n",
              static_cast<long long>(s.state_elements), static_cast<long long>(s.buffer_elements));
  std::printf("  FLOPs per sample    forward %s, training step (forward + backward) %s\n",
              human(s.forward_flops / b).c_str(), human((s.forward_flops + s.backward_flops) / b).c_str());
  std::printf("  activations/sample  %s bytes\n", human(static_cast<double>(s.activation_bytes) / b).c_str());
  if (model.subgraph_weight_elements > 0) {
    std::printf(
        "  in If/Loop bodies   %s float elements of initializers and constants (not among the parameters "
        "above: onnxtrain cannot run or train those ops)\n",
        human(static_cast<double>(model.subgraph_weight_elements)).c_str());
  }
  if (s.untrainable_ops.empty() && model.untyped_nodes.empty()) {
    std::printf("  cannot train yet    none: every op has an onnxtrain schema\n");
  } else if (!s.untrainable_ops.empty()) {
    std::printf("  cannot train yet    ");
    for (const auto& op : s.untrainable_ops) std::printf("%s ", op.c_str());
    std::printf("(marked (!) above; no onnxtrain schema)\n");
  }
  for (const std::string& untyped : model.untyped_nodes) std::printf("  cannot type         %s\n", untyped.c_str());
  if (!model.untyped_nodes.empty()) {
    const std::string after = model.untyped_after == 0
                                  ? std::string()
                                  : " nor the " + std::to_string(model.untyped_after) + " nodes that read " +
                                        (model.untyped_nodes.size() == 1 ? "its" : "their") +
                                        " outputs, directly or not";
    std::printf(
        "                      (no shape or costs above for %s%s: the model can be listed, not run or trained)\n",
        model.untyped_nodes.size() == 1 ? "it" : "them", after.c_str());
  }
  for (const auto& note : model.notes) std::printf("Note: %s\n", note.c_str());
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  CLI::App* cmd = app.add_subcommand("inspect",
                                     "Show a model's inputs, ops, shapes, parameters and FLOPs, and "
                                     "what onnxtrain cannot train yet");
  cmd->add_option("model", options->model, "the .onnx file")->required();
  cmd->add_flag("--json", options->json, "print one JSON document instead of tables");
  cmd->add_option("--batch", options->batch,
                  "bind the symbolic batch dimension to B, 1 to 2^31 (folds more, costs per batch of B)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 31));
  cmd->add_option("--seq-len", options->seq_len,
                  "bind the data input's symbolic sequence dimension to T (an exporter's dynamic sequence axis): "
                  "shapes and FLOPs for sequences of T tokens")
      ->check(positive_number);
  cmd->add_option("--freeze", options->freeze, "parameters whose names match this regex are frozen (not trained)");
  cmd->add_flag("--all", options->all_nodes, "list every node (default: the first 60)");
  cmd->callback([options] {
    ImportOptions import_options;
    if (options->batch > 0) import_options.batch = options->batch;
    import_options.freeze_pattern = options->freeze;
    import_options.keep_untypable = true;  // list what it can, and say where typing stopped
    ImportedModel model = import_for_costs(options->model, options->seq_len, import_options);
    if (const std::vector<std::string> unbound = unbound_sequence_dims(model.graph); !unbound.empty()) {
      model.notes.push_back("the data input's dimension '" + unbound.front() +
                            "' is symbolic: nodes whose sizes depend on it count no FLOPs; give --seq-len T for "
                            "true FLOPs");
    }
    ModelSummary summary = summarize_model(model.graph, options->batch > 0 ? options->batch : 1);
    if (options->json) {
      std::cout << to_json(model, summary).dump(2) << "\n";
    } else {
      print_text(model, summary, options->all_nodes);
    }
  });
}

}  // namespace onnxtrain::cli
