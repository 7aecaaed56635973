// executor/pipeline/stage_graphs: the per-stage forward and backward graphs of a training graph, run
// one after another (forward 0..N-1, then backward N-1..0, each stage reading only what it receives
// from its neighbour, what it kept from its own forward graph and the data), compute the loss, every
// parameter gradient and the BatchNorm running statistics bit for bit as one InferenceSession over the
// whole training graph does: cnn at every cut for N = 1..4, resnet (training-mode BN, skip connections)
// and the transformer (seeded Dropout, residuals, shape arithmetic crossing stages) at many cuts.
// Plus the relay bookkeeping on a hand-built skip connection, and the errors (tied weights, bad
// stage_starts).
#include "executor/pipeline/stage_graphs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <random>
#include <set>

#include "executor/inference_session.h"
#include "executor/trainer.h"
#include "frontend/importer.h"
#include "frontend/npy.h"
#include "graph/op_schema.h"
#include "tests/error_of.h"
#include "tests/graph_builder.h"

namespace onnxtrain {
namespace {

const std::string kModels = std::string(ONNXTRAIN_SOURCE_DIR) + "/models/";
const std::string kData = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/parity/";

using TensorMap = std::map<std::string, Tensor>;

bool same_bits(const Tensor& a, const Tensor& b) {
  if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
  const size_t bytes = static_cast<size_t>(a.numel()) * dtype_size(a.dtype());
  return bytes == 0 || std::memcmp(a.raw(), b.raw(), bytes) == 0;
}

TensorMap pick(const TensorMap& from, const std::vector<std::string>& names, const std::string& what) {
  TensorMap out;
  for (const std::string& n : names) {
    auto it = from.find(n);
    if (it == from.end()) throw std::runtime_error(what + ": '" + n + "' is missing");
    out[n] = it->second;
  }
  return out;
}

std::set<std::string> as_set(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

// What one pipelined step computed, by name.
struct StepResult {
  float loss = 0;
  TensorMap gradients;      // by parameter name
  TensorMap running_stats;  // by running-stat output name
  int relays = 0;           // values a stage received and sent on unchanged (either direction)
};

// Runs the stages as a pipeline would, one mini-batch: each stage's forward graph gets exactly its
// recv_activations (from the previous stage's sends) and its data inputs; its backward graph exactly its
// kept values (from its own forward outputs), its recv_gradients and its data inputs.
StepResult run_stages(const std::vector<StageGraphs>& stages, const TensorMap& data, uint64_t run_index,
                      const std::string& kernels = "") {
  StepResult r;
  const int n = static_cast<int>(stages.size());
  std::vector<TensorMap> forward_out(n);
  TensorMap message;  // what the previous stage sent
  bool have_loss = false;
  for (int k = 0; k < n; ++k) {
    const StageGraphs& s = stages[k];
    TensorMap feed = pick(message, s.recv_activations, "stage " + std::to_string(k) + " recv_activations");
    EXPECT_EQ(feed.size(), message.size()) << "stage " << k << " receives everything stage " << k - 1 << " sends";
    for (const std::string& d : s.forward_data_inputs) feed[d] = data.at(d);
    InferenceSession session(s.forward, kernels);
    session.set_run_index(run_index);
    forward_out[k] = session.run(feed);
    message = pick(forward_out[k], s.send_activations, "stage " + std::to_string(k) + " send_activations");
    for (const std::string& a : s.send_activations) r.relays += feed.contains(a);
    if (!s.loss.empty()) {
      EXPECT_FALSE(have_loss) << "one stage makes the loss";
      have_loss = true;
      r.loss = forward_out[k].at(s.loss).data<float>()[0];
    }
    for (const auto& [output, state] : s.running_stats) r.running_stats[output] = forward_out[k].at(output);
  }
  EXPECT_TRUE(message.empty()) << "the last stage sends no activations";
  EXPECT_TRUE(have_loss);
  message.clear();
  for (int k = n - 1; k >= 0; --k) {
    const StageGraphs& s = stages[k];
    TensorMap feed = pick(message, s.recv_gradients, "stage " + std::to_string(k) + " recv_gradients");
    EXPECT_EQ(feed.size(), message.size()) << "stage " << k << " receives everything stage " << k + 1 << " sends";
    for (const auto& [name, t] : pick(forward_out[k], s.kept, "stage " + std::to_string(k) + " kept")) feed[name] = t;
    for (const std::string& d : s.backward_data_inputs) feed[d] = data.at(d);
    InferenceSession session(s.backward, kernels);
    session.set_run_index(run_index);
    const TensorMap out = session.run(feed);
    message = pick(out, s.send_gradients, "stage " + std::to_string(k) + " send_gradients");
    for (const std::string& gname : s.send_gradients)
      r.relays += feed.contains(gname) && !as_set(s.kept).contains(gname);
    for (const auto& [param, gradient] : s.parameter_gradients) {
      EXPECT_FALSE(r.gradients.contains(param)) << param << " belongs to one stage";
      r.gradients[param] = out.at(gradient);
    }
  }
  EXPECT_TRUE(message.empty()) << "the first stage sends no gradients";
  return r;
}

// The whole training graph in one session: the oracle.
struct Oracle {
  float loss = 0;
  TensorMap outputs;
};

class StageGraphsModel : public ::testing::Test {
 protected:
  void load(const std::string& name, TrainerOptions o) {
    model_ = name;
    trainer_ = std::make_unique<Trainer>(import_model(kModels + name + "_opset17.onnx").graph, std::move(o));
    data_[trainer_->input_name()] = read_npy(kData + name + "/input.npy");
    data_[trainer_->loss().labels] = read_npy(kData + name + "/labels.npy");
  }
  const TrainingGraph& training() const { return trainer_->training_graph(); }

  Oracle oracle(uint64_t run_index) const {
    InferenceSession whole(training().graph);
    whole.set_run_index(run_index);
    Oracle o;
    o.outputs = whole.run(data_);
    o.loss = o.outputs.at(trainer_->loss().loss).data<float>()[0];
    return o;
  }

  // Splits at `starts`, runs the stages and compares with the oracle bit for bit; returns the relays.
  int check_split(const std::vector<int64_t>& starts, const Oracle& whole, uint64_t run_index) {
    std::string label = "stage_starts {";
    for (int64_t s : starts) label += std::to_string(s) + ",";
    label += "}";
    SCOPED_TRACE(label);
    const std::vector<StageGraphs> stages = split_training_graph(training(), starts);
    EXPECT_EQ(stages.size(), starts.size());
    // Boundaries agree pairwise, in the same order (the comm tag index).
    for (size_t k = 0; k + 1 < stages.size(); ++k) {
      EXPECT_EQ(stages[k].send_activations, stages[k + 1].recv_activations) << "boundary " << k;
      EXPECT_EQ(stages[k + 1].send_gradients, stages[k].recv_gradients) << "boundary " << k;
    }
    EXPECT_TRUE(stages.front().recv_activations.empty());
    EXPECT_TRUE(stages.back().recv_gradients.empty());
    // The stages' parameters are the training graph's buffers (an optimizer step in place is seen by both
    // graphs of the stage and by the Trainer's), and each belongs to one stage.
    std::set<std::string> owned;
    for (const StageGraphs& s : stages) {
      EXPECT_EQ(s.parameters.size(), s.parameter_gradients.size());
      for (const std::string& p : s.parameters) {
        EXPECT_TRUE(owned.insert(p).second) << p << " in two stages";
        const std::byte* master = training().graph.value(*training().graph.find_value(p)).data->raw();
        for (const Graph* graph : {&s.forward, &s.backward}) {
          std::optional<ValueId> v = graph->find_value(p);
          if (v) {
            EXPECT_EQ(graph->value(*v).data->raw(), master) << p;
          }
        }
      }
    }

    const StepResult r = run_stages(stages, data_, run_index);
    EXPECT_EQ(std::memcmp(&r.loss, &whole.loss, sizeof(float)), 0) << "loss " << r.loss << " vs " << whole.loss;
    const Graph& g = training().graph;
    size_t parameters = 0;
    for (const TrainingGraph::Gradient& grad : training().gradients) {
      const Value& p = g.value(grad.value);
      if (!p.data) continue;
      ++parameters;
      auto it = r.gradients.find(p.name);
      if (it == r.gradients.end()) {
        ADD_FAILURE() << "no stage outputs the gradient of " << p.name;
        continue;
      }
      EXPECT_TRUE(same_bits(it->second, whole.outputs.at(g.value(grad.gradient).name))) << "gradient of " << p.name;
    }
    EXPECT_EQ(r.gradients.size(), parameters);
    EXPECT_EQ(static_cast<int>(r.running_stats.size()), trainer_->running_statistics_count());
    for (const auto& [name, t] : r.running_stats) EXPECT_TRUE(same_bits(t, whole.outputs.at(name))) << name;
    return r.relays;
  }

  // Every single cut (N = 2), and for N = 1, 3, 4 evenly spaced cuts and random ones (fixed seed).
  int check_many_splits(const Oracle& whole, uint64_t run_index, int random_per_n) {
    const auto forward = static_cast<int64_t>(training().forward_node_count);
    std::mt19937_64 rng(1234);
    int relays = 0, splits = 0;
    for (int64_t cut = 1; cut < forward; ++cut, ++splits) relays += check_split({0, cut}, whole, run_index);
    for (int64_t n : {1, 3, 4}) {
      std::vector<int64_t> even;
      for (int64_t k = 0; k < n; ++k) even.push_back(k * forward / n);
      relays += check_split(even, whole, run_index);
      ++splits;
      for (int t = 0; t < random_per_n && n > 1; ++t) {
        std::set<int64_t> cuts{0};
        while (static_cast<int64_t>(cuts.size()) < n) cuts.insert(1 + static_cast<int64_t>(rng() % (forward - 1)));
        relays += check_split({cuts.begin(), cuts.end()}, whole, run_index);
        ++splits;
      }
    }
    std::cout << "[stage_graphs] " << model_ << ": " << splits << " splits of " << forward << " forward nodes, "
              << relays << " relayed values in all\n";
    return relays;
  }

  std::string model_;
  std::unique_ptr<Trainer> trainer_;
  TensorMap data_;
};

TrainerOptions cross_entropy() {
  TrainerOptions o;
  o.loss = parse_loss_spec("cross-entropy");
  return o;
}

TEST_F(StageGraphsModel, CnnEveryCutForOneToFourStages) {
  load("cnn", cross_entropy());
  const Oracle whole = oracle(0);
  const auto forward = static_cast<int64_t>(training().forward_node_count);
  int splits = 0;
  // Every way of choosing N-1 cut positions among 1..forward-1.
  std::function<void(std::vector<int64_t>&, int)> choose = [&](std::vector<int64_t>& starts, int left) {
    if (left == 0) {
      check_split(starts, whole, 0);
      ++splits;
      return;
    }
    for (int64_t c = starts.back() + 1; c < forward; ++c) {
      starts.push_back(c);
      choose(starts, left - 1);
      starts.pop_back();
    }
  };
  for (int n = 1; n <= 4; ++n) {
    std::vector<int64_t> starts{0};
    choose(starts, n - 1);
  }
  const int64_t m = forward - 1;
  EXPECT_EQ(splits, 1 + m + m * (m - 1) / 2 + m * (m - 1) * (m - 2) / 6);
  std::cout << "[stage_graphs] cnn: " << splits << " splits of " << forward << " forward nodes\n";
}

TEST_F(StageGraphsModel, ResnetBatchNormStatisticsAndSkipConnections) {
  load("resnet", cross_entropy());
  ASSERT_GT(trainer_->running_stat_nodes(), 0);
  const Oracle whole = oracle(0);
  const int relays = check_many_splits(whole, 0, 12);
  EXPECT_GT(relays, 0) << "some cut falls inside a residual block, so a skip value is relayed";
}

TEST_F(StageGraphsModel, TransformerDropoutWithTheSameRunIndex) {
  TrainerOptions o = cross_entropy();
  o.seed = 7;
  load("transformer", o);
  const uint64_t run_index = 3;
  const Oracle whole = oracle(run_index);
  // The masks depend on the run index, so the comparison below would see a stage run with another one.
  EXPECT_NE(oracle(run_index + 1).loss, whole.loss);
  const int relays = check_many_splits(whole, run_index, 20);
  EXPECT_GT(relays, 0) << "some cut falls inside a residual branch, so the residual is relayed";
}

// ---- hand-built graphs ----

ValueId add_node(Graph& g, const std::string& op, std::vector<ValueId> inputs, const std::string& out,
                 Attributes attributes = {}) {
  return testing_support::add_inferred_node(g, out + "_node", op, std::move(inputs), out, std::move(attributes));
}

// Distinct, repeatable values in [-0.25, 2).
ValueId add_parameter(Graph& g, const std::string& name, std::vector<int64_t> sizes) {
  Tensor t(DType::Float32, sizes);
  float v = 0.25f;
  for (float& e : t.data<float>()) e = (v += 0.375f) > 2 ? (v -= 2.5f) : v;
  return testing_support::add_parameter(g, name, t);
}

ValueId add_input(Graph& g, const std::string& name, std::vector<int64_t> sizes) {
  ValueId id =
      g.add_value({.name = name, .dtype = DType::Float32, .shape = Shape::of(sizes), .role = ValueRole::Input});
  g.inputs.push_back(id);
  return id;
}

Tensor example_input() {
  Tensor x(DType::Float32, {2, 3});
  const float v[] = {0.5f, -1.25f, 2.0f, -0.75f, 1.5f, -2.5f};
  std::copy(std::begin(v), std::end(v), x.data<float>().begin());
  return x;
}

using testing_support::error_of;

// a = x*w (stage 0), b = relu(a) (1), c = sigmoid(b) (2), d = c + a, loss = sum(d) (3): `a` skips two
// stages, so stage 1 and 2 relay it forward, and its gradient from the Add comes back through stages 2
// and 1 to the Sum in stage 0 that adds Relu's contribution (the Sum belongs to a's maker, Mul).
TEST(StageGraphs, RelaysASkipConnectionBothWays) {
  Graph g;
  ValueId x = add_input(g, "x", {2, 3});
  ValueId w = add_parameter(g, "w", {3});
  ValueId a = add_node(g, "Mul", {x, w}, "a");
  ValueId b = add_node(g, "Relu", {a}, "b");
  ValueId c = add_node(g, "Sigmoid", {b}, "c");
  ValueId d = add_node(g, "Add", {c, a}, "d");
  ValueId loss = add_node(g, "ReduceSum", {d}, "loss", {{"keepdims", int64_t{0}}});
  g.outputs = {loss};
  const TrainingGraph t = build_training_graph(g, {.loss = "loss"});
  ASSERT_EQ(t.forward_node_count, 5u);
  const std::vector<int64_t> starts{0, 1, 2, 3};
  const std::vector<StageGraphs> s = split_training_graph(t, starts);
  ASSERT_EQ(s.size(), 4u);

  EXPECT_EQ(s[0].send_activations, std::vector<std::string>{"a"});
  EXPECT_EQ(as_set(s[1].send_activations), (std::set<std::string>{"a", "b"}));
  EXPECT_EQ(as_set(s[2].send_activations), (std::set<std::string>{"a", "c"}));
  EXPECT_TRUE(s[3].send_activations.empty());
  EXPECT_EQ(s[3].loss, "loss");
  EXPECT_EQ(s[0].data_inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(s[0].parameters, std::vector<std::string>{"w"});
  ASSERT_EQ(s[0].parameter_gradients.size(), 1u);
  EXPECT_EQ(s[0].parameter_gradients[0].second, "w_grad");
  for (int k = 1; k < 4; ++k) EXPECT_TRUE(s[k].parameters.empty()) << k;

  // Stage 2's forward graph passes `a` through: an input that is also an output.
  auto names = [](const Graph& graph, const std::vector<ValueId>& ids) {
    std::set<std::string> out;
    for (ValueId id : ids) out.insert(graph.value(id).name);
    return out;
  };
  EXPECT_TRUE(names(s[2].forward, s[2].forward.inputs).contains("a"));
  EXPECT_TRUE(names(s[2].forward, s[2].forward.outputs).contains("a"));
  // Backward: stage 2 relays the Add's contribution to a's gradient (received and sent on), stage 1 sends
  // it together with Relu's contribution, and stage 0 sums them.
  const std::set<std::string> relayed_back = as_set(s[2].recv_gradients);
  int passed_on = 0;
  for (const std::string& name : s[2].send_gradients) passed_on += relayed_back.contains(name);
  EXPECT_EQ(passed_on, 1);
  EXPECT_EQ(s[1].send_gradients.size(), 2u);
  int sums = 0;
  for (NodeId n : s[0].backward.order()) sums += s[0].backward.node(n).op_type == "Sum";
  EXPECT_EQ(sums, 1);

  // And the numbers: the pipeline equals the whole graph, bit for bit.
  const TensorMap data{{"x", example_input()}};
  const TensorMap whole = InferenceSession(t.graph).run(data);
  const StepResult r = run_stages(s, data, 0);
  EXPECT_EQ(r.loss, whole.at("loss").data<float>()[0]);
  ASSERT_TRUE(r.gradients.contains("w"));
  EXPECT_TRUE(same_bits(r.gradients.at("w"), whole.at("w_grad")));
  EXPECT_EQ(r.relays, 4) << "a through stages 1 and 2 forward; the Add's contribution through stages 2 and 1 back";
}

// y = relu(x W) W: W is read by the first and the last MatMul.
TrainingGraph tied_weights() {
  Graph g;
  ValueId x = add_input(g, "x", {2, 3});
  ValueId w = add_parameter(g, "W", {3, 3});
  ValueId h = add_node(g, "MatMul", {x, w}, "h");
  ValueId r = add_node(g, "Relu", {h}, "r");
  ValueId y = add_node(g, "MatMul", {r, w}, "y");
  ValueId loss = add_node(g, "ReduceSum", {y}, "loss", {{"keepdims", int64_t{0}}});
  g.outputs = {loss};
  return build_training_graph(g, {.loss = "loss"});
}

TEST(StageGraphs, RefusesTiedWeightsAcrossStages) {
  const TrainingGraph t = tied_weights();
  const std::vector<int64_t> across{0, 2};  // MatMul, Relu | MatMul, ReduceSum
  const std::string e = error_of([&] { split_training_graph(t, across); });
  EXPECT_NE(e.find("'W'"), std::string::npos) << e;
  EXPECT_NE(e.find("tied"), std::string::npos) << e;
  EXPECT_NE(e.find("stages 0, 1"), std::string::npos) << e;

  // Both readers in one stage: fine, and the pipeline still equals the whole graph.
  const std::vector<int64_t> together{0, 3};
  const std::vector<StageGraphs> s = split_training_graph(t, together);
  EXPECT_EQ(s[0].parameters, std::vector<std::string>{"W"});
  const TensorMap data{{"x", example_input()}};
  const TensorMap whole = InferenceSession(t.graph).run(data);
  const StepResult r = run_stages(s, data, 0);
  EXPECT_TRUE(same_bits(r.gradients.at("W"), whole.at("W_grad")));
}

TEST(StageGraphs, RefusesBadStageStarts) {
  const TrainingGraph t = tied_weights();  // 4 forward nodes
  auto error = [&](std::vector<int64_t> starts) { return error_of([&] { split_training_graph(t, starts); }); };
  EXPECT_NE(error({}).find("empty"), std::string::npos) << error({});
  EXPECT_NE(error({1, 2}).find("must begin with 0"), std::string::npos) << error({1, 2});
  EXPECT_NE(error({0, 0}).find("strictly increasing"), std::string::npos) << error({0, 0});
  EXPECT_NE(error({0, 3, 2}).find("strictly increasing"), std::string::npos) << error({0, 3, 2});
  EXPECT_NE(error({0, 4}).find("4 forward nodes"), std::string::npos) << error({0, 4});
  EXPECT_NE(error({0, 9}).find("would be empty"), std::string::npos) << error({0, 9});
}

}  // namespace
}  // namespace onnxtrain
