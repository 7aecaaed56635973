// Outputs summed over runs in the caller's buffers (InferenceSession::run_into, finish_sums): a pipeline
// stage's weight gradients summed over the micro-batches of a mini-batch. Checked on a one-ConvGrad graph
// for every way the oneDNN kernels compute dW: the single-pixel products (which keep the sum of the taps in
// a buffer of their own until finish_sums), their 1x1 and depthwise cases, the tap products (whose transpose
// back adds; on a tap-major weight, TapMajorConvGrad, the products add, or are deferred to the sum's end), and
// oneDNN's direct convolution (which does not sum: the session adds a fresh output). A Gemm's weight gradient
// sums or defers too. After a write and two adds the buffers hold the sum of three plain runs,
// dB included (the session's sum for all of them); a graph output that a later node reads is summed by the session even
// where the kernel could; misfit buffers and names are errors; a new write starts the sums anew.
#include <gtest/gtest.h>

#include <functional>
#include <numeric>
#include <random>

#include "executor/inference_session.h"
#include "graph/error.h"
#include "kernels/onednn/deferred_products.h"
#include "tests/error_of.h"
#include "tests/graph_builder.h"
#include "tests/onednn_conv_oracle.h"

namespace onnxtrain {
namespace {

using testing_support::add_input;
using testing_support::error_of;
using testing_support::Ints;
using testing_support::random_tensor;

struct SumCase {
  std::string label;
  Attributes attributes;
  Ints x, w, y;
  bool kernel_sums;                  // the kernel the path takes sums dW itself (Kernel::sums_output)
  std::string op_type = "ConvGrad";  // or TapMajorConvGrad, whose w is Wt (k..., C, M)

  int64_t out_channels() const { return op_type == "ConvGrad" ? w.front() : w.back(); }
};

const std::vector<SumCase>& cases() {
  static const std::vector<SumCase> all = {
      {"single pixel: 3x3 pads 1 over 1x1",
       {{"pads", Ints{1, 1, 1, 1}}},
       {4, 12, 1, 1},
       {10, 12, 3, 3},
       {4, 10, 1, 1},
       true},
      {"single pixel: 1x1 over 1x1 (W is the matrix)", {}, {4, 12, 1, 1}, {10, 12, 1, 1}, {4, 10, 1, 1}, true},
      {"depthwise single pixel",
       {{"pads", Ints{1, 1, 1, 1}}, {"group", int64_t{8}}},
       {4, 8, 1, 1},
       {8, 1, 3, 3},
       {4, 8, 1, 1},
       true},
      {"tap products: 3x3 pads 1 over 2x2",
       {{"pads", Ints{1, 1, 1, 1}}},
       {4, 12, 2, 2},
       {10, 12, 3, 3},
       {4, 10, 2, 2},
       true},
      {"tap products on a tap-major weight (adding in the products)",
       {{"pads", Ints{1, 1, 1, 1}}},
       {4, 12, 2, 2},
       {3, 3, 12, 10},
       {4, 10, 2, 2},
       true,
       "TapMajorConvGrad"},
      {"direct: 3x3 pads 1 over 6x6", {{"pads", Ints{1, 1, 1, 1}}}, {2, 6, 6, 6}, {5, 6, 3, 3}, {2, 5, 6, 6}, false},
  };
  return all;
}

// dY, X, W -> ConvGrad -> dX, dW, dB, all graph outputs; with `read_dw`, a Neg of dW is one too.
Graph conv_grad_graph(const SumCase& c, bool read_dw) {
  Graph g;
  const auto input = [&](const std::string& name, const Ints& sizes) { return add_input(g, name, sizes); };
  const auto value = [&](const std::string& name, const Ints& sizes) {
    return g.add_value({.name = name, .dtype = DType::Float32, .shape = Shape::of(sizes)});
  };
  const ValueId dy = input("dY", c.y), x = input("X", c.x), w = input("W", c.w);
  const ValueId dx = value("dX", c.x), dw = value("dW", c.w), db = value("dB", {c.out_channels()});
  g.add_node({.name = "conv_grad",
              .op_type = c.op_type,
              .domain = "ai.onnxtrain",
              .opset = 1,
              .inputs = {dy, x, w},
              .outputs = {dx, dw, db},
              .attributes = c.attributes});
  g.outputs = {dx, dw, db};
  if (read_dw) {
    const ValueId neg = value("neg_dW", c.w);
    g.add_node({.name = "neg", .op_type = "Neg", .opset = 17, .inputs = {dw}, .outputs = {neg}});
    g.outputs.push_back(neg);
  }
  g.sort();
  return g;
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_NEAR(got.data<float>()[i], want.data<float>()[i], 1e-4 + 1e-4 * std::abs(want.data<float>()[i]))
        << what << " element " << i;
}

bool kernel_sums_dw(const SumCase& c) {
  KernelSpec spec{
      .op_type = c.op_type, .domain = "ai.onnxtrain", .opset = 1, .attributes = c.attributes, .node_name = "t"};
  spec.inputs = {{DType::Float32, c.y}, {DType::Float32, c.x}, {DType::Float32, c.w}};
  spec.outputs = {{DType::Float32, c.x}, {DType::Float32, c.w}, {DType::Float32, {c.out_channels()}}};
  return KernelRegistry::builtin()
      .find(spec.domain, spec.op_type, DeviceKind::Cpu, DType::Float32)
      ->prepare(spec)
      ->sums_output(1);
}

// Three runs of `session`: the first writes the buffers, the others add; returns the plain runs' sums.
std::map<std::string, Tensor> sum_three_runs(const Graph& g, InferenceSession& session, const SumCase& c,
                                             std::mt19937& rng, const std::map<std::string, Tensor>& into) {
  InferenceSession plain(g);
  std::map<std::string, Tensor> want;
  for (int run = 0; run < 3; ++run) {
    const std::map<std::string, Tensor> inputs{
        {"dY", random_tensor(rng, c.y)}, {"X", random_tensor(rng, c.x)}, {"W", random_tensor(rng, c.w)}};
    const std::map<std::string, Tensor> returned = session.run_into(inputs, into, /*add=*/run > 0);
    for (const auto& [name, buffer] : into) EXPECT_FALSE(returned.contains(name)) << name;
    for (const auto& [name, value] : plain.run(inputs)) {
      if (!want.contains(name)) {
        want[name] = value.clone();
        continue;
      }
      for (int64_t i = 0; i < value.numel(); ++i) want[name].data<float>()[i] += value.data<float>()[i];
    }
  }
  session.finish_sums();
  return want;
}

// Each case twice: the session summing as it goes, and letting the kernels defer their products.
std::vector<std::pair<SumCase, bool>> with_and_without_deferral(const std::vector<SumCase>& all) {
  std::vector<std::pair<SumCase, bool>> both;
  for (const SumCase& c : all)
    for (const bool defer : {false, true}) both.emplace_back(c, defer);
  return both;
}

TEST(OutputSum, RunIntoSumsWeightGradientsOverRunsOnEveryConvolutionPath) {
  std::mt19937 rng(61);
  for (const auto& [c, defer] : with_and_without_deferral(cases())) {
    SCOPED_TRACE(c.label + (defer ? ", products deferred" : ""));
    EXPECT_EQ(kernel_sums_dw(c), c.kernel_sums);
    const Graph g = conv_grad_graph(c, false);
    InferenceSession session(g);
    session.defer_summed_products(defer);
    std::map<std::string, Tensor> into{{"dW", Tensor(DType::Float32, c.w)},
                                       {"dB", Tensor(DType::Float32, {c.out_channels()})}};
    for (const auto& [name, buffer] : into)  // garbage where a write must replace it
      for (float& v : const_cast<Tensor&>(buffer).data<float>()) v = 1e6f;
    const std::map<std::string, Tensor> want = sum_three_runs(g, session, c, rng, into);
    expect_close(into.at("dW"), want.at("dW"), "dW");
    expect_close(into.at("dB"), want.at("dB"), "dB");

    // A write starts anew: one run and its finish give that run's gradients.
    const std::map<std::string, Tensor> inputs{
        {"dY", random_tensor(rng, c.y)}, {"X", random_tensor(rng, c.x)}, {"W", random_tensor(rng, c.w)}};
    session.run_into(inputs, into, false);
    session.finish_sums();
    InferenceSession plain(g);
    expect_close(into.at("dW"), plain.run(inputs).at("dW"), "dW after a new write");
  }
}

// dY (rows, n), X (rows, k) -> Gemm -> dW (n, k), the graph's output.
Graph weight_gradient_gemm_graph(int64_t rows, int64_t n, int64_t k, const Attributes& attributes) {
  Graph g;
  const auto input = [&](const std::string& name, const Ints& sizes) { return add_input(g, name, sizes); };
  const ValueId dy = input("dY", {rows, n}), x = input("X", {rows, k});
  const ValueId dw = g.add_value({.name = "dW", .dtype = DType::Float32, .shape = Shape::of({n, k})});
  g.add_node(
      {.name = "gemm", .op_type = "Gemm", .opset = 13, .inputs = {dy, x}, .outputs = {dw}, .attributes = attributes});
  g.outputs = {dw};
  g.sort();
  return g;
}

// A Gemm's weight gradient (dY^T · X: transA) sums by a oneDNN sum post-op after the first run, and a
// Gemm with alpha does not sum (the session adds); both give the plain runs' sum.
TEST(OutputSum, RunIntoSumsAGemmsOutput) {
  std::mt19937 rng(64);
  for (const double alpha : {1.0, 0.5}) {
    SCOPED_TRACE("alpha " + std::to_string(alpha));
    const Attributes attributes{{"transA", int64_t{1}}, {"alpha", alpha}};
    KernelSpec spec{.op_type = "Gemm", .opset = 13, .attributes = attributes, .node_name = "t"};
    spec.inputs = {{DType::Float32, {6, 5}}, {DType::Float32, {6, 7}}};
    spec.outputs = {{DType::Float32, {5, 7}}};
    const bool sums =
        KernelRegistry::builtin().find("", "Gemm", DeviceKind::Cpu, DType::Float32)->prepare(spec)->sums_output(0);
    EXPECT_EQ(sums, alpha == 1.0);
    const Graph g = weight_gradient_gemm_graph(6, 5, 7, attributes);
    InferenceSession session(g), plain(g);
    const std::map<std::string, Tensor> into{{"dW", Tensor(DType::Float32, {5, 7})}};
    Tensor want(DType::Float32, {5, 7});
    for (int run = 0; run < 3; ++run) {
      const std::map<std::string, Tensor> inputs{{"dY", random_tensor(rng, {6, 5})}, {"X", random_tensor(rng, {6, 7})}};
      session.run_into(inputs, into, run > 0);
      const Tensor one = plain.run(inputs).at("dW");
      for (int64_t i = 0; i < want.numel(); ++i) want.data<float>()[i] += one.data<float>()[i];
    }
    session.finish_sums();
    expect_close(into.at("dW"), want, "dW");
  }
}

TEST(OutputSum, AnOutputThatANodeReadsIsSummedByTheSession) {
  std::mt19937 rng(62);
  const SumCase& c = cases().front();  // single pixel: the kernel would keep the sum to itself
  const Graph g = conv_grad_graph(c, true);
  InferenceSession session(g);
  std::map<std::string, Tensor> into{{"dW", Tensor(DType::Float32, c.w)}};
  InferenceSession plain(g);
  Tensor want_dw, last_neg;
  for (int run = 0; run < 3; ++run) {
    const std::map<std::string, Tensor> inputs{
        {"dY", random_tensor(rng, c.y)}, {"X", random_tensor(rng, c.x)}, {"W", random_tensor(rng, c.w)}};
    const std::map<std::string, Tensor> out = session.run_into(inputs, into, run > 0);
    const std::map<std::string, Tensor> ref = plain.run(inputs);
    // Neg read this run's dW, not the sum.
    expect_close(out.at("neg_dW"), ref.at("neg_dW"), "neg_dW of run " + std::to_string(run));
    if (run == 0) {
      want_dw = ref.at("dW").clone();
    } else {
      for (int64_t i = 0; i < want_dw.numel(); ++i) want_dw.data<float>()[i] += ref.at("dW").data<float>()[i];
    }
  }
  session.finish_sums();
  expect_close(into.at("dW"), want_dw, "dW");
}

TEST(OutputSum, MisfitBuffersAndNamesAreErrors) {
  const SumCase& c = cases().front();
  const Graph g = conv_grad_graph(c, false);
  InferenceSession session(g);
  std::mt19937 rng(63);
  const std::map<std::string, Tensor> inputs{
      {"dY", random_tensor(rng, c.y)}, {"X", random_tensor(rng, c.x)}, {"W", random_tensor(rng, c.w)}};
  EXPECT_NE(error_of([&] {
              session.run_into(inputs, {{"dW", Tensor(DType::Float32, {3})}}, false);
            }).find("goes into a buffer of 3 elements"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              session.run_into(inputs, {{"X", Tensor(DType::Float32, c.x)}}, false);
            }).find("'X' is not a graph output"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              session.run_into(inputs, {{"dW", Tensor(DType::Int64, c.w)}}, false);
            }).find("only as float32"),
            std::string::npos);
}

// Where the session lets kernels defer (a pipeline stage's backward), a weight gradient far larger than its
// rows is staged run by run and computed once at finish_sums: the buffer is untouched until then, and then
// holds the plain runs' sum, added to its content when the sum began by adding; a new write drops what
// an unfinished sum staged.
TEST(OutputSum, DeferredWeightGradientsAreOneProductWhenTheSumEnds) {
  std::mt19937 rng(65);
  const SumCase& tap_major = cases()[4];
  ASSERT_EQ(tap_major.op_type, "TapMajorConvGrad");
  struct Deferred {
    std::string label;
    Graph graph;
    std::function<std::map<std::string, Tensor>()> inputs;
    Ints dw;
  };
  const std::vector<Deferred> deferred = {
      {"TapMajorConvGrad", conv_grad_graph(tap_major, false),
       [&] {
         return std::map<std::string, Tensor>{{"dY", random_tensor(rng, tap_major.y)},
                                              {"X", random_tensor(rng, tap_major.x)},
                                              {"W", random_tensor(rng, tap_major.w)}};
       },
       tap_major.w},
      {"Gemm dY^T X",
       weight_gradient_gemm_graph(4, 40, 30, {{"transA", int64_t{1}}}),
       [&] {
         return std::map<std::string, Tensor>{{"dY", random_tensor(rng, {4, 40})}, {"X", random_tensor(rng, {4, 30})}};
       },
       {40, 30}},
  };
  for (const Deferred& d : deferred) {
    SCOPED_TRACE(d.label);
    InferenceSession session(d.graph), plain(d.graph);
    session.defer_summed_products(true);
    const Tensor start = random_tensor(rng, d.dw);
    for (const bool begins_adding : {false, true}) {
      SCOPED_TRACE(begins_adding ? "the sum begins by adding" : "the sum begins by writing");
      const std::map<std::string, Tensor> into{{"dW", start.clone()}};
      Tensor want = begins_adding ? start.clone() : Tensor(DType::Float32, d.dw);
      for (int run = 0; run < 3; ++run) {
        const std::map<std::string, Tensor> inputs = d.inputs();
        session.run_into(inputs, into, begins_adding || run > 0);
        expect_close(into.at("dW"), start, "dW before the sum ends, run " + std::to_string(run));
        const Tensor one = plain.run(inputs).at("dW");
        for (int64_t i = 0; i < want.numel(); ++i) want.data<float>()[i] += one.data<float>()[i];
      }
      session.finish_sums();
      expect_close(into.at("dW"), want, "dW");
    }
    // A write without finish_sums, then another: the second alone.
    const std::map<std::string, Tensor> into{{"dW", Tensor(DType::Float32, d.dw)}};
    session.run_into(d.inputs(), into, false);
    const std::map<std::string, Tensor> second = d.inputs();
    session.run_into(second, into, false);
    session.finish_sums();
    expect_close(into.at("dW"), plain.run(second).at("dW"), "dW of a new sum");
  }
}

// A Gemm's weight gradient smaller than the rows that make it is not deferred: written at once.
TEST(OutputSum, ASmallWeightGradientIsNotDeferred) {
  std::mt19937 rng(66);
  const Graph g = weight_gradient_gemm_graph(64, 4, 3, {{"transA", int64_t{1}}});
  InferenceSession session(g), plain(g);
  session.defer_summed_products(true);
  const std::map<std::string, Tensor> into{{"dW", Tensor(DType::Float32, {4, 3})}};
  const std::map<std::string, Tensor> inputs{{"dY", random_tensor(rng, {64, 4})}, {"X", random_tensor(rng, {64, 3})}};
  session.run_into(inputs, into, false);
  expect_close(into.at("dW"), plain.run(inputs).at("dW"), "dW before finish_sums");
}

// Staged runs of unequal row counts pack position by position, as one run of all their rows.
TEST(OutputSum, StagedRowsPackEveryRunsRowsOfAPositionTogether) {
  onednn::StagedRows staged(/*positions=*/2, /*width=*/2);
  float* a = staged.add_run(2);  // position 0: rows a0 a1; position 1: rows a2 a3
  std::iota(a, a + 8, 0.0f);
  float* b = staged.add_run(1);  // position 0: b0; position 1: b1
  std::iota(b, b + 4, 100.0f);
  ASSERT_EQ(staged.rows(), 3);
  const std::vector<float> want = {0, 1, 2, 3, 100, 101, 4, 5, 6, 7, 102, 103};
  EXPECT_EQ(std::vector<float>(staged.packed(), staged.packed() + 12), want);
  staged.clear();  // the next sum's runs only
  float* c = staged.add_run(1);
  std::iota(c, c + 4, 200.0f);
  ASSERT_EQ(staged.rows(), 1);
  EXPECT_EQ(std::vector<float>(staged.packed(), staged.packed() + 4), (std::vector<float>{200, 201, 202, 203}));
}

}  // namespace
}  // namespace onnxtrain
