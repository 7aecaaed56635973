// The cost model (partitioner/cost_model.h), the device descriptions (device.h, cpu_probe.h) and
// profiled mode (node_profiler.h): FLOPs against the closed-form counts, parameter bytes against the
// model's, the bytes crossing every cut of a hand-built graph with a skip connection, the values kept
// for backward, clear errors for bad device files, a sane CPU probe, and measured times with their cache.
#include "partitioner/cost_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "frontend/importer.h"
#include "graph/autodiff/loss.h"
#include "graph/autodiff/training_graph.h"
#include "graph/error.h"
#include "graph/model_summary.h"
#include "graph/op_schema.h"
#include "partitioner/cpu_probe.h"
#include "partitioner/node_profiler.h"
#include "partitioner/planner.h"
#include "tests/error_of.h"
#include "tests/graph_builder.h"

using namespace onnxtrain;

namespace {

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

using testing_support::error_of;

ValueId add_node(Graph& g, const std::string& name, const std::string& op, std::vector<ValueId> inputs,
                 Attributes attributes = {}) {
  return testing_support::add_inferred_node(g, name, op, std::move(inputs), name + "_out", std::move(attributes));
}

ValueId add_parameter(Graph& g, const std::string& name, std::vector<int64_t> sizes) {
  return testing_support::add_parameter(g, name, Tensor(DType::Float32, sizes));
}

// x (N,8) -> n0 MatMul(W0 8x16) -> a -> n1 Relu -> b -> n2 MatMul(W1 16x8) -> c -> n3 Relu -> d
//   -> n4 MatMul(W2 8x16) -> e -> n5 Add(e, b) -> f -> n6 ReduceSum -> loss
// b skips from node 1 to node 5. (N,16) floats are 64·N bytes, (N,8) 32·N.
TrainingGraph skip_graph() {
  Graph g;
  g.info.batch_symbols = {"N"};
  ValueId x = g.add_value(
      {.name = "x", .dtype = DType::Float32, .shape = Shape({Dim::symbol("N"), Dim(8)}), .role = ValueRole::Input});
  g.inputs.push_back(x);
  ValueId a = add_node(g, "n0", "MatMul", {x, add_parameter(g, "W0", {8, 16})});
  ValueId b = add_node(g, "n1", "Relu", {a});
  ValueId c = add_node(g, "n2", "MatMul", {b, add_parameter(g, "W1", {16, 8})});
  ValueId d = add_node(g, "n3", "Relu", {c});
  ValueId e = add_node(g, "n4", "MatMul", {d, add_parameter(g, "W2", {8, 16})});
  ValueId f = add_node(g, "n5", "Add", {e, b});
  ValueId loss = add_node(g, "n6", "ReduceSum", {f}, {{"keepdims", int64_t{0}}});
  g.value(loss).name = "loss";
  g.outputs = {loss};
  return build_training_graph(g, {.loss = "loss"});
}

// A fixture with cross-entropy attached, as `onnxtrain train` and `partition` build it.
TrainingGraph fixture_training_graph(const std::string& file, Graph* forward = nullptr) {
  ImportedModel model = import_model(kModels + file);
  Graph g = model.graph;
  AttachedLoss loss = attach_loss(g, parse_loss_spec("cross-entropy"));
  if (forward) *forward = model.graph;
  return build_training_graph(g, {.loss = loss.loss});
}

DeviceDescription test_device() {
  DeviceDescription d;
  d.name = "test";
  d.fp32_flops = 1e12;
  d.memory_bandwidth = 1e11;
  d.memory_bytes = 1'000'000'000;
  d.compute_efficiency = 0.5;
  d.memory_efficiency = 1.0;
  return d;
}

}  // namespace

TEST(CostModel, SkipConnectionCountsInEveryCutItCrosses) {
  const int64_t batch = 3;
  const TrainingGraph t = skip_graph();
  const CostProfile p = build_cost_profile(t, batch, test_device());
  ASSERT_EQ(p.nodes.size(), 7u);
  ASSERT_EQ(p.cut_activation_bytes.size(), 8u);
  const int64_t wide = 16 * 4 * batch, narrow = 8 * 4 * batch;  // (N,16) and (N,8) float tensors
  // Per cut: what the chain hands on, plus b from cut 2 to cut 5 (made by node 1, last used by node 5).
  const std::vector<int64_t> expected = {
      0, wide /*a*/, wide /*b*/, narrow /*c*/ + wide, narrow /*d*/ + wide, wide /*e*/ + wide, wide /*f*/, 0};
  EXPECT_EQ(p.cut_activation_bytes, expected);
  // Every one of these tensors depends on a weight, so its gradient crosses the same cuts backwards.
  EXPECT_EQ(p.cut_gradient_bytes, expected);
  // The skip alone: beyond what the chain hands on, b adds its bytes to cuts 3..5 and nowhere else (at
  // cut 2 it is the chain's own tensor, sent once for both of its consumers).
  for (size_t i = 0; i < expected.size(); ++i) {
    const int64_t chain = i == 0 || i == 7 ? 0 : (i == 3 || i == 4 ? narrow : wide);
    EXPECT_EQ(p.cut_activation_bytes[i] - chain, i >= 3 && i <= 5 ? wide : 0) << "cut " << i;
  }
}

TEST(CostModel, FlopsParametersAndKeptActivationsOfTheSkipGraph) {
  const int64_t batch = 3;
  const TrainingGraph t = skip_graph();
  const CostProfile p = build_cost_profile(t, batch, test_device());
  const double mm = 2.0 * batch * 8 * 16;  // one (N,8)x(8,16)-sized product
  EXPECT_DOUBLE_EQ(p.nodes[0].forward_flops, mm);
  EXPECT_DOUBLE_EQ(p.nodes[0].backward_flops, mm) << "x needs no gradient: only dW0 = xᵀ·da";
  EXPECT_DOUBLE_EQ(p.nodes[2].forward_flops, mm);
  EXPECT_DOUBLE_EQ(p.nodes[2].backward_flops, 2 * mm) << "db and dW1";
  EXPECT_EQ(p.nodes[0].parameter_bytes, 8 * 16 * 4);
  EXPECT_EQ(p.nodes[2].parameter_bytes, 16 * 8 * 4);
  EXPECT_EQ(p.nodes[4].parameter_bytes, 8 * 16 * 4);
  EXPECT_EQ(p.nodes[1].parameter_bytes + p.nodes[3].parameter_bytes + p.nodes[5].parameter_bytes, 0);
  // Kept for backward: Relu's gradient reads its output, the MatMuls' dW their data inputs, so b and d are
  // kept, at the Relus that make them (the first forward nodes whose backward reads them), and a and c,
  // the Relus' inputs, are not; x, a graph input, is fed to the backward again from the loader's batch (as
  // the pipeline's stage workers do) and is kept by no stage.
  EXPECT_EQ(p.nodes[0].activation_bytes, 0) << "x";
  EXPECT_EQ(p.nodes[1].activation_bytes, 16 * 4 * batch) << "b";
  EXPECT_EQ(p.nodes[2].activation_bytes, 0) << "c is no MatMul output the backward reads";
  EXPECT_EQ(p.nodes[3].activation_bytes, 8 * 4 * batch) << "d";
  EXPECT_EQ(p.nodes[4].activation_bytes, 0) << "e";
  // b and d are each read by two forward nodes' backward (the Relu's own gradient and the next MatMul's
  // dW): a stage that holds the second reader and not the first keeps its own copy.
  ASSERT_EQ(p.shared_kept.size(), 2u);
  EXPECT_EQ(p.shared_kept[0].bytes, 16 * 4 * batch);
  EXPECT_EQ(p.shared_kept[0].readers, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(p.shared_kept[1].bytes, 8 * 4 * batch);
  EXPECT_EQ(p.shared_kept[1].readers, (std::vector<size_t>{3, 4}));
  // Bytes: MatMul n0 reads x and W0 and writes a.
  EXPECT_DOUBLE_EQ(p.nodes[0].forward_bytes, (8 * 4 * batch) + (8 * 16 * 4) + (16 * 4 * batch));
  // Every backward node belongs to some forward node, and the seconds follow the device formula.
  const std::vector<size_t> owner = owning_forward_node(t);
  ASSERT_EQ(owner.size(), t.graph.node_count());
  for (size_t o : owner) EXPECT_LT(o, t.forward_node_count);
  const DeviceDescription d = test_device();
  EXPECT_DOUBLE_EQ(p.nodes[0].forward_seconds,
                   std::max(mm / (d.fp32_flops * d.compute_efficiency), p.nodes[0].forward_bytes / d.memory_bandwidth));
}

TEST(CostModel, SumStageAddsNodesAndReadsItsBoundaryCuts) {
  const CostProfile p = build_cost_profile(skip_graph(), 3, test_device());
  const StageCost all = sum_stage(p, 0, p.nodes.size());
  double fwd = 0, bwd = 0;
  int64_t params = 0;
  for (const NodeCost& c : p.nodes) {
    fwd += c.forward_seconds;
    bwd += c.backward_seconds;
    params += c.parameter_bytes;
  }
  EXPECT_DOUBLE_EQ(all.forward_seconds, fwd);
  EXPECT_DOUBLE_EQ(all.backward_seconds, bwd);
  EXPECT_EQ(all.parameter_bytes, params);
  EXPECT_EQ(all.activation_bytes_in + all.activation_bytes_out + all.gradient_bytes_in + all.gradient_bytes_out, 0);
  const StageCost mid = sum_stage(p, 2, 5);
  EXPECT_EQ(mid.activation_bytes_in, p.cut_activation_bytes[2]);
  EXPECT_EQ(mid.activation_bytes_out, p.cut_activation_bytes[5]);
  EXPECT_EQ(mid.gradient_bytes_in, p.cut_gradient_bytes[5]);
  EXPECT_EQ(mid.gradient_bytes_out, p.cut_gradient_bytes[2]);
  EXPECT_DOUBLE_EQ(mid.forward_flops, p.nodes[2].forward_flops + p.nodes[3].forward_flops + p.nodes[4].forward_flops);
}

TEST(CostModel, ConvAndGemmFlopsOfTheCnnMatchTheFormulas) {
  const int64_t batch = 4;
  Graph forward;
  const TrainingGraph t = fixture_training_graph("cnn_opset17.onnx", &forward);
  const CostProfile p = build_cost_profile(t, batch, test_device());
  auto find = [&](const std::string& name) -> const NodeCost& {
    for (const NodeCost& c : p.nodes)
      if (c.name == name) return c;
    ADD_FAILURE() << "no node " << name;
    return p.nodes[0];
  };
  // conv2: 8 -> 16 channels, 3x3 (1168 = 16·8·9 + 16 parameters), output 14x14.
  const double conv_macs = double(batch) * 16 * 14 * 14 * 8 * 3 * 3;
  const double conv_out = double(batch) * 16 * 14 * 14;
  const NodeCost& conv2 = find("/conv2/Conv");
  EXPECT_DOUBLE_EQ(conv2.forward_flops, 2 * conv_macs + conv_out) << "2·MACs + the bias";
  EXPECT_DOUBLE_EQ(conv2.backward_flops, 4 * conv_macs + conv_out) << "dX and dW 2·MACs each, dB one add per element";
  EXPECT_EQ(conv2.parameter_bytes, 1168 * 4);
  // conv1 takes the graph input, which needs no gradient: dW and dB only.
  const double conv1_macs = double(batch) * 8 * 28 * 28 * 1 * 3 * 3;
  EXPECT_DOUBLE_EQ(find("/conv1/Conv").backward_flops, 2 * conv1_macs + double(batch) * 8 * 28 * 28);
  // fc1: Gemm (N,784)x(784,64) + bias; backward dA and dB products plus the bias reduction.
  const double gemm = 2.0 * batch * 784 * 64;
  const NodeCost& fc1 = find("/fc1/Gemm");
  EXPECT_DOUBLE_EQ(fc1.forward_flops, gemm + batch * 64);
  EXPECT_GE(fc1.backward_flops, 2 * gemm);
  EXPECT_LE(fc1.backward_flops, 2 * gemm + 4 * batch * 64);
  EXPECT_EQ(fc1.parameter_bytes, (784 * 64 + 64) * 4);

  // Parameters: every trainable byte once, and the totals agree with `onnxtrain inspect`.
  const ModelSummary summary = summarize_model(forward, batch);
  int64_t params = 0;
  for (const NodeCost& c : p.nodes) params += c.parameter_bytes;
  EXPECT_EQ(params, summary.parameter_bytes);
  EXPECT_EQ(p.cut_activation_bytes.front(), 0);
  EXPECT_EQ(p.cut_activation_bytes.back(), 0);
  EXPECT_EQ(p.cut_gradient_bytes.front(), 0);
  EXPECT_EQ(p.cut_gradient_bytes.back(), 0);
  // A chain: every inner cut carries what the node before it made (conv1 -> Relu: (N,8,28,28) floats).
  EXPECT_EQ(p.cut_activation_bytes[1], batch * 8 * 28 * 28 * 4);
  for (size_t i = 1; i + 1 < p.cut_activation_bytes.size(); ++i) EXPECT_GT(p.cut_activation_bytes[i], 0) << i;
  double forward_flops = 0;
  for (const NodeCost& c : p.nodes) forward_flops += c.forward_flops;
  EXPECT_GE(forward_flops, summary.forward_flops) << "the model's nodes plus the loss";
}

TEST(CostModel, ResnetSkipConnectionsAndBatchScaling) {
  const TrainingGraph t = fixture_training_graph("resnet_opset17.onnx");
  const CostProfile p1 = build_cost_profile(t, 1, device_from_preset("h100"));
  const CostProfile p8 = build_cost_profile(t, 8, device_from_preset("h100"));
  int64_t p1_params = 0, p8_params = 0;
  for (size_t i = 0; i < p1.nodes.size(); ++i) {
    p1_params += p1.nodes[i].parameter_bytes;
    p8_params += p8.nodes[i].parameter_bytes;
    EXPECT_EQ(p8.nodes[i].activation_bytes, 8 * p1.nodes[i].activation_bytes) << p1.nodes[i].name;
    EXPECT_NEAR(p8.nodes[i].forward_flops, 8 * p1.nodes[i].forward_flops, 1e-6 * p8.nodes[i].forward_flops + 64)
        << p1.nodes[i].name;
  }
  EXPECT_EQ(p1_params, p8_params) << "parameters do not grow with the batch";
  // BatchNorm running statistics are state, on their node: mean and variance, C floats each.
  int bn_nodes = 0;
  for (size_t i = 0; i < p1.nodes.size(); ++i) {
    const Node& node = t.graph.node(t.graph.order()[i]);
    if (node.op_type != "BatchNormalization") continue;
    ++bn_nodes;
    const int64_t channels = t.graph.value(node.inputs[1]).data->numel();
    EXPECT_GE(p1.nodes[i].state_bytes, 2 * channels * 4) << node.name;
    EXPECT_EQ(p1.nodes[i].parameter_bytes, 2 * channels * 4) << node.name << ": scale and bias";
  }
  EXPECT_GT(bn_nodes, 0);
  // In a chain, cut i carries only what node i−1 made; a residual branch makes some cut carry more.
  const SymbolBindings one = {{t.graph.info.batch_symbols.at(0), 1}};
  int skip_cuts = 0;
  for (size_t i = 1; i < p1.nodes.size(); ++i) {
    int64_t made = 0;
    for (ValueId out : t.graph.node(t.graph.order()[i - 1]).outputs)
      if (out.valid()) made += t.graph.value(out).shape.numel(one).value_or(0) * 4;
    skip_cuts += p1.cut_activation_bytes[i] > made;
  }
  EXPECT_GT(skip_cuts, 0);
  std::printf("resnet fixture: %zu nodes, %d cuts crossed by a residual branch\n", p1.nodes.size(), skip_cuts);
}

// x -> n0 MatMul(W0) -> n1 Relu -> n2 MatMul(W1) -> n3 Relu -> n4 MatMul(W0) -> n5 ReduceSum: W0 is read by
// nodes 0 and 4, a tied weight. An outside check (2026-12-07) found the planner cutting between its readers and
// `train` refusing the planner's own split (the pipelines update a trained tensor on the one stage it lives on).
TEST(CostModel, TiedWeightsKeepTheirReadersOnOneStage) {
  Graph g;
  g.info.batch_symbols = {"N"};
  ValueId x = g.add_value(
      {.name = "x", .dtype = DType::Float32, .shape = Shape({Dim::symbol("N"), Dim(8)}), .role = ValueRole::Input});
  g.inputs.push_back(x);
  const ValueId w0 = add_parameter(g, "W0", {8, 8});
  ValueId h = add_node(g, "n1", "Relu", {add_node(g, "n0", "MatMul", {x, w0})});
  h = add_node(g, "n3", "Relu", {add_node(g, "n2", "MatMul", {h, add_parameter(g, "W1", {8, 8})})});
  ValueId loss = add_node(g, "n5", "ReduceSum", {add_node(g, "n4", "MatMul", {h, w0})}, {{"keepdims", int64_t{0}}});
  g.value(loss).name = "loss";
  g.outputs = {loss};
  const CostProfile p = build_cost_profile(build_training_graph(g, {.loss = "loss"}), 4, test_device());
  ASSERT_EQ(p.cut_splits_tied.size(), 7u);
  for (size_t c = 1; c <= 4; ++c) EXPECT_EQ(p.cut_splits_tied[c], "W0") << "cut " << c;
  EXPECT_EQ(p.cut_splits_tied[5], "");
  const PlanOptions two{.stages = 2, .link = {"l", 1e9, 0}};
  EXPECT_EQ(plan_pipeline(p, two).stages[1].first_node, 5);
  const std::vector<int64_t> across = {2};
  EXPECT_NE(error_of([&] { evaluate_split(p, across, two); }).find("'W0' on both sides (tied weights)"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              plan_pipeline(p, {.stages = 3, .link = {"l", 1e9, 0}});
            }).find("keeps every trained tensor on one stage: 'W0'"),
            std::string::npos);
}

TEST(Device, PresetsAndKernelTime) {
  DeviceDescription h100 = device_from_preset("H100", "nvlink4");
  EXPECT_EQ(h100.name, "NVIDIA H100 SXM5 80GB");
  EXPECT_DOUBLE_EQ(h100.link.bandwidth, 450e9);
  EXPECT_EQ(device_from_preset("a100").link.name, "PCIe 4.0 x16");
  // Compute-bound: 1 TFLOP at half of 67 TFLOP/s; memory-bound: 1 GB at 80% of 3.35 TB/s.
  EXPECT_NEAR(h100.kernel_seconds(1e12, 1e3, DType::Float32) - h100.kernel_overhead_s, 1e12 / (67e12 * 0.5), 1e-12);
  EXPECT_NEAR(h100.kernel_seconds(1e3, 1e9, DType::Float32) - h100.kernel_overhead_s, 1e9 / (3350e9 * 0.8), 1e-12);
  const double fp32 = h100.kernel_seconds(1e12, 0, DType::Float32, true);
  h100.use_tf32 = true;
  EXPECT_LT(h100.kernel_seconds(1e12, 0, DType::Float32, true), fp32 / 5) << "TF32 tensor cores";
  EXPECT_DOUBLE_EQ(h100.kernel_seconds(1e12, 0, DType::Float32, false), fp32) << "not a tensor-core op";
  EXPECT_LT(h100.kernel_seconds(1e12, 0, DType::BFloat16), fp32 / 10);
  EXPECT_DOUBLE_EQ(h100.link.seconds(0), 0);
  EXPECT_DOUBLE_EQ(h100.link.seconds(450e6), 3e-6 + 1e-3);
  EXPECT_NE(error_of([] { device_from_preset("v100"); }).find("unknown device preset 'v100'"), std::string::npos);
}

TEST(Device, ProfileJson) {
  DeviceDescription d = parse_device_profile(R"({
    "name": "lab box", "fp32_flops": 2e12, "memory_bytes": 64e9, "memory_bandwidth": 1e11,
    "compute_efficiency": 0.6, "kernel_overhead_s": 2e-6,
    "link": {"name": "10GbE", "bandwidth": 1.25e9, "latency_s": 20e-6}})",
                                             "box.json");
  EXPECT_EQ(d.name, "lab box");
  EXPECT_EQ(d.source, "file box.json");
  EXPECT_DOUBLE_EQ(d.fp32_flops, 2e12);
  EXPECT_EQ(d.memory_bytes, 64'000'000'000u);
  EXPECT_DOUBLE_EQ(d.compute_efficiency, 0.6);
  EXPECT_DOUBLE_EQ(d.memory_efficiency, 0.8) << "default";
  EXPECT_DOUBLE_EQ(d.step_overhead_s, 4e-6) << "default: a recurrent step costs two kernels";
  EXPECT_EQ(d.link.name, "10GbE");
  EXPECT_DOUBLE_EQ(d.link.latency_s, 20e-6);

  // A preset with overrides, and a link preset by name.
  DeviceDescription h =
      parse_device_profile(R"({"preset": "h200", "compute_efficiency": 0.4, "link": "ib-ndr"})", "h.json");
  EXPECT_EQ(h.name, "NVIDIA H200 SXM 141GB");
  EXPECT_DOUBLE_EQ(h.memory_bandwidth, 4800e9);
  EXPECT_DOUBLE_EQ(h.compute_efficiency, 0.4);
  EXPECT_DOUBLE_EQ(h.link.bandwidth, 50e9);
  EXPECT_DOUBLE_EQ(h.step_overhead_s, 10e-6) << "the preset's two launches";
  EXPECT_DOUBLE_EQ(parse_device_profile(R"({"preset": "h100", "step_overhead_s": 3e-5})", "s.json").step_overhead_s,
                   3e-5);

  // Errors name the file and the field.
  auto expect_error = [](const std::string& json, const std::string& what) {
    const std::string e = error_of([&] { parse_device_profile(json, "my.json"); });
    EXPECT_NE(e.find("my.json"), std::string::npos) << e;
    EXPECT_NE(e.find(what), std::string::npos) << e;
  };
  expect_error(R"({"name": "x", "memory_bytes": 1e9, "memory_bandwidth": 1e10})", "field 'fp32_flops' is missing");
  expect_error(R"({"name": "x", "fp32_flops": "fast", "memory_bytes": 1e9, "memory_bandwidth": 1e10})",
               "field 'fp32_flops' must be a number");
  expect_error(R"({"name": "x", "fp32_flops": -1, "memory_bytes": 1e9, "memory_bandwidth": 1e10})",
               "field 'fp32_flops' must be FLOP/s > 0");
  expect_error(R"({"preset": "h100", "compute_efficiency": 1.5})", "field 'compute_efficiency' must be a fraction");
  expect_error(R"({"preset": "h100", "fp32_flop": 1e12})", "field 'fp32_flop' is not a known key");
  expect_error(R"({"preset": "v100"})", "field 'preset' unknown device preset 'v100'");
  expect_error(R"({"preset": "h100", "link": "pcie9"})", "field 'link' unknown link preset 'pcie9'");
  expect_error(R"({"preset": "h100", "link": {"bandwidth": 1e9}})", "field 'link.latency_s' is missing");
  expect_error(R"({"fp32_flops": 1e12, "memory_bytes": 1e9, "memory_bandwidth": 1e10})", "field 'name' is missing");
  expect_error(R"({"preset": "h100",)", "not valid JSON");
  expect_error(R"([1, 2])", "must be a JSON object");
  const std::string missing = error_of([] { read_device_profile("/nonexistent/dev.json"); });
  EXPECT_NE(missing.find("/nonexistent/dev.json"), std::string::npos) << missing;
  EXPECT_NE(missing.find("cannot open"), std::string::npos) << missing;

  // The same through a file.
  const std::filesystem::path file = std::filesystem::temp_directory_path() / "onnxtrain_cost_model_device.json";
  std::ofstream(file) << R"({"preset": "a100", "name": "my A100"})";
  EXPECT_EQ(read_device_profile(file.string()).name, "my A100");
  std::filesystem::remove(file);
}

TEST(Device, LocalCpuProbe) {
  const CpuProbe probe = probe_local_cpu();
  for (double v : {probe.gemm_flops, probe.memory_bandwidth, probe.kernel_overhead_s, probe.step_overhead_s}) {
    EXPECT_TRUE(std::isfinite(v));
    EXPECT_GT(v, 0);
  }
  EXPECT_GT(probe.gemm_flops, 1e8) << "any CPU of this century does a float32 GEMM at more than 0.1 GFLOP/s";
  EXPECT_GT(probe.memory_bandwidth, 1e8);
  EXPECT_GT(probe.threads, 0);
  EXPECT_LT(probe.probe_seconds, 1.0) << "the probe runs at every partition start";
  const DeviceDescription cpu = describe_local_cpu(probe);
  EXPECT_GT(cpu.memory_bytes, 0u);
  EXPECT_GT(cpu.link.bandwidth, 0);
  EXPECT_LE(cpu.kernel_overhead_s, 20e-6);
  EXPECT_LE(cpu.step_overhead_s, 60e-6);
  std::printf(
      "local CPU: %s; probe %.3f s, GEMM %.1f GFLOP/s, stream %.1f GB/s, kernel overhead %.2f us, recurrent step "
      "%.2f us%s\n",
      describe_device(cpu).c_str(), probe.probe_seconds, probe.gemm_flops / 1e9, probe.memory_bandwidth / 1e9,
      probe.kernel_overhead_s * 1e6, probe.step_overhead_s * 1e6, probe.busy ? " (busy machine)" : "");
}

TEST(NodeProfiler, MeasuresTheCnnAndReusesTheCache) {
  const int64_t batch = 16;
  // A private copy of the fixture, so the cache lands in a temporary directory.
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("onnxtrain_cost_model_test_" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::filesystem::path model = dir / "cnn.onnx";
  std::filesystem::copy_file(kModels + "cnn_opset17.onnx", model);
  ImportedModel imported = import_model(model.string());
  Graph g = imported.graph;
  AttachedLoss loss = attach_loss(g, parse_loss_spec("cross-entropy"));
  const TrainingGraph t = build_training_graph(g, {.loss = loss.loss});

  const DeviceDescription cpu = measure_local_cpu();
  CostProfile analytic = build_cost_profile(t, batch, cpu);
  CostProfile measured = analytic;
  const NodeTimes first = apply_profiled_times(measured, t, model.string());
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.cache_path, profile_cache_path(model.string(), batch));
  EXPECT_TRUE(std::filesystem::exists(first.cache_path)) << first.cache_note;
  EXPECT_EQ(first.kernel_seconds.size(), t.graph.node_count());
  const std::vector<size_t> owner = owning_forward_node(t);
  for (size_t i = 0; i < measured.nodes.size(); ++i) {
    if (measured.nodes[i].op_type == "Flatten") {  // a view of its input, as in a training step: no kernel
      EXPECT_EQ(measured.nodes[i].forward_seconds, 0) << measured.nodes[i].name;
      continue;
    }
    EXPECT_GT(measured.nodes[i].forward_seconds, 0) << measured.nodes[i].name;
    const bool has_backward = std::count(owner.begin() + t.forward_node_count, owner.end(), i) > 0;
    if (has_backward) {
      EXPECT_GT(measured.nodes[i].backward_seconds, 0) << measured.nodes[i].name;
    }
  }

  // The second call reads the cache: the same numbers, no measurement.
  CostProfile again = analytic;
  const NodeTimes second = apply_profiled_times(again, t, model.string());
  EXPECT_TRUE(second.from_cache) << second.cache_note;
  EXPECT_TRUE(second.kernel_seconds.empty());
  for (size_t i = 0; i < again.nodes.size(); ++i) {
    EXPECT_DOUBLE_EQ(again.nodes[i].forward_seconds, measured.nodes[i].forward_seconds);
    EXPECT_DOUBLE_EQ(again.nodes[i].backward_seconds, measured.nodes[i].backward_seconds);
  }
  // Another batch has its own file; a model file that changed is measured again.
  CostProfile other = build_cost_profile(t, batch / 2, cpu);
  EXPECT_FALSE(apply_profiled_times(other, t, model.string()).from_cache);
  EXPECT_TRUE(std::filesystem::exists(profile_cache_path(model.string(), batch / 2)));
  std::filesystem::last_write_time(model, std::filesystem::last_write_time(model) + std::chrono::seconds(5));
  CostProfile touched = analytic;
  const NodeTimes third = apply_profiled_times(touched, t, model.string());
  EXPECT_FALSE(third.from_cache);
  EXPECT_NE(third.cache_note.find("another model file"), std::string::npos) << third.cache_note;
  CostProfile reused = analytic;
  EXPECT_TRUE(apply_profiled_times(reused, t, model.string()).from_cache) << "the rewritten cache matches again";
  std::ofstream(profile_cache_path(model.string(), batch)) << "{ not json";
  CostProfile damaged = analytic;
  const NodeTimes fourth = apply_profiled_times(damaged, t, model.string());
  EXPECT_FALSE(fourth.from_cache);
  EXPECT_NE(fourth.cache_note.find("not readable"), std::string::npos) << fourth.cache_note;
  CostProfile forced = analytic;
  NodeProfileOptions measure_again;
  measure_again.use_cache = false;
  EXPECT_FALSE(apply_profiled_times(forced, t, model.string(), measure_again).from_cache);

  // The analytic model on the probed CPU and the measurement are of the same order (no unit slip of 1e3
  // or more; wide bounds, as both are measured on a machine other processes share, where a probe taken
  // while another test runs can be tens of times off).
  const StageCost a = sum_stage(analytic, 0, analytic.nodes.size());
  const StageCost m = sum_stage(measured, 0, measured.nodes.size());
  const double ratio = (a.forward_seconds + a.backward_seconds) / (m.forward_seconds + m.backward_seconds);
  std::printf("cnn batch %lld: analytic %.3f ms (fwd %.3f), measured %.3f ms (fwd %.3f), ratio %.2f\n",
              static_cast<long long>(batch), (a.forward_seconds + a.backward_seconds) * 1e3, a.forward_seconds * 1e3,
              (m.forward_seconds + m.backward_seconds) * 1e3, m.forward_seconds * 1e3, ratio);
  EXPECT_GT(ratio, 1e-3);
  EXPECT_LT(ratio, 1e3);
  std::filesystem::remove_all(dir);
}

TEST(CostModel, BadBatchIsAnError) {
  EXPECT_NE(
      error_of([] { build_cost_profile(skip_graph(), 0, test_device()); }).find("micro-batch size must be positive"),
      std::string::npos);
}

TEST(CostModel, EveryFixtureHasKnownSizesAndProfiles) {
  for (const char* file : {"mlp_opset17.onnx", "cnn_opset17.onnx", "resnet_opset17.onnx", "transformer_opset17.onnx",
                           "transformer_dynamo.onnx", "resnet_dynamo.onnx"}) {
    SCOPED_TRACE(file);
    const TrainingGraph t = fixture_training_graph(file);
    CostModelReport report;
    CostProfile p = build_cost_profile(t, 4, device_from_preset("h100"), &report);
    EXPECT_TRUE(report.unknown_sizes.empty()) << report.unknown_sizes.front();
    double flops = 0;
    for (const NodeCost& c : p.nodes) flops += c.forward_flops + c.backward_flops;
    EXPECT_GT(flops, 0);
    const NodeTimes times = measure_node_times(t, 4, {.repetitions = 1, .warmup = 0});
    double measured = 0;
    for (size_t i = 0; i < p.nodes.size(); ++i) measured += times.forward_seconds[i] + times.backward_seconds[i];
    std::printf("%-26s %3zu forward nodes, %4zu in all, %8.3f GFLOP per step of 4, measured %.3f ms\n", file,
                p.nodes.size(), t.graph.node_count(), flops / 1e9, measured * 1e3);
    EXPECT_GT(measured, 0);
  }
}
