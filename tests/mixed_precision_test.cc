// Mixed-precision training (graph/mixed_precision.h, executor/loss_scaler.h, TrainerOptions::precision):
// the autocast rewrite puts exactly Conv/Gemm/MatMul (and their backward ops) in half with biases and
// initializers float32; every node of the training graphs it gives has a reference kernel; bf16 and fp16
// training follow float32 training closely; fp16 loss scaling skips overflowing steps and grows the scale
// as torch.cuda.amp.GradScaler does, on the CPU and on a GPU (the GPU cases skip without one), and its
// state round-trips through restore().
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "executor/data_parallel.h"
#include "executor/inference_session.h"
#include "executor/pipeline/pipeline_trainer.h"
#include "executor/trainer.h"
#include "frontend/data_loader.h"
#include "frontend/dataset.h"
#include "frontend/importer.h"
#include "graph/autodiff/training_recipe.h"
#include "kernels/cuda/device_query.h"
#include "tests/graph_builder.h"

namespace onnxtrain {
namespace {

using testing_support::add_inferred_node;
using testing_support::add_parameter;

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";

TrainerOptions options(Precision precision, double lr = 0.05) {
  TrainerOptions o;
  o.loss = parse_loss_spec("cross-entropy");
  o.schedule.base_lr = lr;
  o.precision = precision;
  o.dropout = false;
  return o;
}

bool is_half(DType d) { return d == DType::Float16 || d == DType::BFloat16; }

// The ops that may touch a half value: the compute ops, their backward ops, Cast, data movement, and Shape
// (a FusedMatMul's gradient over flattened rows reads the shape of its half operand to give it back).
const std::set<std::string> kHalfOps = {"Conv",      "ConvGrad", "Gemm",      "MatMul",  "FusedMatMul", "Cast",
                                        "Transpose", "Reshape",  "Unsqueeze", "Squeeze", "Identity",    "Shape"};

// Checks the training graph of `trainer`: half values only around kHalfOps, every initializer float32 or
// integer, and a reference kernel for every node. Returns the number of half compute nodes.
int check_training_graph(const Trainer& trainer, DType half) {
  const Graph& g = trainer.training_graph().graph;
  int compute = 0;
  for (NodeId id : g.order()) {
    const Node& n = g.node(id);
    bool touches_half = false;
    for (const auto* list : {&n.inputs, &n.outputs}) {
      for (ValueId v : *list) {
        if (!v.valid() || !is_half(g.value(v).dtype)) continue;
        EXPECT_EQ(g.value(v).dtype, half) << n.name;
        touches_half = true;
      }
    }
    if (!touches_half) continue;
    EXPECT_TRUE(kHalfOps.count(n.op_type)) << n.op_type << " node '" << n.name << "' runs in half";
    if (n.op_type == "Conv" || n.op_type == "Gemm" || n.op_type == "MatMul" || n.op_type == "FusedMatMul") {
      ++compute;
      // A FusedMatMul's float32 bias stays in it (float32_output); the others' leave as float32 Adds.
      const bool float32_bias = n.op_type == "FusedMatMul" && n.inputs.size() == 3 &&
                                n.attr_int("float32_output", 0) == 1 && g.value(n.inputs[2]).dtype == DType::Float32;
      EXPECT_TRUE(n.inputs.size() == 2u || float32_bias) << n.name << ": the bias must stay float32";
      EXPECT_FALSE(n.has_attribute("beta")) << n.name;
      // A FusedMatMul keeps its folded scalings as alpha, and so do the products of its gradient; a model's
      // Gemm has its alpha as a float32 Mul after the cast back.
      const bool fused_product = n.op_type == "FusedMatMul" || n.name.find("MatMul_grad/") != std::string::npos;
      EXPECT_TRUE(fused_product || !n.has_attribute("alpha")) << n.name;
    }
  }
  for (ValueId v : g.initializers) EXPECT_FALSE(is_half(g.value(v).dtype)) << g.value(v).name;
  const std::vector<std::string> missing = InferenceSession(g, "reference").missing_kernels();
  EXPECT_TRUE(missing.empty()) << missing.front();
  return compute;
}

TEST(MixedPrecision, HalfOnlyWhereAutocastPutsItAndEveryNodeHasAKernel) {
  // Counted: the half Conv/Gemm/MatMul nodes, forward and backward (Gemm and MatMul gradients are Gemms
  // and MatMuls; Conv's is a ConvGrad, checked for a kernel but not counted).
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    for (const std::string name : {"cnn_opset17", "mlp_opset17", "resnet_opset17", "transformer_opset17"}) {
      SCOPED_TRACE(name + " " + precision_name(p));
      ImportedModel model = import_model(kModels + name + ".onnx");
      Trainer trainer(model.graph, options(p));
      const int half_compute = check_training_graph(trainer, compute_dtype(p));
      std::printf("%s %s: %d half Conv/Gemm/MatMul nodes in the training graph\n", name.c_str(),
                  precision_name(p).c_str(), half_compute);
      EXPECT_GT(half_compute, 0);
      // The parameters the optimizer updates are the float32 initializers, all of them still trained.
      ImportedModel plain = import_model(kModels + name + ".onnx");
      Trainer reference(plain.graph, options(Precision::fp32));
      EXPECT_EQ(trainer.gradient_order().size(), reference.gradient_order().size());
      for (const auto& [param, t] : trainer.trained_initializers()) EXPECT_EQ(t.dtype(), DType::Float32) << param;
    }
  }
}

TEST(MixedPrecision, RewriteKeepsGemmAlphaBetaAndBiasInFloat32) {
  // Y = 0.5·A·Bᵀ + 2·C and a Conv with bias: the rewritten graph computes the same within bf16 rounding,
  // with the scaling and the bias as float32 nodes after the cast back.
  Graph g;
  g.info.opsets[""] = 17;
  ValueId x =
      g.add_value({.name = "x", .dtype = DType::Float32, .shape = Shape::of({2, 3, 5, 5}), .role = ValueRole::Input});
  g.inputs.push_back(x);
  Tensor w(DType::Float32, {4, 3, 3, 3}), b(DType::Float32, {4}), gw(DType::Float32, {6, 36}), gc(DType::Float32, {6});
  for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = std::sin(0.7f * i);
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = 0.25f * i - 0.4f;
  for (int64_t i = 0; i < gw.numel(); ++i) gw.data<float>()[i] = std::cos(0.3f * i);
  for (int64_t i = 0; i < gc.numel(); ++i) gc.data<float>()[i] = 0.1f * i;
  ValueId conv =
      add_inferred_node(g, "conv", "Conv", {x, add_parameter(g, "W", w), add_parameter(g, "B", b)}, "conv_out");
  ValueId flat = add_inferred_node(g, "flat", "Flatten", {conv}, "flat_out");
  ValueId y = add_inferred_node(g, "gemm", "Gemm", {flat, add_parameter(g, "GW", gw), add_parameter(g, "GC", gc)}, "y",
                                {{"transB", int64_t{1}}, {"alpha", 0.5}, {"beta", 2.0}});
  g.outputs.push_back(y);
  Graph half = g;
  const MixedPrecisionReport report = apply_mixed_precision(half, Precision::bf16);
  EXPECT_EQ(report.half_nodes, (std::vector<std::string>{"conv", "gemm"}));
  EXPECT_EQ(half.value(*half.find_value("y")).dtype, DType::Float32);
  EXPECT_EQ(half.value(*half.find_value("y")).shape.static_sizes(), (std::vector<int64_t>{2, 6}));
  std::multiset<std::string> float_ops;
  for (NodeId id : half.order()) {
    const Node& n = half.node(id);
    if (n.op_type == "Add" || n.op_type == "Mul" || n.op_type == "Reshape") float_ops.insert(n.op_type);
  }
  EXPECT_EQ(float_ops, (std::multiset<std::string>{"Add", "Add", "Mul", "Mul", "Reshape"}));
  Tensor input(DType::Float32, {2, 3, 5, 5});
  for (int64_t i = 0; i < input.numel(); ++i) input.data<float>()[i] = std::sin(0.11f * i + 1);
  const Tensor want = InferenceSession(g, "reference").run({{"x", input}}).at("y");
  const Tensor got = InferenceSession(half, "reference").run({{"x", input}}).at("y");
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    worst = std::max(worst, static_cast<double>(std::abs(got.data<float>()[i] - want.data<float>()[i])));
    scale = std::max(scale, static_cast<double>(std::abs(want.data<float>()[i])));
  }
  EXPECT_GT(worst, 0) << "bf16 rounding must show";
  EXPECT_LT(worst, 2e-2 * scale);
}

// On the CPU the CNN's first convolution (one input channel) stays float32 under bf16: it reads the image
// itself, no Cast; the second casts its operands. A GPU's recipe (the CPU's rewrites off) casts both.
TEST(MixedPrecision, OnTheCpuAConvOfFewerThanFourChannelsStaysFloat32) {
  ImportedModel model = import_model(kModels + "cnn_opset17.onnx");
  TrainingRecipeOptions cpu{.loss = parse_loss_spec("cross-entropy"), .precision = Precision::bf16};
  TrainingRecipeOptions gpu = cpu;
  gpu.set_cpu_rewrites(false);
  for (const auto& [options, first_in_half] : {std::pair{cpu, false}, std::pair{gpu, true}}) {
    const Graph& g = make_training_recipe(model.graph, options).training.graph;
    std::vector<DType> conv_inputs;
    for (NodeId id : g.order())
      if (g.node(id).op_type == "Conv") conv_inputs.push_back(g.value(g.node(id).inputs[0]).dtype);
    ASSERT_EQ(conv_inputs.size(), 2u);
    EXPECT_EQ(conv_inputs[0], first_in_half ? DType::BFloat16 : DType::Float32);
    EXPECT_EQ(conv_inputs[1], DType::BFloat16);
  }
  int kept = 0;
  for (NodeId id : model.graph.order()) kept += conv_stays_float32_on_cpu(model.graph, model.graph.node(id));
  EXPECT_EQ(kept, 1);
}

// A depthwise Conv (group = its input's channels) stays float32 on the CPU too; a grouped one that is not
// depthwise, and a pointwise one, are cast.
TEST(MixedPrecision, OnTheCpuADepthwiseConvStaysFloat32) {
  Graph g;
  g.info.opsets[""] = 17;
  const ValueId x = testing_support::add_input(g, "x", {2, 8, 6, 6});
  const auto conv = [&](const std::string& name, ValueId in, std::vector<int64_t> w, int64_t group) {
    return add_inferred_node(g, name, "Conv",
                             {in, add_parameter(g, name + ".w", testing_support::uniform_tensor(w, 1))}, name + "_out",
                             {{"group", group}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  };
  const ValueId d = conv("depthwise", x, {8, 1, 3, 3}, 8);
  const ValueId p = conv("grouped", d, {8, 4, 3, 3}, 2);
  g.outputs.push_back(conv("dense", p, {4, 8, 3, 3}, 1));
  std::map<std::string, bool> kept;
  for (NodeId id : g.order()) kept[g.node(id).name] = conv_stays_float32_on_cpu(g, g.node(id));
  EXPECT_EQ(kept, (std::map<std::string, bool>{{"depthwise", true}, {"grouped", false}, {"dense", false}}));
  Graph half = g;
  EXPECT_EQ(apply_mixed_precision(half, Precision::bf16, {.cpu_float32_convs = true}).half_nodes,
            (std::vector<std::string>{"grouped", "dense"}));
}

// The relative difference ‖a − b‖ / ‖b‖.
double relative(const Tensor& a, const Tensor& b) {
  double d = 0, n = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    d += std::pow(a.data<float>()[i] - b.data<float>()[i], 2);
    n += std::pow(b.data<float>()[i], 2);
  }
  return std::sqrt(d / std::max(n, 1e-30));
}

double squared_norm(const Tensor& t) {
  double n = 0;
  for (float v : t.data<float>()) n += static_cast<double>(v) * v;
  return n;
}

struct TrainingRun {
  std::map<std::string, Tensor> first_gradients;
  std::vector<float> losses;
};

TrainingRun train_cnn(Precision p, int steps) {
  ImportedModel model = import_model(kModels + "cnn_opset17.onnx");
  Dataset data = load_dataset("synthetic:1,28,28:10:256", {.normalize = Normalization::MeanStd, .seed = 4});
  DataLoader loader(data, {.batch = 8, .shuffle = false, .prefetch = false});
  Trainer trainer(model.graph, options(p, 0.05));
  TrainingRun run;
  Batch first = loader.next();
  for (const auto& [name, g] : trainer.compute_gradients(first.x, first.y)) run.first_gradients[name] = g.clone();
  run.losses.push_back(trainer.train_step(first.x, first.y));
  for (int i = 1; i < steps; ++i) {
    Batch b = loader.next();
    run.losses.push_back(trainer.train_step(b.x, b.y));
  }
  return run;
}

// The first step's gradients and three steps' losses of the cnn against float32 training. At initialisation
// on synthetic data the early layers' gradients are sums with heavy cancellation, so their relative error
// is far above the formats' rounding: PyTorch 1.13's torch.autocast("cpu", torch.bfloat16) on this model
// and a batch of 16 is 9.8% off float32 for conv1.weight, 4.6% for conv2.weight, 0.4% for fc1.weight
// (tests/mixed_precision_torch_check.py prints those figures). The bounds give each format that headroom;
// float16 (11 significant bits against bfloat16's 8) must be several times closer.
TEST(MixedPrecision, HalfTrainingFollowsFloat32) {
  const TrainingRun fp32 = train_cnn(Precision::fp32, 3);
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    SCOPED_TRACE(precision_name(p));
    const TrainingRun half = train_cnn(p, 3);
    const double per_parameter = p == Precision::bf16 ? 0.15 : 0.04;
    const double whole_model = p == Precision::bf16 ? 0.08 : 0.01;
    ASSERT_EQ(half.first_gradients.size(), fp32.first_gradients.size());
    double d = 0, n = 0;
    for (const auto& [name, g] : fp32.first_gradients) {
      const Tensor& h = half.first_gradients.at(name);
      const double r = relative(h, g);
      EXPECT_LT(r, per_parameter) << name;
      EXPECT_GT(r, 0) << name << ": the half run must differ from float32 somewhere";
      d += std::pow(r, 2) * squared_norm(g);
      n += squared_norm(g);
    }
    EXPECT_LT(std::sqrt(d / n), whole_model);
    std::printf("%s: whole-model gradient error %.4f\n", precision_name(p).c_str(), std::sqrt(d / n));
    for (size_t i = 0; i < fp32.losses.size(); ++i) {
      EXPECT_NEAR(half.losses[i], fp32.losses[i], 0.03 * fp32.losses[i]) << "step " << i;
    }
  }
}

// The transformer: its sequence linear layers (MatMul (B,S,K)·(K,N)) run flattened to one matrix product in
// half, the attention products batched; losses and first gradients stay close to float32.
TEST(MixedPrecision, TransformerFollowsFloat32) {
  Dataset data;
  data.inputs = Tensor(DType::Int64, {32, 16});
  data.labels = Tensor(DType::Int64, {32});
  std::mt19937_64 rng(7);
  for (int64_t& t : data.inputs.data<int64_t>()) t = static_cast<int64_t>(rng() % 100);
  for (int64_t& y : data.labels.data<int64_t>()) y = static_cast<int64_t>(rng() % 10);
  auto run = [&](Precision p) {
    ImportedModel model = import_model(kModels + "transformer_opset17.onnx");
    Trainer trainer(model.graph, options(p));
    DataLoader loader(data, {.batch = 4, .shuffle = false, .prefetch = false});
    TrainingRun r;
    Batch first = loader.next();
    for (const auto& [name, g] : trainer.compute_gradients(first.x, first.y)) r.first_gradients[name] = g.clone();
    r.losses.push_back(trainer.train_step(first.x, first.y));
    Batch second = loader.next();
    r.losses.push_back(trainer.train_step(second.x, second.y));
    return r;
  };
  const TrainingRun fp32 = run(Precision::fp32);
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    SCOPED_TRACE(precision_name(p));
    const TrainingRun half = run(p);
    double d = 0, n = 0;
    for (const auto& [name, g] : fp32.first_gradients) {
      d += std::pow(relative(half.first_gradients.at(name), g), 2) * squared_norm(g);
      n += squared_norm(g);
    }
    std::printf("transformer %s: whole-model gradient error %.4f\n", precision_name(p).c_str(), std::sqrt(d / n));
    EXPECT_LT(std::sqrt(d / n), p == Precision::bf16 ? 0.08 : 0.01);
    EXPECT_GT(d, 0);
    for (size_t i = 0; i < fp32.losses.size(); ++i) EXPECT_NEAR(half.losses[i], fp32.losses[i], 0.03 * fp32.losses[i]);
  }
}

TEST(LossScaler, BacksOffOnOverflowAndGrowsAfterTheInterval) {
  LossScaler s({.init_scale = 1024, .growth_interval = 3});
  std::vector<float> g = {2048.0f, -512.0f};
  EXPECT_TRUE(LossScaler::unscale(g, s.scale()));
  EXPECT_EQ(g, (std::vector<float>{2.0f, -0.5f}));
  std::vector<float> bad = {1.0f, INFINITY, 3.0f};
  EXPECT_FALSE(LossScaler::unscale(bad, s.scale()));
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 1024);
  s.update(false);  // resets the tracker
  EXPECT_EQ(s.scale(), 512);
  EXPECT_EQ(s.growth_tracker(), 0);
  s.update(true);
  s.update(true);
  EXPECT_EQ(s.scale(), 512);
  s.update(true);
  EXPECT_EQ(s.scale(), 1024);
  EXPECT_EQ(s.skipped_steps(), 1);
  EXPECT_THROW(LossScaler({.backoff_factor = 1.5}), Error);
}

Batch first_batch() {
  Dataset data = load_dataset("synthetic:1,28,28:10:64", {.normalize = Normalization::MeanStd, .seed = 2});
  DataLoader loader(data, {.batch = 8, .shuffle = false, .prefetch = false});
  return loader.next();
}

// An fp16 step on `device` whose scaled gradients overflow float16 is skipped: no optimizer step, the same
// weights, the scale halved.
void expect_overflowing_step_skipped(Device device) {
  ImportedModel model = import_model(kModels + "cnn_opset17.onnx");
  TrainerOptions o = options(Precision::fp16);
  o.optimizer.kind = OptimizerKind::adamw;
  o.device = device;
  // 2^120: the scaled loss is a finite float32, but its gradient overflows float16 (max 65504) at once.
  o.loss_scaler = {.init_scale = std::ldexp(1.0, 120), .growth_interval = 2};
  Trainer trainer(model.graph, o);
  std::map<std::string, Tensor> before;
  for (const auto& [name, t] : trainer.trained_initializers()) before[name] = t.clone();
  const Batch b = first_batch();
  const float loss = trainer.train_step(b.x, b.y);
  EXPECT_TRUE(std::isfinite(loss)) << "the reported loss is the unscaled one";
  EXPECT_EQ(trainer.step(), 0);
  EXPECT_EQ(trainer.loss_scaler()->scale(), std::ldexp(1.0, 119));
  EXPECT_EQ(trainer.loss_scaler()->skipped_steps(), 1);
  EXPECT_TRUE(trainer.optimizer().state_tensors().count("global_step"));
  for (const auto& [name, t] : trainer.trained_initializers()) {
    if (name.find("running") != std::string::npos) continue;  // none in this model; statistics follow the batch
    EXPECT_EQ(std::memcmp(t.raw(), before.at(name).raw(), t.nbytes()), 0) << name << " changed on a skipped step";
  }
}

TEST(LossScaler, Fp16OverflowSkipsTheStepAndHalvesTheScale) {
  expect_overflowing_step_skipped(Device::cpu());
  const Batch b = first_batch();
  // A scale that fits: finite steps are taken, and after growth_interval of them the scale doubles.
  TrainerOptions small = options(Precision::fp16);
  small.loss_scaler = {.init_scale = 256, .growth_interval = 2};
  ImportedModel fresh = import_model(kModels + "cnn_opset17.onnx");
  Trainer grows(fresh.graph, small);
  grows.train_step(b.x, b.y);
  EXPECT_EQ(grows.loss_scaler()->scale(), 256);
  grows.train_step(b.x, b.y);
  EXPECT_EQ(grows.step(), 2);
  EXPECT_EQ(grows.loss_scaler()->scale(), 512);
  EXPECT_EQ(grows.loss_scaler()->skipped_steps(), 0);

  // The scaler's state travels with the optimizer state: a restored trainer continues with it.
  std::map<std::string, Tensor> state = grows.optimizer().state_tensors();
  state.merge(grows.loss_scaler_state());
  ImportedModel third = import_model(kModels + "cnn_opset17.onnx");
  Trainer resumed(third.graph, small);
  resumed.restore(grows.trained_initializers(), state);
  EXPECT_EQ(resumed.loss_scaler()->scale(), 512);
  EXPECT_EQ(resumed.step(), 2);
  EXPECT_EQ(resumed.train_step(b.x, b.y), grows.train_step(b.x, b.y));
  ImportedModel fourth = import_model(kModels + "cnn_opset17.onnx");
  Trainer unscaled(fourth.graph, small);
  EXPECT_THROW(unscaled.restore(grows.trained_initializers(), grows.optimizer().state_tensors()), Error);
}

// --- fp16 on a GPU: the unscale and the finite check run on the device (DeviceOptimizer::unscale) ---

TEST(LossScaler, Fp16OverflowOnCudaSkipsTheStep) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  expect_overflowing_step_skipped(Device::cuda(0));
}

TEST(MixedPrecision, Fp16OnCudaFollowsFp16OnTheCpu) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  ImportedModel cpu_model = import_model(kModels + "cnn_opset17.onnx");
  ImportedModel gpu_model = import_model(kModels + "cnn_opset17.onnx");
  TrainerOptions o = options(Precision::fp16);
  o.loss_scaler = {.init_scale = 1024, .growth_interval = 3};
  Trainer cpu(cpu_model.graph, o);
  o.device = Device::cuda(0);
  Trainer gpu(gpu_model.graph, o);
  const Batch b = first_batch();
  for (int step = 0; step < 5; ++step) {
    const double cpu_loss = cpu.train_step(b.x, b.y), gpu_loss = gpu.train_step(b.x, b.y);
    // Both compute Conv/Gemm in float16 with float32 accumulation, in different orders.
    EXPECT_NEAR(gpu_loss, cpu_loss, 1e-2 * std::max(1.0, std::abs(cpu_loss))) << "step " << step;
  }
  EXPECT_EQ(gpu.step(), cpu.step());
  EXPECT_EQ(gpu.loss_scaler()->scale(), cpu.loss_scaler()->scale()) << "grew after 3 finite steps on both";
}

// Data parallelism in half precision: each replica runs the autocast graph on its rows and the
// row-weighted float32 gradients are summed (fp16: each replica's unscaled first), so two replicas follow
// one trainer of the same precision on the whole batch up to the rounding of each replica's half
// products (a partial sum rounded to half, not the whole one), as PyTorch's DDP under autocast does.
TEST(MixedPrecision, HalfDataParallelFollowsOneHalfTrainer) {
  for (Precision p : {Precision::bf16, Precision::fp16}) {
    SCOPED_TRACE(precision_name(p));
    ImportedModel one_model = import_model(kModels + "cnn_opset17.onnx");
    ImportedModel dp_model = import_model(kModels + "cnn_opset17.onnx");
    Trainer one(one_model.graph, options(p));
    DataParallelTrainer dp(dp_model.graph, {.trainer = options(p), .replicas = 2});
    EXPECT_GT(check_training_graph(dp.replica(1), compute_dtype(p)), 0) << "the replicas compute in half";
    std::map<std::string, Tensor> start;
    for (const auto& [name, t] : one.trained_initializers()) start[name] = t.clone();
    Dataset data = load_dataset("synthetic:1,28,28:10:64", {.normalize = Normalization::MeanStd, .seed = 4});
    DataLoader loader(data, {.batch = 16, .shuffle = false, .prefetch = false});
    for (int step = 0; step < 3; ++step) {
      Batch b = loader.next();
      const float a = one.train_step(b.x, b.y), d = dp.train_step(b.x, b.y);
      EXPECT_NEAR(d, a, 1e-2 * a) << "step " << step;
    }
    EXPECT_EQ(dp.replica(0).step(), 3);
    double gap = 0, moved = 0;
    const std::map<std::string, Tensor> want = one.trained_initializers(), got = dp.trained_initializers();
    for (const auto& [name, w] : want) {
      if (w.dtype() != DType::Float32) continue;
      for (int64_t i = 0; i < w.numel(); ++i) {
        gap += std::pow(got.at(name).data<float>()[i] - w.data<float>()[i], 2);
        moved += std::pow(w.data<float>()[i] - start.at(name).data<float>()[i], 2);
      }
    }
    ASSERT_GT(moved, 0);
    std::printf("%s, 2 replicas against one trainer: weight gap %.5f of the distance trained\n",
                precision_name(p).c_str(), std::sqrt(gap / moved));
    EXPECT_GT(gap, 0) << "the half rounding of the replicas' partial products must show";
    EXPECT_LT(std::sqrt(gap / moved), 0.05) << "relative to how far three steps moved the weights";
  }
}

// An fp16 data-parallel step whose combined gradient overflows is skipped by every replica, whose scalers
// all back off: the replicas stay identical. (Steps that fit: HalfDataParallelFollowsOneHalfTrainer.)
void expect_data_parallel_skips_an_overflowing_step(Device device) {
  ImportedModel model = import_model(kModels + "cnn_opset17.onnx");
  TrainerOptions o = options(Precision::fp16);
  o.device = device;
  o.loss_scaler = {.init_scale = std::ldexp(1.0, 120), .growth_interval = 2};  // overflows float16 at once
  DataParallelTrainer dp(model.graph, {.trainer = o, .replicas = device.kind == DeviceKind::Cuda ? 1 : 2});
  std::map<std::string, Tensor> before;
  for (const auto& [name, t] : dp.trained_initializers()) before[name] = t.clone();
  const Batch b = first_batch();
  std::vector<int64_t> indices;
  const std::vector<float> losses = dp.train(
      2, [&] { return std::pair(b.x, b.y); }, [&](int64_t mini_batch, float) { indices.push_back(mini_batch); });
  EXPECT_TRUE(std::isfinite(losses[0])) << "the reported loss is the unscaled one";
  EXPECT_EQ(indices, (std::vector<int64_t>{0, 1})) << "skipped steps used their mini-batches too";
  for (int r = 0; r < dp.replicas(); ++r) {
    EXPECT_EQ(dp.replica(r).step(), 0) << "replica " << r;
    EXPECT_EQ(dp.replica(r).loss_scaler()->scale(), std::ldexp(1.0, 118)) << "replica " << r;
    EXPECT_EQ(dp.replica(r).loss_scaler()->skipped_steps(), 2) << "replica " << r;
  }
  for (const auto& [name, t] : dp.trained_initializers())
    EXPECT_EQ(std::memcmp(t.raw(), before.at(name).raw(), t.nbytes()), 0) << name << " changed on a skipped step";
}

TEST(MixedPrecision, Fp16DataParallelSkipsAnOverflowingStepOnEveryReplica) {
  expect_data_parallel_skips_an_overflowing_step(Device::cpu());
}

TEST(MixedPrecision, Fp16DataParallelOverNcclSkipsAnOverflowingStep) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  expect_data_parallel_skips_an_overflowing_step(Device::cuda(0));
}

// One replica over NCCL in fp16 steps as one fp16 trainer on the same GPU: the scaled device gradients,
// the all-reduce (the identity for one rank) and the unscale in apply_device_gradients are wired as
// train_step's.
TEST(MixedPrecision, Fp16DataParallelOverNcclOnOneGpuEqualsOneTrainer) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  ImportedModel one_model = import_model(kModels + "cnn_opset17.onnx");
  ImportedModel dp_model = import_model(kModels + "cnn_opset17.onnx");
  TrainerOptions o = options(Precision::fp16);
  o.device = Device::cuda(0);
  o.loss_scaler = {.init_scale = 1024, .growth_interval = 2};
  Trainer one(one_model.graph, o);
  DataParallelTrainer dp(dp_model.graph, {.trainer = o, .replicas = 1});
  const Batch b = first_batch();
  for (int step = 0; step < 4; ++step) EXPECT_EQ(dp.train_step(b.x, b.y), one.train_step(b.x, b.y)) << "step " << step;
  EXPECT_EQ(dp.replica(0).loss_scaler()->scale(), one.loss_scaler()->scale());
  for (const auto& [name, t] : one.trained_initializers())
    EXPECT_EQ(std::memcmp(t.raw(), dp.trained_initializers().at(name).raw(), t.nbytes()), 0) << name;
}

// The message of the Error `make` throws ("" when it throws none).
template <typename Make>
std::string refusal(Make make) {
  try {
    make();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(MixedPrecision, Fp16RefusalsName) {
  ImportedModel model = import_model(kModels + "mlp_opset17.onnx");
  // Buckets stream the gradients during the backward pass, still loss-scaled.
  EXPECT_NE(refusal([&] {
              DataParallelTrainer dp(model.graph,
                                     {.trainer = options(Precision::fp16), .replicas = 2, .bucket_bytes = 4096});
            }).find("fp16 sends whole gradients after the backward pass; drop --bucket-mb"),
            std::string::npos);
  // Pipeline stages step on their own.
  EXPECT_NE(refusal([&] {
              PipelineTrainer pipeline(model.graph, {.trainer = options(Precision::fp16), .stages = 2});
            }).find("pipeline: --precision fp16 is not supported"),
            std::string::npos);
}

TEST(MixedPrecision, PrecisionNames) {
  EXPECT_EQ(precision_from_name("bf16"), Precision::bf16);
  EXPECT_EQ(compute_dtype(Precision::fp16), DType::Float16);
  EXPECT_THROW(precision_from_name("fp8"), Error);
  Graph g;
  EXPECT_TRUE(apply_mixed_precision(g, Precision::fp32).half_nodes.empty());
}

}  // namespace
}  // namespace onnxtrain
