// The CUDA reductions, softmax, losses and normalisations (kernels/cuda/reduce*, softmax*, loss*,
// layer_norm*, instance_norm*). Everywhere: the index geometry they share (kernels/cuda/reduce_geometry.h)
// against a naive enumeration and against the reference's broadcasting; with CUDA compiled in, the
// registrations and the prepare-time errors (no device needed). On a GPU: every family against the
// reference kernels, forward and backward, skipping with a message when no CUDA device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "graph/error.h"
#include "kernels/cuda/cuda_runtime.h"
#include "kernels/cuda/reduce_geometry.h"
#include "kernels/kernel.h"
#include "kernels/reference/common.h"
#include "tests/reference_kernel_call.h"

namespace onnxtrain {
namespace {

using Ints = std::vector<int64_t>;
using testing_support::KernelCase;

// ---------------------------------------------------------------- geometry (CPU)

// Row-major coordinates of `index` in `sizes`.
Ints coordinates(int64_t index, const Ints& sizes) {
  Ints c(sizes.size());
  for (size_t d = sizes.size(); d-- > 0;) {
    c[d] = index % sizes[d];
    index /= sizes[d];
  }
  return c;
}

// Checks g against the definition: output o folds exactly the input elements whose kept coordinates are
// o's (row-major over the kept dims), each once.
void expect_geometry_matches(const Ints& sizes, const std::vector<bool>& reduced) {
  const std::string what = ::testing::PrintToString(sizes) + " reduced " + ::testing::PrintToString(reduced);
  const std::optional<cuda::ReduceGeometry> g = cuda::make_reduce_geometry(sizes, reduced);
  ASSERT_TRUE(g) << what;
  int64_t numel = 1, out_numel = 1, count = 1;
  Ints kept_sizes;
  for (size_t d = 0; d < sizes.size(); ++d) {
    numel *= sizes[d];
    if (reduced[d]) {
      count *= sizes[d];
    } else {
      out_numel *= sizes[d];
      kept_sizes.push_back(sizes[d]);
    }
  }
  ASSERT_EQ(g->out_numel, out_numel) << what;
  ASSERT_EQ(g->count, count) << what;
  std::set<int64_t> seen;
  for (int64_t o = 0; o < g->out_numel; ++o) {
    for (int64_t r = 0; r < g->count; ++r) {
      const int64_t offset = g->input_offset(o, r);
      ASSERT_GE(offset, 0) << what;
      ASSERT_LT(offset, numel) << what;
      EXPECT_TRUE(seen.insert(offset).second) << what << ": offset " << offset << " folded twice";
      const Ints c = coordinates(offset, sizes);
      int64_t kept_index = 0;
      for (size_t d = 0, k = 0; d < sizes.size(); ++d)
        if (!reduced[d]) kept_index = kept_index * kept_sizes[k++] + c[d];
      EXPECT_EQ(kept_index, o) << what << ": offset " << offset;
    }
  }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), numel) << what;
}

TEST(CudaReduceGeometry, EveryAxisSetMatchesTheNaiveEnumeration) {
  for (const Ints& sizes : {Ints{5}, Ints{2, 3}, Ints{2, 3, 4}, Ints{3, 1, 4, 2}, Ints{2, 3, 1, 2, 3}, Ints{1, 1, 1}}) {
    const size_t rank = sizes.size();
    for (uint32_t mask = 0; mask < (1u << rank); ++mask) {
      std::vector<bool> reduced(rank);
      for (size_t d = 0; d < rank; ++d) reduced[d] = (mask >> d) & 1u;
      expect_geometry_matches(sizes, reduced);
    }
  }
}

TEST(CudaReduceGeometry, ZeroSizeInputsFoldNothing) {
  const auto g = cuda::make_reduce_geometry({3, 0, 4}, {false, true, false});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->out_numel, 12);
  EXPECT_EQ(g->count, 0);
  const auto h = cuda::make_reduce_geometry({3, 0, 4}, {true, false, true});
  ASSERT_TRUE(h);
  EXPECT_EQ(h->out_numel, 0);
}

TEST(CudaReduceGeometry, MergesNeighboursAndDropsUnitDims) {
  // (2, 3, 1, 4, 5) over axes 1..3: the reduced 3·4 block is one dim of stride 5, the kept dims stay apart.
  const auto g = cuda::make_reduce_geometry({2, 3, 1, 4, 5}, {false, true, true, true, false});
  ASSERT_TRUE(g);
  EXPECT_EQ(g->reduced.rank, 1);
  EXPECT_EQ(g->reduced.sizes[0], 12);
  EXPECT_EQ(g->reduced.strides[0], 5);
  EXPECT_EQ(g->kept.rank, 2);
  // All dims reduced: one contiguous run.
  const auto all = cuda::make_reduce_geometry({4, 5, 6}, {true, true, true});
  ASSERT_TRUE(all);
  EXPECT_EQ(all->reduced.rank, 1);
  EXPECT_EQ(all->kept.rank, 0);
  EXPECT_EQ(all->input_offset(0, 119), 119);
}

TEST(CudaReduceGeometry, TooManyAlternationsIsRefused) {
  // 18 dims of size 2 alternating kept/reduced: 9 groups of each kind, one more than a kernel carries.
  Ints sizes(18, 2);
  std::vector<bool> reduced(18);
  for (size_t d = 0; d < 18; ++d) reduced[d] = d % 2 == 1;
  EXPECT_FALSE(cuda::make_reduce_geometry(sizes, reduced));
  sizes.resize(16);
  reduced.resize(16);
  EXPECT_TRUE(cuda::make_reduce_geometry(sizes, reduced));
}

TEST(CudaBroadcastIndex, MatchesTheReferenceBroadcast) {
  const std::vector<std::pair<Ints, Ints>> cases = {
      {{4}, {3, 4}},          {{1}, {3, 4}},          {{3, 1}, {3, 4}}, {{3, 4}, {3, 4}},
      {{2, 1, 4}, {2, 3, 4}}, {{1, 3, 1}, {2, 3, 4}}, {{}, {2, 2}},     {{5, 1, 1, 2}, {5, 3, 1, 2}},
  };
  for (const auto& [from, target] : cases) {
    const std::string what = ::testing::PrintToString(from) + " onto " + ::testing::PrintToString(target);
    const auto index = cuda::make_broadcast_index(from, target);
    ASSERT_TRUE(index) << what;
    Ints expected;
    reference::for_each_broadcast(target, {reference::broadcast_strides(from, target)},
                                  [&](int64_t, const std::vector<int64_t>& in) { expected.push_back(in[0]); });
    ASSERT_EQ(static_cast<int64_t>(expected.size()), reference::product_of(target)) << what;
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_EQ((*index)(static_cast<int64_t>(i)), expected[i]) << what << " element " << i;
  }
}

TEST(CudaBroadcastIndex, RandomShapesMatchTheReferenceBroadcast) {
  // Every subset of a target's dims set to 1, with leading dims dropped: each a shape that broadcasts.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> size(1, 4);
  for (int trial = 0; trial < 40; ++trial) {
    Ints target(static_cast<size_t>(1 + trial % 5));
    for (int64_t& d : target) d = size(rng);
    const size_t rank = target.size();
    for (uint32_t mask = 0; mask < (1u << rank); ++mask) {
      Ints from = target;
      for (size_t d = 0; d < rank; ++d)
        if ((mask >> d) & 1u) from[d] = 1;
      const size_t drop = mask % (rank + 1);  // leading dims numpy aligns away
      from.erase(from.begin(), from.begin() + static_cast<int64_t>(drop));
      const auto index = cuda::make_broadcast_index(from, target);
      ASSERT_TRUE(index);
      int64_t i = 0;
      reference::for_each_broadcast(
          target, {reference::broadcast_strides(from, target)}, [&](int64_t, const std::vector<int64_t>& in) {
            EXPECT_EQ((*index)(i), in[0])
                << ::testing::PrintToString(from) << " onto " << ::testing::PrintToString(target) << " at " << i;
            ++i;
          });
    }
  }
}

TEST(CudaBroadcastIndex, RefusesShapesThatDoNotBroadcast) {
  EXPECT_FALSE(cuda::make_broadcast_index({3}, {3, 4}));
  EXPECT_FALSE(cuda::make_broadcast_index({2, 3, 4}, {3, 4}));
}

#if ONNXTRAIN_WITH_CUDA
// ---------------------------------------------------------------- registration and prepare (CPU)

const KernelEntry* cuda_entry(const std::string& domain, const std::string& op, DType dtype = DType::Float32) {
  return KernelRegistry::builtin().find(domain, op, DeviceKind::Cuda, dtype, "cuda");
}

TEST(CudaReduceLossKernels, EveryOpIsRegistered) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                         "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ArgMax", "ArgMin"}) {
    for (DType dtype : {DType::Float32, DType::Float64, DType::Int32, DType::Int64})
      EXPECT_NE(cuda_entry("", op, dtype), nullptr) << op << " " << dtype_name(dtype);
  }
  for (const char* op : {"Softmax", "LogSoftmax", "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss",
                         "LayerNormalization", "InstanceNormalization"})
    EXPECT_NE(cuda_entry("", op), nullptr) << op;
  for (const char* op : {"SoftmaxGrad", "LogSoftmaxGrad", "SoftmaxCrossEntropyLossGrad",
                         "NegativeLogLikelihoodLossGrad", "LayerNormalizationGrad", "InstanceNormalizationGrad"})
    EXPECT_NE(cuda_entry("ai.onnxtrain", op), nullptr) << op;
}

std::string prepare_error(const std::string& domain, const KernelSpec& spec) {
  const KernelEntry* entry = cuda_entry(domain, spec.op_type, kernel_dtype(spec));
  if (!entry) return "no entry";
  try {
    entry->prepare(spec);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(CudaReduceLossKernels, PrepareRejectsWhatTheReferenceRejects) {
  const TensorDesc x{DType::Float32, {2, 3, 4}};
  KernelSpec repeated{.op_type = "ReduceSum",
                      .opset = 11,
                      .attributes = {{"axes", Ints{1, -2}}},
                      .inputs = {x},
                      .outputs = {{DType::Float32, {2, 1, 4}}},
                      .node_name = "sum"};
  EXPECT_NE(prepare_error("", repeated).find("repeated"), std::string::npos) << prepare_error("", repeated);

  KernelSpec wrong_out = repeated;
  wrong_out.attributes = {{"axes", Ints{1}}};
  wrong_out.outputs = {{DType::Float32, {2, 4}}};  // keepdims=1 keeps the 1
  EXPECT_NE(prepare_error("", wrong_out), "");

  KernelSpec softmax{.op_type = "Softmax",
                     .opset = 13,
                     .attributes = {{"axis", int64_t{3}}},
                     .inputs = {x},
                     .outputs = {x},
                     .node_name = "sm"};
  EXPECT_NE(prepare_error("", softmax).find("out of range"), std::string::npos) << prepare_error("", softmax);

  KernelSpec loss{.op_type = "SoftmaxCrossEntropyLoss",
                  .opset = 13,
                  .attributes = {{"reduction", std::string("avg")}},
                  .inputs = {{DType::Float32, {4, 5}}, {DType::Int64, {4}}},
                  .outputs = {{DType::Float32, {}}},
                  .node_name = "loss"};
  EXPECT_NE(prepare_error("", loss).find("reduction"), std::string::npos) << prepare_error("", loss);

  KernelSpec norm{.op_type = "LayerNormalization",
                  .opset = 17,
                  .attributes = {{"axis", int64_t{1}}},
                  .inputs = {x, {DType::Float32, {5}}},
                  .outputs = {x},
                  .node_name = "ln"};
  EXPECT_NE(prepare_error("", norm).find("Scale"), std::string::npos) << prepare_error("", norm);
}

// ---------------------------------------------------------------- against the reference (GPU)

Tensor random_tensor(std::mt19937& rng, const Ints& sizes, float lo = -3, float hi = 3) {
  Tensor t(DType::Float32, sizes);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.data<float>()) v = dist(rng);
  return t;
}

// Small integers as floats: ArgMax/ArgMin and Max/Min meet ties.
Tensor random_ties(std::mt19937& rng, const Ints& sizes) {
  Tensor t(DType::Float32, sizes);
  std::uniform_int_distribution<int> dist(-3, 3);
  for (float& v : t.data<float>()) v = static_cast<float>(dist(rng));
  return t;
}

template <typename T>
Tensor random_ints(std::mt19937& rng, DType dtype, const Ints& sizes, int lo, int hi) {
  Tensor t(dtype, sizes);
  std::uniform_int_distribution<int> dist(lo, hi);
  for (T& v : t.data<T>()) v = static_cast<T>(dist(rng));
  return t;
}

Tensor labels(std::mt19937& rng, const Ints& sizes, int64_t classes, int64_t ignore) {
  Tensor t = random_ints<int64_t>(rng, DType::Int64, sizes, 0, static_cast<int>(classes) - 1);
  int64_t k = 0;
  for (int64_t& v : t.data<int64_t>())
    if (++k % 5 == 0) v = ignore;  // every fifth element ignored
  return t;
}

using testing_support::spec_of;

std::vector<Tensor> run_reference(const KernelCase& c) {
  const KernelSpec spec = spec_of(c);
  const KernelEntry* entry =
      KernelRegistry::builtin().find(c.domain, c.op, DeviceKind::Cpu, kernel_dtype(spec), "reference");
  if (!entry) throw Error("no reference kernel for " + c.op);
  return testing_support::run_prepared(*entry->prepare(spec), c.inputs, c.outputs);
}

std::unique_ptr<Kernel> prepare_cuda(const KernelCase& c) {
  const KernelSpec spec = spec_of(c);
  const KernelEntry* entry = cuda_entry(c.domain, c.op, kernel_dtype(spec));
  if (!entry) throw Error("no cuda kernel for " + c.op);
  return entry->prepare(spec);
}

// Copies the inputs to cuda:0, runs the prepared kernel, and copies the outputs back.
std::vector<Tensor> run_prepared_cuda(Kernel& kernel, const KernelCase& c) {
  cuda::DeviceStream stream(0);
  std::vector<cuda::DeviceBuffer> buffers;
  std::vector<TensorView> in, out;
  for (const Tensor& t : c.inputs) {
    if (t.dtype() == DType::Undefined) {
      in.emplace_back();
      continue;
    }
    buffers.emplace_back(stream, std::max<size_t>(t.nbytes(), 1));
    if (t.nbytes() > 0) cuda::copy_to_device(buffers.back().data(), t.raw(), t.nbytes(), stream);
    in.push_back({t.dtype(), t.sizes(), buffers.back().data(), DeviceKind::Cuda});
  }
  std::vector<Tensor> results;
  for (const TensorDesc& d : c.outputs) results.push_back(d.present() ? Tensor(d.dtype, d.sizes) : Tensor());
  for (const Tensor& t : results) {
    if (t.dtype() == DType::Undefined) {
      out.emplace_back();
      continue;
    }
    buffers.emplace_back(stream, std::max<size_t>(t.nbytes(), 1));
    out.push_back({t.dtype(), t.sizes(), buffers.back().data(), DeviceKind::Cuda});
  }
  Stream kernel_stream = stream.kernel_stream(0);
  kernel.run(kernel_stream, in, out);
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i].nbytes() > 0) cuda::copy_to_host(results[i].raw(), out[i].data, results[i].nbytes(), stream);
  stream.synchronize();
  return results;
}

std::vector<Tensor> run_cuda(const KernelCase& c) { return run_prepared_cuda(*prepare_cuda(c), c); }

double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::Float32:
      return t.data<float>()[i];
    case DType::Float64:
      return t.data<double>()[i];
    case DType::Int32:
      return t.data<int32_t>()[i];
    case DType::Int64:
      return static_cast<double>(t.data<int64_t>()[i]);
    default:
      throw Error("unexpected dtype in the comparison");
  }
}

// The CUDA kernel agrees with the reference: integers exactly, floats within float rounding (both
// accumulate in double; float32 results differ in summation order only).
void expect_agree(const KernelCase& c, const std::string& what) {
  SCOPED_TRACE(what);
  const std::vector<Tensor> expected = run_reference(c);
  const std::vector<Tensor> actual = run_cuda(c);
  ASSERT_EQ(expected.size(), actual.size());
  for (size_t o = 0; o < expected.size(); ++o) {
    if (expected[o].dtype() == DType::Undefined) continue;
    ASSERT_EQ(expected[o].sizes(), actual[o].sizes()) << "output " << o;
    const bool exact = expected[o].dtype() == DType::Int32 || expected[o].dtype() == DType::Int64;
    int failures = 0;
    for (int64_t i = 0; i < expected[o].numel() && failures < 5; ++i) {
      const double e = element(expected[o], i), a = element(actual[o], i);
      if (std::isnan(e) && std::isnan(a)) continue;
      const double tolerance = exact ? 0.0 : 2e-6 * std::max(1.0, std::fabs(e));
      if (!(std::fabs(e - a) <= tolerance)) {
        ADD_FAILURE() << "output " << o << " element " << i << ": reference " << e << ", cuda " << a;
        ++failures;
      }
    }
  }
}

class CudaReduceLossGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device visible";
  }
  std::mt19937 rng{7};
};

TEST_F(CudaReduceLossGpu, ReductionsMatchTheReference) {
  const char* ops[] = {"ReduceSum", "ReduceMean", "ReduceMax",       "ReduceMin",    "ReduceProd",
                       "ReduceL1",  "ReduceL2",   "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};
  struct Shape {
    Ints sizes, axes, out;  // out with keepdims=1
  };
  const Shape shapes[] = {{{4, 5, 6}, {1}, {4, 1, 6}},
                          {{4, 5, 6}, {0, 2}, {1, 5, 1}},
                          {{3, 5000}, {1}, {3, 1}},
                          {{6000, 3}, {0}, {1, 3}},
                          {{2, 3, 4, 5}, {}, {1, 1, 1, 1}}};
  for (const char* op : ops) {
    for (const Shape& s : shapes) {
      const bool log_op = std::string(op) == "ReduceLogSum" || std::string(op) == "ReduceL2";
      const bool prod = std::string(op) == "ReduceProd";
      Tensor x = log_op ? random_tensor(rng, s.sizes, 0.1f, 2)
                        : random_tensor(rng, s.sizes, prod ? 0.9f : -3, prod ? 1.1f : 3);
      Attributes a;
      if (!s.axes.empty()) a["axes"] = s.axes;
      expect_agree(
          {.op = op, .opset = 11, .attributes = a, .inputs = {x}, .outputs = {{DType::Float32, s.out}}},
          std::string(op) + " " + ::testing::PrintToString(s.sizes) + " axes " + ::testing::PrintToString(s.axes));
    }
  }
  // keepdims=0, axes as an input (opset 18, read from the device), noop_with_empty_axes, integers.
  const Tensor x = random_tensor(rng, {3, 4, 5});
  expect_agree({.op = "ReduceMean",
                .opset = 18,
                .attributes = {{"keepdims", int64_t{0}}},
                .inputs = {x, Tensor::vector_int64({-1, 0})},
                .outputs = {{DType::Float32, {4}}}},
               "ReduceMean axes input");
  expect_agree({.op = "ReduceMax",
                .opset = 18,
                .attributes = {{"noop_with_empty_axes", int64_t{1}}},
                .inputs = {x},
                .outputs = {{DType::Float32, {3, 4, 5}}}},
               "ReduceMax noop");
  const Tensor xi = random_ints<int32_t>(rng, DType::Int32, {7, 300}, -50, 50);
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMin", "ReduceSumSquare"})
    expect_agree({.op = op,
                  .opset = 11,
                  .attributes = {{"axes", Ints{1}}, {"keepdims", int64_t{0}}},
                  .inputs = {xi},
                  .outputs = {{DType::Int32, {7}}}},
                 std::string(op) + " int32");
}

TEST_F(CudaReduceLossGpu, ArgMaxArgMinMatchTheReference) {
  const Tensor x = random_ties(rng, {4, 37, 3});
  for (const char* op : {"ArgMax", "ArgMin"})
    for (int64_t last : {0, 1})
      expect_agree({.op = op,
                    .opset = 13,
                    .attributes = {{"axis", int64_t{1}}, {"select_last_index", last}},
                    .inputs = {x},
                    .outputs = {{DType::Int64, {4, 1, 3}}}},
                   std::string(op) + " select_last " + std::to_string(last));
}

TEST_F(CudaReduceLossGpu, SoftmaxAndGradsMatchTheReference) {
  struct Case {
    Ints sizes;
    int64_t axis;
    int opset;
  };
  for (const Case& s :
       {Case{{6, 10}, -1, 13}, Case{{2, 3, 4}, 1, 13}, Case{{3, 3000}, 1, 13}, Case{{2, 3, 4}, 1, 11}}) {
    const Tensor x = random_tensor(rng, s.sizes, -10, 10);
    const std::string what = ::testing::PrintToString(s.sizes) + " axis " + std::to_string(s.axis);
    for (const char* op : {"Softmax", "LogSoftmax"})
      expect_agree({.op = op,
                    .opset = s.opset,
                    .attributes = {{"axis", s.axis}},
                    .inputs = {x},
                    .outputs = {{DType::Float32, s.sizes}}},
                   std::string(op) + " " + what);
    if (s.opset < 13) continue;
    const Tensor y = testing_support::run1(
        {.op = "Softmax", .attributes = {{"axis", s.axis}}, .inputs = {x}, .outputs = {{DType::Float32, s.sizes}}});
    const Tensor dy = random_tensor(rng, s.sizes);
    for (const char* op : {"SoftmaxGrad", "LogSoftmaxGrad"})
      expect_agree({.op = op,
                    .attributes = {{"axis", s.axis}},
                    .inputs = {dy, y},
                    .outputs = {{DType::Float32, s.sizes}},
                    .domain = "ai.onnxtrain"},
                   std::string(op) + " " + what);
  }
}

TEST_F(CudaReduceLossGpu, LossesAndGradsMatchTheReference) {
  for (const Ints& scores : {Ints{16, 7}, Ints{4, 5, 9}}) {
    Ints per_element = scores;
    per_element.erase(per_element.begin() + 1);
    const Tensor s = random_tensor(rng, scores, -6, 6);
    const Tensor l = labels(rng, per_element, scores[1], 2);
    const Tensor w = random_tensor(rng, {scores[1]}, 0.2f, 2);
    Tensor shape(DType::Int64, {static_cast<int64_t>(scores.size())});
    for (size_t i = 0; i < scores.size(); ++i) shape.data<int64_t>()[i] = scores[i];
    for (const char* reduction : {"none", "sum", "mean"}) {
      const Attributes a{{"reduction", std::string(reduction)}, {"ignore_index", int64_t{2}}};
      const Ints loss_sizes = std::string(reduction) == "none" ? per_element : Ints{};
      const std::string what = std::string(reduction) + " " + ::testing::PrintToString(scores);
      expect_agree({.op = "SoftmaxCrossEntropyLoss",
                    .opset = 13,
                    .attributes = a,
                    .inputs = {s, l, w},
                    .outputs = {{DType::Float32, loss_sizes}, {DType::Float32, scores}}},
                   "SoftmaxCrossEntropyLoss " + what);
      expect_agree({.op = "NegativeLogLikelihoodLoss",
                    .opset = 13,
                    .attributes = a,
                    .inputs = {s, l},
                    .outputs = {{DType::Float32, loss_sizes}}},
                   "NegativeLogLikelihoodLoss " + what);
      const Tensor log_prob =
          testing_support::run({.op = "SoftmaxCrossEntropyLoss",
                                .attributes = a,
                                .inputs = {s, l, w},
                                .outputs = {{DType::Float32, loss_sizes}, {DType::Float32, scores}}})[1];
      const Tensor dloss = random_tensor(rng, loss_sizes, -2, 2);
      expect_agree({.op = "SoftmaxCrossEntropyLossGrad",
                    .attributes = a,
                    .inputs = {dloss, log_prob, l, w},
                    .outputs = {{DType::Float32, scores}},
                    .domain = "ai.onnxtrain"},
                   "SoftmaxCrossEntropyLossGrad " + what);
      expect_agree({.op = "NegativeLogLikelihoodLossGrad",
                    .attributes = a,
                    .inputs = {dloss, l, shape, w},
                    .outputs = {{DType::Float32, scores}},
                    .domain = "ai.onnxtrain"},
                   "NegativeLogLikelihoodLossGrad " + what);
    }
  }
}

TEST_F(CudaReduceLossGpu, EveryLabelIgnoredAndFloat64MatchTheReference) {
  // mean over no element: NaN forward (0/0), zero gradient, as the reference (and PyTorch) give.
  const Attributes a{{"ignore_index", int64_t{3}}};
  Tensor all_ignored(DType::Int64, {8, 40});
  for (int64_t& v : all_ignored.data<int64_t>()) v = 3;
  const Tensor scores = random_tensor(rng, {8, 5, 40});
  expect_agree({.op = "SoftmaxCrossEntropyLoss",
                .opset = 13,
                .attributes = a,
                .inputs = {scores, all_ignored},
                .outputs = {{DType::Float32, {}}}},
               "all ignored");
  expect_agree({.op = "SoftmaxCrossEntropyLossGrad",
                .attributes = a,
                .inputs = {random_tensor(rng, {}), scores, all_ignored},
                .outputs = {{DType::Float32, {8, 5, 40}}},
                .domain = "ai.onnxtrain"},
               "all ignored grad");
  Tensor x(DType::Float64, {5, 300});
  std::uniform_real_distribution<double> dist(-4, 4);
  for (double& v : x.data<double>()) v = dist(rng);
  expect_agree({.op = "LogSoftmax", .opset = 13, .inputs = {x}, .outputs = {{DType::Float64, {5, 300}}}},
               "LogSoftmax float64");
  expect_agree({.op = "ReduceLogSumExp",
                .opset = 13,
                .attributes = {{"axes", Ints{1}}},
                .inputs = {x},
                .outputs = {{DType::Float64, {5, 1}}}},
               "ReduceLogSumExp float64");
}

// A label that is not a class: the reference throws; a CUDA kernel cannot without waiting for the device,
// so the element's loss is NaN, and the kernel's next run throws the reference's Error.
TEST_F(CudaReduceLossGpu, ALabelThatIsNotAClassGivesNaNThenAnError) {
  const Tensor bad = Tensor::vector_int64({0, 1, 7, 2});
  const Tensor scores = random_tensor(rng, {4, 5});
  const KernelCase none{.op = "NegativeLogLikelihoodLoss",
                        .opset = 13,
                        .attributes = {{"reduction", std::string("none")}},
                        .inputs = {scores, bad},
                        .outputs = {{DType::Float32, {4}}}};
  const std::vector<Tensor> elements = run_cuda(none);
  EXPECT_FALSE(std::isnan(elements[0].data<float>()[1]));
  EXPECT_TRUE(std::isnan(elements[0].data<float>()[2]));
  for (const char* op : {"SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"}) {
    SCOPED_TRACE(op);
    const KernelCase c{.op = op, .opset = 13, .inputs = {scores, bad}, .outputs = {{DType::Float32, {}}}};
    std::unique_ptr<Kernel> kernel = prepare_cuda(c);
    EXPECT_TRUE(std::isnan(run_prepared_cuda(*kernel, c)[0].data<float>()[0]));
    try {
      run_prepared_cuda(*kernel, c);
      FAIL() << "expected an Error for label 7 of 5 classes";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("label outside [0, classes)"), std::string::npos) << e.what();
    }
  }
}

TEST_F(CudaReduceLossGpu, NormalisationsAndGradsMatchTheReference) {
  struct Case {
    Ints x;
    int64_t axis;
    Ints scale;
  };
  for (const Case& c : {Case{{8, 16}, -1, {16}}, Case{{2, 3, 4}, 1, {1, 4}}, Case{{3, 2048}, 1, {2048}}}) {
    const std::string what = ::testing::PrintToString(c.x) + " axis " + std::to_string(c.axis);
    const Tensor x = random_tensor(rng, c.x), scale = random_tensor(rng, c.scale), b = random_tensor(rng, c.scale);
    const int64_t axis = c.axis < 0 ? c.axis + static_cast<int64_t>(c.x.size()) : c.axis;
    Ints stats = c.x;
    for (size_t d = static_cast<size_t>(axis); d < stats.size(); ++d) stats[d] = 1;
    const Ints normalized(c.x.begin() + axis, c.x.end());
    expect_agree({.op = "LayerNormalization",
                  .attributes = {{"axis", c.axis}},
                  .inputs = {x, scale, b},
                  .outputs = {{DType::Float32, c.x}, {DType::Float32, stats}, {DType::Float32, stats}}},
                 "LayerNormalization " + what);
    expect_agree({.op = "LayerNormalizationGrad",
                  .attributes = {{"axis", c.axis}},
                  .inputs = {random_tensor(rng, c.x), x, scale},
                  .outputs = {{DType::Float32, c.x}, {DType::Float32, normalized}, {DType::Float32, normalized}},
                  .domain = "ai.onnxtrain"},
                 "LayerNormalizationGrad " + what);
  }
  // Rows of no columns: Y is empty, but each row's Mean and InvStdDev are 0/0 = NaN in the reference.
  expect_agree({.op = "LayerNormalization",
                .attributes = {{"axis", int64_t{-1}}},
                .inputs = {random_tensor(rng, {3, 0}), random_tensor(rng, {0}), random_tensor(rng, {0})},
                .outputs = {{DType::Float32, {3, 0}}, {DType::Float32, {3, 1}}, {DType::Float32, {3, 1}}}},
               "LayerNormalization of empty rows");
  for (const Ints& xs : {Ints{2, 3, 5, 4}, Ints{2, 2, 3000}}) {
    const Tensor x = random_tensor(rng, xs), scale = random_tensor(rng, {xs[1]}), b = random_tensor(rng, {xs[1]});
    const std::string what = ::testing::PrintToString(xs);
    expect_agree({.op = "InstanceNormalization", .inputs = {x, scale, b}, .outputs = {{DType::Float32, xs}}},
                 "InstanceNormalization " + what);
    expect_agree({.op = "InstanceNormalizationGrad",
                  .inputs = {random_tensor(rng, xs), x, scale},
                  .outputs = {{DType::Float32, xs}, {DType::Float32, {xs[1]}}, {DType::Float32, {xs[1]}}},
                  .domain = "ai.onnxtrain"},
                 "InstanceNormalizationGrad " + what);
  }
}
#endif  // ONNXTRAIN_WITH_CUDA

}  // namespace
}  // namespace onnxtrain
