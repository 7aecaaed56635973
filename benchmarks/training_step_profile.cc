// Where a training step's time goes: the training graph of `onnxtrain train` (Trainer: BatchNorm in
// training mode, softmax cross-entropy, momentum SGD) run node by node with each kernel timed, next to
// the whole Trainer::train_step, whose excess over the kernels is the optimizer update, the running
// statistics and the session's own work. The kernel times come from profiled mode's node profiler
// (partitioner/node_profiler.h), which prepares kernels as InferenceSession does.
//
//   OMP_NUM_THREADS=1 training_step_profile models/resnet_opset17.onnx 32 [STEPS=50] [TOP=15] [PRECISION=fp32]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "executor/trainer.h"
#include "frontend/importer.h"
#include "partitioner/node_profiler.h"

using namespace onnxtrain;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL.onnx BATCH [STEPS=50] [TOP=15] [PRECISION=fp32|bf16|fp16]\n", argv[0]);
    return 2;
  }
  const int64_t batch = std::stoll(argv[2]);
  const int steps = argc > 3 ? std::stoi(argv[3]) : 50;
  const int top = argc > 4 ? std::stoi(argv[4]) : 15;
  ImportedModel model = import_model(argv[1]);

  const Value& input = model.graph.value(model.graph.inputs.at(0));
  const Shape& logits = model.graph.value(model.graph.outputs.at(0)).shape;
  // A language model (token ids in, (N, T, V) logits out) takes one label per position.
  const bool token_ids = is_integer(input.dtype), per_position = token_ids && logits.rank_known && logits.rank() == 3;
  TrainerOptions options;
  options.loss = parse_loss_spec("cross-entropy");
  options.loss.classes_last = per_position;
  apply_optimizer_name("momentum", options.optimizer);
  options.optimizer.momentum = 0.9;
  options.schedule = {.base_lr = 0.01};
  options.precision = precision_from_name(argc > 5 ? argv[5] : "fp32");  // as `train --precision`
  Trainer trainer(model.graph, options);

  // One batch: normal inputs (token ids in [0, 10)), labels in [0, 10), one per position for a language model.
  std::vector<int64_t> sizes = {batch};
  for (size_t d = 1; d < input.shape.dims.size(); ++d) sizes.push_back(input.shape.dims[d].value());
  std::mt19937 rng(1);
  std::normal_distribution<float> gauss;
  Tensor x(token_ids ? DType::Int64 : DType::Float32, sizes);
  Tensor y(DType::Int64, per_position ? std::vector<int64_t>{batch, sizes.at(1)} : std::vector<int64_t>{batch});
  if (token_ids) {
    for (int64_t& v : x.data<int64_t>()) v = static_cast<int64_t>(rng() % 10);
  } else {
    for (float& v : x.data<float>()) v = gauss(rng);
  }
  for (int64_t& v : y.data<int64_t>()) v = static_cast<int64_t>(rng() % 10);

  // The whole step, as `onnxtrain train` runs it.
  for (int i = 0; i < 3; ++i) trainer.train_step(x, y);
  auto start = Clock::now();
  for (int i = 0; i < steps; ++i) trainer.train_step(x, y);
  const double step_seconds = seconds_since(start) / steps;

  // The same graph node by node, each kernel timed (partitioner/node_profiler.h: per kernel the median
  // over `steps` runs).
  const TrainingGraph& training = trainer.training_graph();
  const Graph& g = training.graph;
  const NodeTimes times = measure_node_times(training, batch, {.repetitions = steps, .warmup = 3, .use_cache = false});
  struct Timed {
    NodeId node;
    double seconds;
  };
  std::vector<Timed> nodes;
  for (size_t i = 0; i < g.order().size(); ++i) nodes.push_back({g.order()[i], times.kernel_seconds[i]});

  double kernel_seconds = 0, forward_seconds = 0;
  std::map<std::string, std::pair<double, int>> by_op;  // "op [implementation]" -> seconds per step, nodes
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& node = g.node(nodes[i].node);
    const double s = nodes[i].seconds;
    kernel_seconds += s;
    if (i < training.forward_node_count) forward_seconds += s;
    auto& [sum, count] = by_op[node.op_type];
    sum += s;
    ++count;
  }
  std::printf(
      "%s, batch %lld, %d steps, %d threads: Trainer::train_step %.3f ms (%.0f samples/s); kernels node by "
      "node (medians) %.3f ms (forward %.3f, backward and loss %.3f); train_step minus kernels %.3f ms\n",
      argv[1], static_cast<long long>(batch), steps, times.threads, step_seconds * 1e3, batch / step_seconds,
      kernel_seconds * 1e3, forward_seconds * 1e3, (kernel_seconds - forward_seconds) * 1e3,
      (step_seconds - kernel_seconds) * 1e3);
  std::vector<std::pair<std::string, std::pair<double, int>>> ops(by_op.begin(), by_op.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("\n%-44s %10s %7s %6s\n", "op", "ms/step", "share", "nodes");
  for (const auto& [op, t] : ops)
    std::printf("%-44s %10.3f %6.1f%% %6d\n", op.c_str(), t.first * 1e3, 100 * t.first / kernel_seconds, t.second);
  std::sort(nodes.begin(), nodes.end(), [](const Timed& a, const Timed& b) { return a.seconds > b.seconds; });
  std::printf("\n%-60s %-30s %10s %7s\n", "node (top)", "op", "ms/step", "share");
  for (int i = 0; i < top && i < static_cast<int>(nodes.size()); ++i) {
    const Node& node = g.node(nodes[i].node);
    std::printf("%-60s %-30s %10.3f %6.1f%%\n",
                (node.name.size() > 60 ? node.name.substr(node.name.size() - 60) : node.name).c_str(),
                node.op_type.c_str(), nodes[i].seconds * 1e3, 100 * nodes[i].seconds / kernel_seconds);
  }
  return 0;
}
