// Runs every case of the op-test harness (tests/gradient_harness.h): finite-difference gradient checks
// in float64, fast CPU kernels and CUDA kernels (on cuda:0; skipped when no GPU is visible) against the
// reference in float32, and the coverage rules that make an op without a case or a CUDA kernel fail.
#include "tests/gradient_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "executor/inference_session.h"
#include "graph/autodiff/gradient_rule.h"
#include "graph/autodiff/training_graph.h"
#include "graph/op_schema.h"
#include "kernels/cuda/cuda_runtime.h"
#include "kernels/cuda/device_query.h"
#include "kernels/kernel.h"

namespace onnxtrain::harness {

// gtest prints a case by its label (found by argument-dependent lookup, so outside the anonymous namespace).
void PrintTo(const GradientCase& c, std::ostream* os) { *os << c.label; }

namespace {

// Ops with no gradient rule, and why. Every other op of the default domain must have one.
const std::map<std::string, std::string> kNonDifferentiableOps = {
    {"Shape", "an int64 shape"},
    {"Size", "an int64 count"},
    {"Constant", "no inputs"},
    {"ConstantOfShape", "its input is a shape"},
    {"Range", "indices; exporters feed it int64"},
    {"ArgMax", "int64 indices"},
    {"ArgMin", "int64 indices"},
    {"Equal", "bool output"},
    {"Less", "bool output"},
    {"LessOrEqual", "bool output"},
    {"Greater", "bool output"},
    {"GreaterOrEqual", "bool output"},
    {"Not", "bool"},
    {"And", "bool"},
    {"Or", "bool"},
    {"Xor", "bool"},
    {"IsNaN", "bool output"},
};

std::vector<GradientCase> all_cases() {
  std::vector<GradientCase> cases;
  for (auto family : {elementwise_gradient_cases, data_movement_gradient_cases, conv_matmul_gradient_cases,
                      pooling_softmax_gradient_cases, normalisation_gradient_cases, reduction_loss_gradient_cases,
                      recurrent_gradient_cases}) {
    for (GradientCase& c : family()) cases.push_back(std::move(c));
  }
  return cases;
}

const std::vector<GradientCase>& cases() {
  static const std::vector<GradientCase> all = all_cases();
  return all;
}

bool is_float_input(const HarnessInput& in) {
  return in.fill != HarnessInput::Fill::Omitted && (in.fill != HarnessInput::Fill::Values || is_floating(in.dtype));
}

// The doubles of one input, drawn from a generator seeded by the case label (same for both dtypes).
std::vector<double> draw(const HarnessInput& in, std::mt19937_64& rng) {
  const int64_t n = std::accumulate(in.sizes.begin(), in.sizes.end(), int64_t{1}, std::multiplies<>());
  std::vector<double> v(static_cast<size_t>(n));
  std::normal_distribution<double> gauss(0.0, 1.0);
  std::uniform_real_distribution<double> uniform(0.5, 2.0);
  switch (in.fill) {
    case HarnessInput::Fill::Normal:
      for (double& x : v) x = gauss(rng);
      break;
    case HarnessInput::Fill::Positive:
      for (double& x : v) x = uniform(rng);
      break;
    case HarnessInput::Fill::AwayFromZero:
      for (double& x : v) {
        const double g = gauss(rng);
        x = (g < 0 ? -1 : 1) * (0.2 + std::abs(g));
      }
      break;
    case HarnessInput::Fill::Distinct:
      for (int64_t i = 0; i < n; ++i) v[i] = 0.1 * static_cast<double>(i - n / 2);
      std::shuffle(v.begin(), v.end(), rng);
      break;
    case HarnessInput::Fill::Values:
      v = in.values;
      break;
    case HarnessInput::Fill::Omitted:
      break;
  }
  return v;
}

Tensor make_tensor(DType dtype, const std::vector<int64_t>& sizes, const std::vector<double>& v) {
  Tensor t(dtype, sizes);
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dtype) {
      case DType::Float64:
        t.data<double>()[i] = v[i];
        break;
      case DType::Float32:
        t.data<float>()[i] = static_cast<float>(v[i]);
        break;
      case DType::Int64:
        t.data<int64_t>()[i] = static_cast<int64_t>(v[i]);
        break;
      case DType::Int32:
        t.data<int32_t>()[i] = static_cast<int32_t>(v[i]);
        break;
      case DType::Bool:
        t.data<bool>()[i] = v[i] != 0;
        break;
      default:
        ADD_FAILURE() << "harness values of dtype " << dtype_name(dtype) << " are not supported";
    }
  }
  return t;
}

// One case as a graph in `dtype`: differentiated inputs are graph inputs "x<i>", the rest constants.
struct CaseGraph {
  Graph graph;
  std::map<std::string, Tensor> feeds;
  std::vector<std::string> wrt;
};

CaseGraph build_case(const GradientCase& c, DType dtype) {
  CaseGraph out;
  Graph& g = out.graph;
  g.info.opsets[""] = c.domain.empty() ? c.opset : 17;
  if (!c.domain.empty()) g.info.opsets[c.domain] = c.opset;
  std::mt19937_64 rng(std::hash<std::string>{}(c.label));
  Node node{.name = "op", .op_type = c.op_type, .domain = c.domain, .opset = c.opset, .attributes = c.attributes};
  for (size_t i = 0; i < c.inputs.size(); ++i) {
    const HarnessInput& in = c.inputs[i];
    if (in.fill == HarnessInput::Fill::Omitted) {
      node.inputs.emplace_back();
      continue;
    }
    const bool is_float = is_float_input(in);
    const DType t = is_float ? dtype : in.dtype;
    Tensor data = make_tensor(t, in.sizes, draw(in, rng));
    const std::string name = "x" + std::to_string(i);
    Value v{.name = name, .dtype = t, .shape = Shape::of(in.sizes)};
    ValueId id;
    if (is_float && in.differentiate) {
      v.role = ValueRole::Input;
      id = g.add_value(v);
      g.inputs.push_back(id);
      out.feeds[name] = data;
      out.wrt.push_back(name);
    } else {
      v.role = ValueRole::Constant;
      if (!is_float && data.rank() <= 1 && data.numel() <= 64 && t != DType::Bool) {
        std::vector<Dim> known;
        for (int64_t x : data.to_int64()) known.emplace_back(x);
        v.known = known;
      }
      v.data = data;
      id = g.add_value(v);
      g.initializers.push_back(id);
    }
    node.inputs.push_back(id);
  }
  for (int o = 0; o < c.outputs; ++o) node.outputs.push_back(g.add_value({.name = "y" + std::to_string(o)}));
  const std::vector<ValueId> ys = node.outputs;
  NodeId op = g.add_node(node);
  const OpSchema* schema = OpRegistry::builtin().find(c.domain, c.op_type);
  if (!schema) throw std::runtime_error("no schema for " + c.op_type);
  infer_node(g, op, *schema);

  auto add = [&](const std::string& op_type, std::vector<ValueId> inputs, Attributes attributes = {}) {
    ValueId y = g.add_value({.name = "loss_" + std::to_string(g.value_count())});
    NodeId n = g.add_node({.name = "loss_node_" + std::to_string(g.value_count()),
                           .op_type = op_type,
                           .opset = 17,
                           .inputs = std::move(inputs),
                           .outputs = {y},
                           .attributes = std::move(attributes)});
    infer_node(g, n, *OpRegistry::builtin().find("", op_type));
    return y;
  };
  std::vector<ValueId> terms;
  for (int o = 0; o < c.outputs; ++o) {
    const bool in_loss = c.loss_outputs.empty() ? is_floating(g.value(ys[o]).dtype)
                                                : std::count(c.loss_outputs.begin(), c.loss_outputs.end(), o) > 0;
    g.outputs.push_back(ys[o]);
    if (!in_loss) continue;
    const std::vector<int64_t> sizes = g.value(ys[o]).shape.static_sizes();
    HarnessInput weight = normal(sizes);
    ValueId r = g.add_value({.name = "r" + std::to_string(o),
                             .dtype = dtype,
                             .shape = Shape::of(sizes),
                             .role = ValueRole::Constant,
                             .data = make_tensor(dtype, sizes, draw(weight, rng))});
    g.initializers.push_back(r);
    ValueId y = ys[o];  // a Cast to another float type is cast back to the case's dtype for the loss
    if (g.value(y).dtype != dtype) y = add("Cast", {y}, {{"to", int64_t{dtype == DType::Float64 ? 11 : 1}}});
    terms.push_back(add("ReduceSum", {add("Mul", {y, r})}, {{"keepdims", int64_t{0}}}));
  }
  ValueId loss = terms.size() == 1 ? terms[0] : add("Sum", terms);
  g.value(loss).name = "loss";
  g.outputs.push_back(loss);
  return out;
}

double scalar_of(const Tensor& t) { return t.to_double().at(0); }

std::string test_name(const GradientCase& c) {
  std::string name;
  for (char ch : c.label) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return name;
}

class GradientHarness : public ::testing::TestWithParam<GradientCase> {};

// Float64, reference kernels: analytic gradients against central differences of the loss.
TEST_P(GradientHarness, MatchesFiniteDifferences) {
  const GradientCase& c = GetParam();
  CaseGraph cg = build_case(c, DType::Float64);
  TrainingGraph tg = build_training_graph(cg.graph, {.loss = "loss", .wrt = cg.wrt});
  EXPECT_TRUE(tg.unreachable.empty()) << "inputs the loss does not depend on: " << tg.unreachable.size();
  std::map<std::string, Tensor> analytic = InferenceSession(tg.graph, "reference").run(cg.feeds);

  auto loss_at = [&](const std::map<std::string, Tensor>& feeds) {
    return scalar_of(InferenceSession(cg.graph, "reference").run(feeds).at("loss"));
  };
  std::mt19937_64 pick(7);
  for (const TrainingGraph::Gradient& gr : tg.gradients) {
    const std::string x_name = tg.graph.value(gr.value).name;
    const Tensor& grad = analytic.at(tg.graph.value(gr.gradient).name);
    const Tensor& x = cg.feeds.at(x_name);
    ASSERT_EQ(grad.sizes(), x.sizes()) << x_name;
    std::vector<int64_t> elements(static_cast<size_t>(x.numel()));
    std::iota(elements.begin(), elements.end(), 0);
    std::shuffle(elements.begin(), elements.end(), pick);
    if (elements.size() > 40) elements.resize(40);  // a sample keeps big inputs fast
    double diff2 = 0, a2 = 0, n2 = 0;
    for (int64_t e : elements) {
      const double h = 1e-6;
      std::map<std::string, Tensor> feeds = cg.feeds;
      Tensor shifted = x.clone();
      feeds[x_name] = shifted;
      const double x0 = shifted.data<double>()[e];
      shifted.data<double>()[e] = x0 + h;
      const double up = loss_at(feeds);
      shifted.data<double>()[e] = x0 - h;
      const double down = loss_at(feeds);
      const double numeric = (up - down) / (2 * h);
      const double a = grad.data<double>()[e];
      diff2 += (a - numeric) * (a - numeric);
      a2 += a * a;
      n2 += numeric * numeric;
    }
    const double rel = std::sqrt(diff2) / std::max({std::sqrt(a2), std::sqrt(n2), 1e-6});
    EXPECT_LT(rel, 1e-4) << c.label << ": gradient of " << x_name << " (" << elements.size()
                         << " elements checked), |analytic| " << std::sqrt(a2) << ", |numeric| " << std::sqrt(n2);
  }
}

// Every output of `actual` equals `expected` (integers exactly, floats within 1e-4 of the largest value).
void expect_matches_reference(const std::string& label, const std::map<std::string, Tensor>& expected,
                              const std::map<std::string, Tensor>& actual) {
  for (const auto& [name, ref] : expected) {
    const Tensor& got = actual.at(name);
    ASSERT_EQ(got.sizes(), ref.sizes()) << name;
    if (!is_floating(ref.dtype())) {
      EXPECT_EQ(got.to_int64(), ref.to_int64()) << name;
      continue;
    }
    const std::vector<double> r = ref.to_double(), a = got.to_double();
    double scale = 1.0;
    for (double v : r) scale = std::max(scale, std::abs(v));
    for (size_t i = 0; i < r.size(); ++i) {
      ASSERT_NEAR(a[i], r[i], 1e-4 * scale) << label << ": output " << name << " element " << i;
    }
  }
}

// Float32: `device`'s fastest kernels against the reference, forward and backward. Each session runs twice
// and the second run is compared: it reuses the first run's buffers, so a kernel that leaves part of an
// output unwritten, or keeps state between runs, shows up.
void expect_kernels_match_reference(const GradientCase& c, Device device) {
  CaseGraph cg = build_case(c, DType::Float32);
  TrainingGraph tg = build_training_graph(cg.graph, {.loss = "loss", .wrt = cg.wrt});
  InferenceSession reference(tg.graph, "reference"), fast(tg.graph, "", device);
  reference.run(cg.feeds);
  fast.run(cg.feeds);
  expect_matches_reference(c.label, reference.run(cg.feeds), fast.run(cg.feeds));
}

TEST_P(GradientHarness, FastKernelsMatchReference) { expect_kernels_match_reference(GetParam(), Device::cpu()); }

INSTANTIATE_TEST_SUITE_P(Ops, GradientHarness, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<GradientCase>& info) { return test_name(info.param); });

// onnxtrain's ops that only the CPU runs: training holds a weight tap-major for the CPU's tap-product
// convolution alone (graph/autodiff/tap_major_conv_weights.h), and fuses MatMul with its transposes and bias
// for the CPU's kernels (graph/autodiff/fused_matmul.h); Trainer keeps the model's layout and nodes, Conv and
// MatMul, on a GPU.
const std::set<std::string> kCpuOnlyOps = {"TapMajorConv", "TapMajorConvGrad", "FusedMatMul"};

std::vector<GradientCase> cuda_cases() {
  std::vector<GradientCase> on_gpus;
  for (const GradientCase& c : cases())
    if (!kCpuOnlyOps.count(c.op_type)) on_gpus.push_back(c);
  return on_gpus;
}

class CudaGradientHarness : public ::testing::TestWithParam<GradientCase> {};

TEST_P(CudaGradientHarness, CudaKernelsMatchReference) {
  if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible: " << cuda::query_devices().unavailable_reason;
  expect_kernels_match_reference(GetParam(), Device::cuda(0));
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaGradientHarness, ::testing::ValuesIn(cuda_cases()),
                         [](const ::testing::TestParamInfo<GradientCase>& info) { return test_name(info.param); });

// --- coverage: what makes adding an op without a harness case fail ---

struct Exercised {
  std::set<std::pair<std::string, std::string>> ops;  // every (domain, op) in some case's training graph
};

const Exercised& exercised() {
  static const Exercised result = [] {
    Exercised e;
    for (const GradientCase& c : cases()) {
      CaseGraph cg = build_case(c, DType::Float32);
      TrainingGraph tg = build_training_graph(cg.graph, {.loss = "loss", .wrt = cg.wrt});
      for (NodeId n : tg.graph.order()) e.ops.insert({tg.graph.node(n).domain, tg.graph.node(n).op_type});
    }
    return e;
  }();
  return result;
}

TEST(GradientCoverage, CaseLabelsAreUnique) {
  std::set<std::string> names;
  for (const GradientCase& c : cases()) EXPECT_TRUE(names.insert(test_name(c)).second) << c.label;
}

TEST(GradientCoverage, EveryGradientRuleHasACase) {
  for (const auto& [domain, op] : GradientRegistry::builtin().ops()) {
    const bool covered = std::any_of(cases().begin(), cases().end(),
                                     [&](const GradientCase& c) { return c.domain == domain && c.op_type == op; });
    EXPECT_TRUE(covered) << op << " has a gradient rule but no case in tests/gradient_cases/";
  }
}

TEST(GradientCoverage, EveryOpHasAGradientRuleOrSaysWhyNot) {
  for (const OpSchema* schema : OpRegistry::builtin().all()) {
    if (schema->domain != "") continue;
    const bool has_rule = GradientRegistry::builtin().find("", schema->op_type) != nullptr;
    const bool excused = kNonDifferentiableOps.count(schema->op_type) > 0;
    EXPECT_TRUE(has_rule || excused) << schema->op_type << " has no gradient rule and is not in kNonDifferentiableOps";
    EXPECT_FALSE(has_rule && excused) << schema->op_type << " has a rule but is listed as non-differentiable";
  }
}

TEST(GradientCoverage, EveryBackwardOpIsExercised) {
  for (const OpSchema* schema : OpRegistry::builtin().all()) {
    if (schema->domain != kTrainingDomain) continue;
    EXPECT_TRUE(exercised().ops.count({schema->domain, schema->op_type}))
        << schema->op_type << " (" << kTrainingDomain << ") appears in no harness case's training graph";
  }
}

TEST(GradientCoverage, EveryFastKernelIsComparedWithTheReference) {
  for (const KernelEntry* entry : KernelRegistry::builtin().all()) {
    if (entry->implementation == "reference" || entry->device != DeviceKind::Cpu) continue;
    // Ops without a gradient never appear in a training graph; onnx_conformance_test and the
    // cpu_*_test files compare their fast kernels with the reference instead.
    if (entry->domain.empty() && kNonDifferentiableOps.count(entry->op_type)) continue;
    EXPECT_TRUE(exercised().ops.count({entry->domain, entry->op_type}))
        << entry->implementation << " kernel of " << entry->op_type << " is compared in no harness case";
  }
}

// The CUDA backend has a kernel for every op the CPU runs (at float32 where the CPU takes float32), so a
// model that trains on the CPU is never refused on a GPU for a missing kernel.
TEST(GradientCoverage, EveryCpuOpHasACudaKernel) {
  if (!cuda::query_devices().compiled) GTEST_SKIP() << "CUDA support not compiled in: no CUDA kernels to count";
  const KernelRegistry& registry = KernelRegistry::builtin();
  for (const KernelEntry* entry : registry.all()) {
    if (entry->device != DeviceKind::Cpu || entry->implementation != "reference") continue;
    if (entry->domain == kTrainingDomain && kCpuOnlyOps.count(entry->op_type)) continue;
    const bool takes_float =
        std::find(entry->dtypes.begin(), entry->dtypes.end(), DType::Float32) != entry->dtypes.end();
    const DType dtype = takes_float ? DType::Float32 : entry->dtypes.front();
    EXPECT_NE(registry.find(entry->domain, entry->op_type, DeviceKind::Cuda, dtype), nullptr)
        << (entry->domain.empty() ? "" : entry->domain + ".") << entry->op_type << " (" << dtype_name(dtype)
        << ") has a CPU kernel but no CUDA kernel";
  }
}

}  // namespace
}  // namespace onnxtrain::harness
