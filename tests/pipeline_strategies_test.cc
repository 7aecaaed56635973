// executor/pipeline: what each strategy does with the weights (docs/pipeline-schedules.md), on the executor:
// 1f1b equals gpipe with less activation memory; PipeDream's backward reads its forward's stash and
// naive's does not; 2bw keeps two versions and updates one version stale; vertical sync reads stage 0's
// version; --deferred-bn's running statistics; the report's staleness, SpecTrain's prediction and its scoring, and the
// weight policy alone.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include "executor/pipeline/pipeline_trainer.h"
#include "executor/pipeline/weight_policy.h"
#include "frontend/importer.h"
#include "graph/op_schema.h"
#include "tests/graph_builder.h"
#include "tests/pipeline_fixtures.h"

namespace onnxtrain {
namespace {

using namespace pipeline_testing;  // NOLINT: the shared helpers of the pipeline tests

// --deferred-bn (torchgpipe's DeferredBatchNorm): with M micro-batches the first BatchNorm node's running
// statistics follow the one-device run (whose batch is the whole mini-batch) under gpipe, 1f1b and 2bw:
// within 1e-4 of the largest statistic (1.1e-5 measured: oneDNN's float sums over a quarter of the values;
// exact with M = 1). Without it they take M momentum steps from micro-batch statistics and differ by
// about 0.2. lr 0 keeps
// the weights equal, so the first node's input is the same in every run; deeper nodes see activations
// normalised with micro-batch statistics, which deferring does not change (nor should it).
TEST(PipelineTrainer, DeferredBatchNormUpdatesRunningStatisticsOncePerMiniBatch) {
  const Batches batches = make_batches("3,32,32", 16, 3, 21);
  ImportedModel m = import_model(kModels + "resnet_opset17.onnx");
  const Node* first_bn = nullptr;
  for (NodeId id : m.graph.order())
    if (m.graph.node(id).op_type == "BatchNormalization") {
      first_bn = &m.graph.node(id);
      break;
    }
  ASSERT_NE(first_bn, nullptr);
  const std::string mean = m.graph.value(first_bn->inputs[3]).name, variance = m.graph.value(first_bn->inputs[4]).name;
  const TrainerOptions trainer = momentum_sgd(0.0);
  const TrainedRun single = train_single("resnet_opset17.onnx", trainer, batches);
  for (PipelineStrategy strategy : {PipelineStrategy::gpipe, PipelineStrategy::flush_1f1b, PipelineStrategy::two_bw}) {
    for (bool deferred : {true, false}) {
      const std::string what =
          std::string(pipeline_strategy_name(strategy)) + (deferred ? " deferred" : " per micro-batch");
      PipelineOptions o = options_for({"", strategy}, trainer, 2);
      o.micro_batches = 4;
      o.deferred_batch_norm = deferred;
      const TrainedRun run = train_pipeline("resnet_opset17.onnx", o, batches);
      for (const std::string& stat : {mean, variance}) {
        const auto got = run.params.at(stat).data<float>(), want = single.params.at(stat).data<float>();
        double worst = 0, scale = 0;  // against the largest statistic: a mean near 0 has no relative precision
        for (size_t i = 0; i < got.size(); ++i) {
          worst = std::max(worst, static_cast<double>(std::abs(got[i] - want[i])));
          scale = std::max(scale, static_cast<double>(std::abs(want[i])));
        }
        worst /= scale;
        if (deferred) {
          EXPECT_LT(worst, 1e-4) << what << " " << stat;
        } else {
          EXPECT_GT(worst, 1e-2) << what << " " << stat << ": per micro-batch updates should differ";
        }
      }
    }
  }
  PipelineOptions o = options_for({"", PipelineStrategy::pipedream}, momentum_sgd(0.0), 2);
  o.deferred_batch_norm = true;
  EXPECT_THROW(train_pipeline("resnet_opset17.onnx", o, batches), Error) << "pipedream has no micro-batches";
}

// 1f1b (PipeDream-Flush) runs gpipe's micro-batches in 1F1B order: the backwards keep micro-batch order, so
// the gradient sums, the updates and the weights are gpipe's bit for bit, while stage k holds at most
// min(N-k, M) micro-batches' activations instead of M (the report's peak, measured by the stage).
TEST(PipelineTrainer, OneFOneBEqualsGpipeBitForBitWithLessActivationMemory) {
  const Batches batches = make_batches("1,28,28", 16, 3, 7);
  for (int stages : {2, 3}) {
    for (int64_t m : {1, 4}) {
      PipelineOptions o = options_for({"gpipe", PipelineStrategy::gpipe}, momentum_sgd(0.05), stages);
      o.micro_batches = m;
      PipelineReport gpipe_report, report;
      const TrainedRun gpipe = train_pipeline("cnn_opset17.onnx", o, batches, &gpipe_report);
      o.strategy = PipelineStrategy::flush_1f1b;
      const std::string what = "N=" + std::to_string(stages) + " M=" + std::to_string(m);
      expect_identical(train_pipeline("cnn_opset17.onnx", o, batches, &report), gpipe, "1f1b " + what);
      for (int k = 0; k < stages; ++k) {
        const int64_t held = std::min<int64_t>(stages - k, m);
        const StageReport& a = report.stages[static_cast<size_t>(k)];
        const StageReport& g = gpipe_report.stages[static_cast<size_t>(k)];
        if (held < m) {
          EXPECT_LT(a.peak_activation_bytes, g.peak_activation_bytes) << what << " stage " << k;
        } else {
          EXPECT_EQ(a.peak_activation_bytes, g.peak_activation_bytes) << what << " stage " << k;
        }
        EXPECT_EQ(a.gradient_sum_bytes, g.gradient_sum_bytes);
        EXPECT_EQ(a.updates, 3);
      }
    }
  }
}

// PipeDream's backward reads exactly the weights its forward read (the stash); naive's backward reads the
// weights updated since, so the two strategies train differently once N > 1.
TEST(PipelineTrainer, PipeDreamBackwardReadsTheForwardsWeights) {
  const Batches batches = make_batches("1,28,28", 8, 6, 13);
  const int n = 3;
  PassLog pipedream_log, naive_log;
  PipelineOptions o = options_for({"pipedream", PipelineStrategy::pipedream}, momentum_sgd(0.05), n);
  o.observer = pipedream_log.observer();
  const TrainedRun pipedream = train_pipeline("cnn_opset17.onnx", o, batches);
  o = options_for({"naive", PipelineStrategy::naive}, momentum_sgd(0.05), n);
  o.observer = naive_log.observer();
  const TrainedRun naive = train_pipeline("cnn_opset17.onnx", o, batches);

  int checked = 0, naive_inconsistent = 0;
  for (int k = 0; k < n; ++k) {
    for (int64_t i = 0; i < 6; ++i) {
      const auto& f = pipedream_log.passes.at({k, i, false});
      const auto& b = pipedream_log.passes.at({k, i, true});
      EXPECT_TRUE(same_weights(f.second, b.second)) << "pipedream stage " << k << " mini-batch " << i;
      EXPECT_EQ(f.first, b.first) << "stage " << k << " mini-batch " << i;
      // 1F1B: N−k−1 updates land between F_i and B_i in steady state (none before the first update exists).
      EXPECT_EQ(f.first, std::max<int64_t>(0, i - (n - k - 1))) << "stage " << k << " mini-batch " << i;
      ++checked;
      const auto& nf = naive_log.passes.at({k, i, false});
      const auto& nb = naive_log.passes.at({k, i, true});
      if (!same_weights(nf.second, nb.second)) {
        ++naive_inconsistent;
        EXPECT_LT(k, n - 1) << "the last stage updates right after its backward: nothing lands in between";
      }
    }
  }
  EXPECT_EQ(checked, n * 6);
  EXPECT_GT(naive_inconsistent, 0);
  EXPECT_TRUE(any_difference(pipedream, naive));
}

// 2bw (PipeDream-2BW): with M = 1 it is pipedream bit for bit (the sum of one gradient is that gradient);
// with M micro-batches per mini-batch in one 1F1B stream the threaded run equals its sequential emulation,
// a stage stashes at most two weight versions once M >= N-k (pipedream: N-k), and every update applies
// gradients computed at most one version before it (the micro-batches of mini-batch i read W_i or W_(i-1)).
TEST(PipelineTrainer, TwoBwKeepsTwoVersionsAndUpdatesOneVersionStale) {
  const Batches batches = make_batches("1,28,28", 16, 5, 29);
  for (int stages : {2, 3}) {
    PipelineOptions o = options_for({"pipedream", PipelineStrategy::pipedream}, momentum_sgd(0.05), stages);
    PipelineReport pipedream_report;
    const TrainedRun pipedream = train_pipeline("cnn_opset17.onnx", o, batches, &pipedream_report);
    o.strategy = PipelineStrategy::two_bw;
    expect_identical(train_pipeline("cnn_opset17.onnx", o, batches), pipedream, "2bw M=1 N=" + std::to_string(stages));

    o.micro_batches = 4;
    PassLog log;
    o.observer = log.observer();
    PipelineReport report, emulated_report;
    const TrainedRun threaded = train_pipeline("cnn_opset17.onnx", o, batches, &report);
    o.observer = nullptr;
    o.threaded = false;
    expect_identical(train_pipeline("cnn_opset17.onnx", o, batches, &emulated_report), threaded,
                     "2bw M=4 threaded against emulated, N=" + std::to_string(stages));
    EXPECT_TRUE(any_difference(threaded, pipedream)) << "M = 4 trains otherwise than pipedream";
    for (float l : threaded.losses) EXPECT_TRUE(std::isfinite(l));
    EXPECT_EQ(threaded.losses.size(), 5u);
    for (int k = 0; k < stages; ++k) {
      const StageReport& r = report.stages[static_cast<size_t>(k)];
      EXPECT_EQ(r.updates, 5);
      EXPECT_EQ(r.forward_passes, 20);
      EXPECT_LE(r.peak_stash_bytes, 2 * r.weight_bytes) << "stage " << k;
      EXPECT_GT(r.gradient_sum_bytes, 0);
      if (k == 0) {
        // pipedream: a copy per mini-batch in flight but the newest, which reads W until the update.
        EXPECT_EQ(pipedream_report.stages[0].peak_stash_bytes, (stages - 1) * r.weight_bytes);
      }
      for (int64_t i = 0; i < 5; ++i) {
        const int64_t read = log.passes.at({k, i, true}).first;  // the last micro-batch's backward of i
        EXPECT_GE(read, i - 1) << "stage " << k << ", mini-batch " << i;
        EXPECT_LE(read, i) << "stage " << k << ", mini-batch " << i;
      }
    }
  }
}

// PipeDream's vertical sync: every stage computes mini-batch i, forward and backward, at the version stage 0
// read for it (W_{i−(N−1)} in steady state), and the backward reads the forward's weights bit for bit.
// Without it a later stage's forward reads its own, newer version.
TEST(PipelineTrainer, VerticalSyncReadsStageZerosVersionOnEveryStage) {
  const int n = 3;
  const Batches batches = make_batches("1,28,28", 8, 7, 23);
  for (bool vertical : {true, false}) {
    PassLog log;
    PipelineOptions o = options_for(vertical ? kVariants[2] : kVariants[1], momentum_sgd(0.05), n);
    o.observer = log.observer();
    train_pipeline("cnn_opset17.onnx", o, batches);
    int newer = 0;
    for (int64_t i = 0; i < 7; ++i) {
      const int64_t stage0 = log.passes.at({0, i, false}).first;
      EXPECT_EQ(stage0, std::max<int64_t>(0, i - (n - 1))) << "mini-batch " << i;
      for (int k = 0; k < n; ++k) {
        const auto& forward = log.passes.at({k, i, false});
        const auto& backward = log.passes.at({k, i, true});
        EXPECT_EQ(backward.first, forward.first) << "stage " << k << ", mini-batch " << i;
        EXPECT_TRUE(same_weights(forward.second, backward.second)) << "stage " << k << ", mini-batch " << i;
        if (vertical) {
          EXPECT_EQ(forward.first, stage0) << "stage " << k << ", mini-batch " << i;
        }
        newer += forward.first > stage0;
      }
    }
    if (vertical) {
      EXPECT_EQ(newer, 0);
    } else {
      EXPECT_GT(newer, 0) << "without vertical sync the later stages read newer versions";
    }
  }
}

// Version accounting in the report: PipeDream reads W_{i−(N−k−1)} in both passes; SpecTrain (sequential
// target) aims every pass at W_i; naive's backward reads W_i.
TEST(PipelineTrainer, ReportsStalenessPerStage) {
  const Batches batches = make_batches("1,28,28", 8, 8, 17);
  for (const Variant& v : {kVariants[0], kVariants[1], kVariants[3]}) {
    PipelineReport report;
    train_pipeline("cnn_opset17.onnx", options_for(v, momentum_sgd(0.05), 3), batches, &report);
    ASSERT_EQ(report.stages.size(), 3u);
    EXPECT_EQ(report.mini_batches, 8);
    EXPECT_EQ(report.samples, 64);
    EXPECT_GT(report.samples_per_second, 0);
    const StageReport& last = report.stages[2];
    EXPECT_EQ(last.mean_staleness, 0) << v.name << ": the last stage is never stale";
    const StageReport& first = report.stages[0];
    EXPECT_GT(first.parameters, 0);
    EXPECT_EQ(first.weight_bytes, first.parameters * 4);
    EXPECT_GT(first.peak_activation_bytes, 0);
    EXPECT_EQ(first.forward_passes, 8);
    EXPECT_EQ(first.backward_passes, 8);
    if (v.strategy == PipelineStrategy::spectrain) {
      // Scored against the version each pass aimed at: the momentum prediction lands nearer to it than the
      // weights the pass would read without prediction (ratio 1), and the report counts the scoring copies.
      EXPECT_EQ(first.predictions, 7) << "mini-batches 1..7 predict on stage 0 (mini-batch 0 has s = 0)";
      EXPECT_GT(first.prediction_error, 0);
      EXPECT_LT(first.prediction_error, 1);
      EXPECT_EQ(first.prediction_bytes, 2 * 2 * first.weight_bytes) << "Ŵ and W of 2 pending predictions";
      EXPECT_EQ(last.prediction_bytes, 0) << "the last stage predicts nothing";
      // Without the metrics: the same numbers, no scoring and no copies.
      PipelineOptions quiet = options_for(v, momentum_sgd(0.05), 3);
      quiet.measure_prediction = false;
      PipelineReport quiet_report;
      const TrainedRun scored = train_pipeline("cnn_opset17.onnx", options_for(v, momentum_sgd(0.05), 3), batches);
      expect_identical(train_pipeline("cnn_opset17.onnx", quiet, batches, &quiet_report), scored, "metrics off");
      EXPECT_EQ(quiet_report.stages[0].predictions, 0);
      EXPECT_EQ(quiet_report.stages[0].prediction_bytes, 0);
    } else {
      // Stage 0 forward of i reads W_{i−2} once two updates exist: gaps 0,1,2,2,2,2,2,2.
      EXPECT_DOUBLE_EQ(first.mean_staleness_forward, 13.0 / 8.0) << v.name;
      EXPECT_DOUBLE_EQ(first.mean_staleness_backward, v.strategy == PipelineStrategy::naive ? 0.0 : 13.0 / 8.0)
          << v.name;
    }
  }
}

// A graph whose gradients never change: loss = ReduceSum(x·w0 + w1) with x fixed, so dloss/dw0 = x and
// dloss/dw1 = 1. Two stages: {Mul} and {Add, ReduceSum}.
Graph constant_gradient_graph() {
  Graph g;
  auto add = [&](const std::string& op, std::vector<ValueId> inputs, Attributes attributes = {}) {
    return testing_support::add_inferred_node(g, op, op, std::move(inputs), op + "_out", std::move(attributes));
  };
  auto param = [&](const std::string& name, std::vector<float> values) {
    Tensor t(DType::Float32, {static_cast<int64_t>(values.size())});
    std::copy(values.begin(), values.end(), t.data<float>().begin());
    return testing_support::add_parameter(g, name, t);
  };
  ValueId x = g.add_value(
      {.name = "x", .dtype = DType::Float32, .shape = Shape({Dim::symbol("batch"), Dim(4)}), .role = ValueRole::Input});
  g.inputs.push_back(x);
  ValueId w0 = param("w0", {0.5f, -1.0f, 2.0f, 0.25f});
  ValueId w1 = param("w1", {1.0f, 0.0f, -0.5f, 3.0f});
  ValueId loss = add("ReduceSum", {add("Add", {add("Mul", {x, w0}), w1})}, {{"keepdims", int64_t{0}}});
  g.value(loss).name = "total";
  g.outputs.push_back(loss);
  return g;
}

// With a constant gradient Adam's next step is its current direction, so SpecTrain's prediction one update
// ahead (stage 0 of 2: s = 1) is the real next weights: stage 0's forward of i reads (up to rounding) what
// its backward of i reads, W_i. Mini-batch 1 has no optimizer state to predict from yet.
TEST(PipelineTrainer, SpecTrainPredictsTheNextWeightsForAConstantGradient) {
  Graph g = constant_gradient_graph();
  PipelineOptions o;
  o.trainer.loss = parse_loss_spec("output:total");
  o.trainer.optimizer.kind = OptimizerKind::adam;
  o.trainer.schedule.base_lr = 0.01;
  o.strategy = PipelineStrategy::spectrain;
  o.stages = 2;
  o.stage_starts = {0, 1};
  PassLog log;
  o.observer = log.observer();
  PipelineTrainer p(g, o);
  Tensor x(DType::Float32, {2, 4});
  const float xs[] = {1.0f, -2.0f, 0.5f, 3.0f, 0.5f, 1.0f, -1.5f, 2.0f};
  std::copy(std::begin(xs), std::end(xs), x.data<float>().begin());
  const Batches batches(8, {x, Tensor(DType::Int64, {2})});
  p.train(batches);
  ASSERT_EQ(p.stage_parameters(0), std::vector<std::string>{"w0"});
  for (int64_t i = 2; i < 8; ++i) {
    const auto& f = log.passes.at({0, i, false});
    const auto& b = log.passes.at({0, i, true});
    EXPECT_EQ(f.first, i);
    EXPECT_EQ(b.first, i);
    auto predicted = f.second[0].data<float>();
    auto real = b.second[0].data<float>();
    for (size_t e = 0; e < predicted.size(); ++e)
      EXPECT_NEAR(predicted[e], real[e], 1e-6) << "mini-batch " << i << " element " << e;
  }
  // Without prediction the forward would read W_{i−1}, one whole step (0.01 per element) away.
  const StageReport s0 = p.report().stages[0];
  EXPECT_EQ(s0.predictions, 7);                      // mini-batches 1..7 (mini-batch 0 has s = 0)
  EXPECT_LT(s0.prediction_error, 1.0 / 7.0 + 1e-3);  // mini-batch 1 scores 1, the others ~0
}

// 2bw --predict (SpecTrain on PipeDream-2BW): with a constant gradient Adam moves every weight by
// lr·sign(g) per update (bias-corrected m̂/√v̂ = sign g), so W_t = W_0 − t·lr·sign(g). Each forward of
// mini-batch i on stage 0 reads Ŵ aimed at W_i, the version its mini-batch's update applies to; plain 2bw
// reads W_(i−1) for some micro-batches (one update stale). Mini-batches 0 and 1 may run before the first
// update gives Adam a state to predict from.
TEST(PipelineTrainer, TwoBWWithPredictionReadsTheVersionItsUpdateAppliesTo) {
  Tensor x(DType::Float32, {2, 4});
  const float xs[] = {1.0f, -2.0f, 0.5f, 3.0f, 0.5f, 1.0f, -1.5f, 2.0f};
  std::copy(std::begin(xs), std::end(xs), x.data<float>().begin());
  const Batches batches(8, {x, Tensor(DType::Int64, {2})});
  const float w0[] = {0.5f, -1.0f, 2.0f, 0.25f}, sign[] = {-1.0f, 1.0f, 1.0f, -1.0f};  // -sign(Σ rows of x)
  const double lr = 0.01;
  for (bool predict : {true, false}) {
    PipelineOptions o;
    o.trainer.loss = parse_loss_spec("output:total");
    o.trainer.optimizer.kind = OptimizerKind::adam;
    o.trainer.schedule.base_lr = lr;
    o.strategy = PipelineStrategy::two_bw;
    o.micro_batches = 2;
    o.predict = predict;
    o.stages = 2;
    o.stage_starts = {0, 1};
    std::mutex mutex;
    double worst = 0;
    int64_t checked = 0;
    o.observer = [&](const PassObservation& p) {
      if (p.stage != 0 || p.backward || p.mini_batch < 2) return;
      const auto w = (*p.weights)[0].data<float>();
      std::lock_guard<std::mutex> lock(mutex);
      for (size_t e = 0; e < 4; ++e)
        worst = std::max(worst, std::abs(w[e] - (w0[e] + sign[e] * lr * static_cast<double>(p.mini_batch))));
      ++checked;
    };
    PipelineTrainer p(constant_gradient_graph(), o);
    p.train(batches);
    EXPECT_EQ(checked, 12) << "6 mini-batches x 2 micro-batches";
    if (predict) {
      EXPECT_LT(worst, 1e-5) << "a forward read other weights than W_i";
    } else {
      EXPECT_GT(worst, 0.5 * lr) << "plain 2bw should read W_(i-1) in some forwards";
    }
  }
}

// The same at the policy level, two updates ahead: Ŵ = W − 2·d lands on W after two constant-gradient Adam
// steps; the master weights are untouched by the prediction.
TEST(WeightPolicy, SpecTrainPredictsTwoConstantGradientStepsAhead) {
  Tensor w(DType::Float32, {4});
  const std::vector<float> initial = {0.5f, -1.0f, 2.0f, 0.25f};
  std::copy(initial.begin(), initial.end(), w.data<float>().begin());
  WeightPolicy policy(PipelineStrategy::spectrain, false, {{"w", w}},
                      Optimizer({.kind = OptimizerKind::adam}, {.base_lr = 0.01}));
  const std::vector<float> g = {0.3f, -2.0f, 0.01f, 1.0f};
  const std::vector<const float*> grads = {g.data()};
  policy.step(grads);
  const std::vector<float> before = policy.master();
  EXPECT_EQ(policy.before_forward({.mini_batch = 3, .s = 2}), 3);
  const std::vector<float> predicted(w.data<float>().begin(), w.data<float>().end());
  EXPECT_EQ(before, policy.master()) << "prediction moved W";
  policy.step(grads);
  policy.step(grads);
  for (size_t e = 0; e < predicted.size(); ++e) {
    EXPECT_NEAR(predicted[e], policy.master()[e], 1e-6) << e;
    EXPECT_GT(std::abs(before[e] - policy.master()[e]), 0.019) << e;  // two steps of lr 0.01 per element
  }
  EXPECT_EQ(policy.statistics().predictions, 1);
  EXPECT_LT(policy.statistics().prediction_error, 1e-4);
}

// The policy writes the working weights only when the version a pass reads changes: naive once per
// update (in the update itself; the passes in between read the same W), spectrain every predicted pass.
TEST(WeightPolicy, CountsWritesOfTheWorkingWeights) {
  const std::vector<float> g = {0.5f, -0.5f};
  const std::vector<const float*> grads = {g.data()};
  Tensor w(DType::Float32, {2});
  WeightPolicy naive(PipelineStrategy::naive, false, {{"w", w}}, Optimizer({}, {.base_lr = 0.1}));
  const int64_t start = naive.working_writes();
  naive.before_forward({.mini_batch = 0});
  naive.before_backward({.mini_batch = 0});
  EXPECT_EQ(naive.working_writes(), start) << "W unchanged since the working weights were made from it";
  naive.step(grads);
  // In host memory the update wrote them (ParamSlot::mirror): the next pass copies nothing.
  EXPECT_EQ(naive.working_writes(), start + 1);
  EXPECT_EQ(w.data<float>()[0], naive.master()[0]);
  naive.before_forward({.mini_batch = 1});
  naive.before_backward({.mini_batch = 1});
  EXPECT_EQ(naive.working_writes(), start + 1);
  EXPECT_EQ(w.data<float>()[0], naive.master()[0]);

  Tensor v(DType::Float32, {2});
  WeightPolicy spectrain(PipelineStrategy::spectrain, false, {{"v", v}}, Optimizer({}, {.base_lr = 0.1}));
  spectrain.step(grads);
  const int64_t before = spectrain.working_writes();
  spectrain.before_forward({.mini_batch = 2, .s = 1});
  spectrain.before_forward({.mini_batch = 3, .s = 1});
  EXPECT_EQ(spectrain.working_writes(), before + 2);
}

}  // namespace
}  // namespace onnxtrain
