// One training step (forward + backward of loss = sum(logits * R), every parameter's gradient) of the
// exported fixtures, run as one training graph by an InferenceSession: samples/s and GFLOP/s (the FLOPs
// of every node of the training graph, forward and backward ops alike, as their schemas count them: a
// backward op counts only the gradients it is asked for) with the default kernels (oneDNN, then onnxtrain's "cpu"
// kernels) and with the plain-loop reference kernels, whose ratio shows what the fast kernels buy.
//
//   training_step_bench --benchmark_min_time=0.2          # all threads (OMP_NUM_THREADS to limit)
#include <benchmark/benchmark.h>

#include <random>
#include <string>

#include "benchmarks/bench_common.h"
#include "executor/inference_session.h"
#include "frontend/importer.h"
#include "graph/autodiff/training_graph.h"
#include "graph/op_schema.h"

using namespace onnxtrain;

namespace {

ValueId add_node(Graph& g, const std::string& op, std::vector<ValueId> inputs, Attributes attributes = {}) {
  ValueId y = g.add_value({.name = op + "_loss_" + std::to_string(g.value_count())});
  NodeId n = g.add_node({.name = op + "_loss_node_" + std::to_string(g.value_count()),
                         .op_type = op,
                         .opset = 17,
                         .inputs = std::move(inputs),
                         .outputs = {y},
                         .attributes = std::move(attributes)});
  infer_node(g, n, *OpRegistry::builtin().find("", op));
  return y;
}

struct Step {
  TrainingGraph training;
  std::map<std::string, Tensor> feeds;
  double flops = 0;  // forward + backward, whole batch
};

Step make_step(const std::string& fixture, int64_t batch) {
  ImportedModel model = import_model(std::string(ONNXTRAIN_SOURCE_DIR) + "/models/" + fixture + ".onnx");
  Graph& g = model.graph;
  std::mt19937 rng(1);
  std::normal_distribution<float> gauss;
  Tensor r(DType::Float32, {10});
  for (float& v : r.data<float>()) v = gauss(rng);
  ValueId weights = g.add_value({.name = "loss_weights",
                                 .dtype = DType::Float32,
                                 .shape = Shape::of({10}),
                                 .role = ValueRole::Constant,
                                 .data = r});
  g.initializers.push_back(weights);
  ValueId loss = add_node(g, "ReduceSum", {add_node(g, "Mul", {g.outputs.at(0), weights})}, {{"keepdims", int64_t{0}}});
  g.value(loss).name = "loss";

  Step step{build_training_graph(g, {.loss = "loss"}), {}, 0.0};
  SymbolBindings bindings;
  for (const std::string& symbol : g.info.batch_symbols) bindings[symbol] = batch;
  const Graph& t = step.training.graph;
  for (NodeId n : t.order()) {
    const Node& node = t.node(n);
    step.flops += node_cost(t, n, *OpRegistry::builtin().find(node.domain, node.op_type), bindings).forward_flops;
  }
  const Value& input = g.value(g.inputs.at(0));
  std::vector<int64_t> sizes = {batch};
  for (size_t d = 1; d < input.shape.dims.size(); ++d) sizes.push_back(input.shape.dims[d].value());
  Tensor x(input.dtype, sizes);
  if (input.dtype == DType::Int64) {
    for (int64_t i = 0; i < x.numel(); ++i) x.data<int64_t>()[i] = (i * 7) % 50;
  } else {
    for (float& v : x.data<float>()) v = gauss(rng);
  }
  step.feeds[input.name] = x;
  return step;
}

void training_step(benchmark::State& state, const std::string& fixture, int64_t batch, const std::string& kernels) {
  Step step = make_step(fixture, batch);
  InferenceSession session(step.training.graph, kernels);
  session.run(step.feeds);  // warm-up: prepares every kernel
  for (auto _ : state) benchmark::DoNotOptimize(session.run(step.feeds));
  state.counters["samples_per_s"] =
      benchmark::Counter(static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["GFLOP_per_s"] = bench::rate_counter(step.flops);
}

void register_all() {
  struct Fixture {
    const char* name;
    int64_t batch;
  };
  for (const Fixture f : {Fixture{"mlp_opset17", 64}, Fixture{"cnn_opset17", 64}, Fixture{"resnet_opset17", 32},
                          Fixture{"transformer_opset17", 64}}) {
    for (const std::string kernels : {"", "reference"}) {
      const std::string name = std::string("step/") + f.name + "/batch" + std::to_string(f.batch) + "/" +
                               (kernels.empty() ? "default" : kernels);
      benchmark::RegisterBenchmark(name.c_str(),
                                   [f, kernels](benchmark::State& s) { training_step(s, f.name, f.batch, kernels); })
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
}

}  // namespace

int main(int argc, char** argv) { return bench::run_benchmarks(argc, argv, &register_all); }
