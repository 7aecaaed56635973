// The Gemm kernel for a micro-batch of at most 8 rows against a weight (kernels/cpu/skinny_gemm.h), which
// the registry's float32 Gemm runs for the forward and dX: against the reference kernel on seeded random
// shapes of both forms (tails of every width), its sum over runs, and the same bits on 1 and 2 threads.
#include "kernels/cpu/skinny_gemm.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>

#include "executor/inference_session.h"
#include "kernels/kernel.h"
#include "kernels/onednn/onednn_common.h"

using namespace onnxtrain;

namespace {

using Ints = std::vector<int64_t>;

Tensor random_tensor(const Ints& sizes, std::mt19937& rng) {
  Tensor t(DType::Float32, sizes);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : t.data<float>()) v = dist(rng);
  return t;
}

struct Case {
  Attributes attributes;
  std::vector<Tensor> inputs;
  Ints out;
};

KernelSpec spec_of(const Case& c) {
  KernelSpec spec{.op_type = "Gemm", .opset = 13, .attributes = c.attributes, .node_name = "skinny"};
  for (const Tensor& t : c.inputs) spec.inputs.push_back({DType::Float32, t.sizes()});
  spec.outputs.push_back({DType::Float32, c.out});
  return spec;
}

std::unique_ptr<Kernel> prepare(const Case& c, const std::string& implementation) {
  const KernelEntry* entry =
      KernelRegistry::builtin().find("", "Gemm", DeviceKind::Cpu, DType::Float32, implementation);
  return entry->prepare(spec_of(c));
}

Tensor run(Kernel& kernel, const Case& c) {
  Tensor out(DType::Float32, c.out);
  std::vector<TensorView> in;
  for (const Tensor& t : c.inputs) in.push_back(TensorView::of(t));
  const std::vector<TensorView> outs{TensorView::of(out)};
  Stream stream;
  kernel.run(stream, in, outs);
  return out;
}

std::string implementation_of(const Kernel& kernel) {
  const auto* reports = dynamic_cast<const onednn::ReportsImplementation*>(&kernel);
  return reports ? reports->library_implementation() : "";
}

// A random case of `form` ("nt" with or without a bias, "nn", "tn": the weight gradient, which stays with
// oneDNN) with `rows` rows on the small side.
Case random_case(const std::string& form, int64_t rows, std::mt19937& rng, bool bias = false) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  const int64_t n = pick(33, 300), k = pick(33, 300);  // every tail of 16 lanes and of 3 rows
  Case c;
  if (form == "nt") {  // Y (rows, n) = X (rows, k) · W (n, k)ᵀ [+ B]
    c.attributes = {{"transB", int64_t{1}}};
    c.inputs = {random_tensor({rows, k}, rng), random_tensor({n, k}, rng)};
    if (bias) c.inputs.push_back(random_tensor(pick(0, 1) ? Ints{n} : Ints{1, n}, rng));
    c.out = {rows, n};
  } else if (form == "nn") {  // dX (rows, k) = dY (rows, n) · W (n, k)
    c.inputs = {random_tensor({rows, n}, rng), random_tensor({n, k}, rng)};
    c.out = {rows, k};
  } else {  // dW (n, k) = dY (rows, n)ᵀ · X (rows, k)
    c.attributes = {{"transA", int64_t{1}}};
    c.inputs = {random_tensor({rows, n}, rng), random_tensor({rows, k}, rng)};
    c.out = {n, k};
  }
  return c;
}

void expect_close(const Tensor& actual, const Tensor& expected, const std::string& what) {
  int failures = 0;
  for (int64_t i = 0; i < expected.numel() && failures < 5; ++i) {
    const float e = expected.data<float>()[i], a = actual.data<float>()[i];
    if (std::abs(a - e) > 1e-5f + 1e-5f * std::abs(e)) {
      ADD_FAILURE() << what << " element " << i << ": skinny " << a << ", reference " << e;
      ++failures;
    }
  }
}

}  // namespace

TEST(SkinnyGemm, EveryFormMatchesTheReferenceAndDoesNotDependOnTheThreadCount) {
  if (!cpu::has_skinny_gemm()) GTEST_SKIP() << "this CPU has no AVX-512: the registry's Gemm is oneDNN's";
  std::mt19937 rng(2026'12'05);
  const int saved = omp_get_max_threads();
  for (const std::string form : {"nt", "nt+bias", "nn"}) {
    for (int64_t rows = 1; rows <= cpu::kSkinnyRows; ++rows) {
      const Case c = random_case(form.substr(0, 2), rows, rng, form == "nt+bias");
      const std::string what = form + " rows " + std::to_string(rows) + " Y" + Shape::of(c.out).to_string();
      std::unique_ptr<Kernel> kernel = prepare(c, "onednn");
      EXPECT_EQ(implementation_of(*kernel), "skinny gemm (" + form.substr(0, 2) + ")") << what;
      omp_set_num_threads(1);
      const Tensor one = run(*kernel, c);
      omp_set_num_threads(2);
      const Tensor two = run(*kernel, c);
      omp_set_num_threads(saved);
      expect_close(one, run(*prepare(c, "reference"), c), what);
      EXPECT_EQ(0, std::memcmp(one.raw(), two.raw(), one.nbytes())) << what << ": 1 and 2 threads differ";
    }
  }
}

TEST(SkinnyGemm, LargerSidesTheWeightGradientAlphaAndOtherBiasesStayWithOnednn) {
  std::mt19937 rng(5);
  for (const std::string form : {"nt", "nn"}) {
    const Case wide = random_case(form, cpu::kSkinnyRows + 1, rng);
    EXPECT_EQ(implementation_of(*prepare(wide, "onednn")).rfind("skinny", 0), std::string::npos) << form;
  }
  const Case weight_gradient = random_case("tn", 8, rng);
  EXPECT_EQ(implementation_of(*prepare(weight_gradient, "onednn")).rfind("skinny", 0), std::string::npos);
  Case scaled = random_case("nn", 8, rng);
  scaled.attributes["alpha"] = 0.5;
  EXPECT_EQ(implementation_of(*prepare(scaled, "onednn")).rfind("skinny", 0), std::string::npos);
  Case full_c = random_case("nt", 8, rng);
  full_c.inputs.push_back(random_tensor(full_c.out, rng));  // C of Y's shape, not a bias
  EXPECT_EQ(implementation_of(*prepare(full_c, "onednn")).rfind("skinny", 0), std::string::npos);
  expect_close(run(*prepare(full_c, "onednn"), full_c), run(*prepare(full_c, "reference"), full_c), "full C");
}

// A pipeline's micro-batch gradients (dX of a stage's first node when the stage before reads it): run_into
// sums the skinny forms in place (sums_output), the bias form through the session; each ends on the plain
// runs' sum.
TEST(SkinnyGemm, RunIntoSumsEveryFormOverMicroBatches) {
  if (!cpu::has_skinny_gemm()) GTEST_SKIP() << "this CPU has no AVX-512: the registry's Gemm is oneDNN's";
  std::mt19937 rng(8);
  for (const std::string form : {"nt", "nt+bias", "nn"}) {
    SCOPED_TRACE(form);
    const Case shape = random_case(form.substr(0, 2), 8, rng, form == "nt+bias");
    EXPECT_EQ(prepare(shape, "onednn")->sums_output(0), form != "nt+bias");
    Graph g;
    std::vector<ValueId> inputs;
    for (size_t i = 0; i < shape.inputs.size(); ++i) {
      inputs.push_back(g.add_value({.name = "in" + std::to_string(i),
                                    .dtype = DType::Float32,
                                    .shape = Shape::of(shape.inputs[i].sizes()),
                                    .role = ValueRole::Input}));
      g.inputs.push_back(inputs.back());
    }
    const ValueId y = g.add_value({.name = "Y", .dtype = DType::Float32, .shape = Shape::of(shape.out)});
    g.add_node({.name = "gemm",
                .op_type = "Gemm",
                .opset = 13,
                .inputs = inputs,
                .outputs = {y},
                .attributes = shape.attributes});
    g.outputs = {y};
    g.sort();
    InferenceSession session(g), plain(g);
    const std::map<std::string, Tensor> into{{"Y", Tensor(DType::Float32, shape.out)}};
    Tensor want(DType::Float32, shape.out);
    for (int micro_batch = 0; micro_batch < 3; ++micro_batch) {
      std::map<std::string, Tensor> feed;
      for (size_t i = 0; i < shape.inputs.size(); ++i)
        feed["in" + std::to_string(i)] = random_tensor(shape.inputs[i].sizes(), rng);
      session.run_into(feed, into, micro_batch > 0);
      const Tensor one = plain.run(feed).at("Y");
      for (int64_t i = 0; i < want.numel(); ++i) want.data<float>()[i] += one.data<float>()[i];
    }
    session.finish_sums();
    expect_close(into.at("Y"), want, form + " summed");
  }
}
