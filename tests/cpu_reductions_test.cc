// The "cpu" reduction kernels (kernels/cpu/reduce.cc, reduce_arg.cc) against the reference kernels:
// seeded random float32 inputs of shapes large enough for several threads, odd sizes for the tails of
// the SIMD loops, every loop shape (inner reduced, inner kept, rows split across threads, trailing axes
// through oneDNN, size-1 dims), axes as attribute and as input (changing between runs), keepdims,
// noop_with_empty_axes, NaN and infinity; ArgMax/ArgMin with ties, NaN and select_last_index.
// Sums compare within 1e-5 of the largest |reference| value (the reference accumulates in double; ReduceSum
// also within 1e-7 of the sum of |x|, the float rounding of a sum that cancels),
// Max/Min and the arg reductions exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "kernels/kernel.h"

using namespace onnxtrain;

namespace {

using Ints = std::vector<int64_t>;

const char* const kReduceOps[] = {"ReduceSum", "ReduceMean", "ReduceMax",       "ReduceMin",    "ReduceProd",
                                  "ReduceL1",  "ReduceL2",   "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"};

struct Case {
  std::string op;
  int opset = 18;
  Attributes attributes;
  std::vector<Tensor> inputs;
  std::vector<TensorDesc> outputs;
};

Tensor random_tensor(std::mt19937& rng, const Ints& sizes, float lo, float hi) {
  Tensor t(DType::Float32, sizes);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.data<float>()) v = dist(rng);
  return t;
}

Tensor int64s(const Ints& values) {
  Tensor t(DType::Int64, {static_cast<int64_t>(values.size())});
  std::copy(values.begin(), values.end(), t.data<int64_t>().begin());
  return t;
}

// Inputs each op takes in its domain: positive for LogSum, near 1 for Prod.
Tensor input_for(std::mt19937& rng, const std::string& op, const Ints& sizes) {
  if (op == "ReduceLogSum") return random_tensor(rng, sizes, 0.1f, 2.0f);
  if (op == "ReduceProd") return random_tensor(rng, sizes, 0.995f, 1.005f);
  return random_tensor(rng, sizes, -2.0f, 2.0f);
}

Ints reduced_sizes(const Ints& sizes, Ints axes, bool keepdims) {
  const auto rank = static_cast<int64_t>(sizes.size());
  std::vector<bool> reduced(sizes.size(), axes.empty());
  for (int64_t a : axes) reduced[a < 0 ? a + rank : a] = true;
  Ints out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!reduced[d])
      out.push_back(sizes[d]);
    else if (keepdims)
      out.push_back(1);
  }
  return out;
}

struct Prepared {
  std::unique_ptr<Kernel> kernel;
  std::string implementation;
};

Prepared prepare(const Case& c, const std::string& implementation) {
  KernelSpec spec{c.op, "", c.opset, c.attributes, {}, c.outputs, "test_node"};
  for (const Tensor& t : c.inputs) spec.inputs.push_back(TensorDesc{t.dtype(), t.sizes()});
  const KernelEntry* entry = KernelRegistry::builtin().find("", c.op, DeviceKind::Cpu, DType::Float32, implementation);
  if (!entry) throw std::runtime_error("no " + implementation + " kernel for " + c.op);
  return {entry->prepare(spec), entry->implementation};
}

std::vector<Tensor> run_prepared(Kernel& kernel, const Case& c) {
  std::vector<Tensor> results;
  std::vector<TensorView> in, out;
  for (const Tensor& t : c.inputs) in.push_back(TensorView::of(t));
  for (const TensorDesc& d : c.outputs) results.emplace_back(d.dtype, d.sizes);
  for (Tensor& t : results) out.push_back(TensorView::of(t));
  Stream stream;
  kernel.run(stream, in, out);
  return results;
}

void expect_same(const Tensor& ours, const Tensor& reference, bool exact, double slack = 0) {
  ASSERT_EQ(ours.sizes(), reference.sizes());
  if (reference.dtype() == DType::Int64) {
    auto a = ours.data<int64_t>(), r = reference.data<int64_t>();
    for (size_t i = 0; i < r.size(); ++i) ASSERT_EQ(a[i], r[i]) << "element " << i;
    return;
  }
  auto a = ours.data<float>(), r = reference.data<float>();
  double scale = 1.0;
  for (float v : r) {
    if (std::isfinite(v)) scale = std::max(scale, static_cast<double>(std::abs(v)));
  }
  for (size_t i = 0; i < r.size(); ++i) {
    if (std::isnan(r[i])) {
      ASSERT_TRUE(std::isnan(a[i])) << "element " << i << " is " << a[i] << ", reference NaN";
    } else if (exact || std::isinf(r[i])) {
      ASSERT_EQ(a[i], r[i]) << "element " << i;
    } else {
      ASSERT_NEAR(a[i], r[i], 1e-5 * scale + slack) << "element " << i;
    }
  }
}

// Runs the default kernel, which must be the "cpu" one, and the reference kernel; compares.
void expect_agree(const Case& c, const std::string& label) {
  SCOPED_TRACE(c.op + " " + label);
  Prepared ours = prepare(c, "");
  EXPECT_EQ(ours.implementation, "cpu");
  Prepared reference = prepare(c, "reference");
  const bool exact = c.op == "ReduceMax" || c.op == "ReduceMin" || c.op == "ArgMax" || c.op == "ArgMin";
  const std::vector<Tensor> a = run_prepared(*ours.kernel, c), r = run_prepared(*reference.kernel, c);
  // A sum that cancels (oneDNN accumulates in float): float rounding of the sum of |x|.
  double slack = 0;
  if (c.op == "ReduceSum") {
    for (float v : c.inputs[0].data<float>()) slack += std::isfinite(v) ? 1e-7 * std::abs(v) : 0.0;
  }
  expect_same(a.at(0), r.at(0), exact, slack);
}

Case reduce_case(const std::string& op, Tensor x, const Ints& axes, bool keepdims, bool axes_as_input) {
  Case c{.op = op, .opset = axes_as_input ? 18 : 13};
  if (op == "ReduceSum" && !axes_as_input) c.opset = 11;
  const Ints out = reduced_sizes(x.sizes(), axes, keepdims);
  c.attributes["keepdims"] = int64_t{keepdims ? 1 : 0};
  c.inputs.push_back(std::move(x));
  if (axes_as_input) {
    if (!axes.empty()) c.inputs.push_back(int64s(axes));
  } else if (!axes.empty()) {
    c.attributes["axes"] = axes;
  }
  c.outputs.push_back({DType::Float32, out});
  return c;
}

std::string label_of(const Ints& sizes, const Ints& axes, bool keepdims, bool input) {
  std::string s = "x(";
  for (int64_t v : sizes) s += std::to_string(v) + ",";
  s += ") axes(";
  for (int64_t v : axes) s += std::to_string(v) + ",";
  return s + ")" + (keepdims ? " keepdims" : "") + (input ? " input" : " attribute");
}

struct Shape {
  Ints sizes;
  std::vector<Ints> axes;
};

// Loop shapes: inner reduced (rows), inner kept (columns), both interleaved, trailing axes (oneDNN for
// Sum/Mean), reduce-all split across threads, few long columns split across threads, size-1 dims.
const std::vector<Shape>& shapes() {
  static const std::vector<Shape> all = {
      {{64, 16, 128}, {{2}, {1}, {0}, {0, 2}, {0, 1}, {1, 2}, {}, {-1}, {-3, -1}}},
      {{32, 16, 32, 32}, {{0, 2, 3}, {1}, {2, 3}, {0}, {0, 1, 2, 3}}},
      {{1023, 37}, {{0}, {1}}},
      {{4099, 33}, {{0}}},
      {{4099, 1000}, {{0}}},
      {{3, 1, 5, 1, 7}, {{1, 3}, {0, 2}, {1}, {0, 4}}},
      {{100003}, {{0}}},
      {{2, 50001}, {{1}}},
      {{7, 300, 5, 3}, {{1, 3}, {0, 2}, {1, 2}}},
      {{1, 1}, {{0}, {0, 1}}},
  };
  return all;
}

TEST(CpuReductions, EveryOpShapeAndAxesMatchesReference) {
  std::mt19937 rng(7);
  for (const char* op : kReduceOps) {
    for (const Shape& shape : shapes()) {
      const Tensor x = input_for(rng, op, shape.sizes);
      for (const Ints& axes : shape.axes) {
        for (bool keepdims : {true, false}) {
          for (bool input : {true, false}) {
            expect_agree(reduce_case(op, x, axes, keepdims, input), label_of(shape.sizes, axes, keepdims, input));
          }
        }
      }
    }
  }
}

TEST(CpuReductions, NoopWithEmptyAxesAndEmptyAxesInput) {
  std::mt19937 rng(3);
  for (const char* op : kReduceOps) {
    Case noop = reduce_case(op, input_for(rng, op, {5, 7, 9}), {}, true, true);
    noop.attributes["noop_with_empty_axes"] = int64_t{1};
    noop.outputs[0].sizes = {5, 7, 9};
    expect_agree(noop, "noop_with_empty_axes");
    Case noop_input = noop;
    noop_input.inputs.push_back(Tensor(DType::Int64, {0}));
    expect_agree(noop_input, "noop_with_empty_axes, empty axes input");
    Case all = reduce_case(op, input_for(rng, op, {5, 7, 9}), {}, false, true);
    all.inputs.push_back(Tensor(DType::Int64, {0}));
    expect_agree(all, "empty axes input reduces all");
  }
}

TEST(CpuReductions, AxesInputChangingBetweenRuns) {
  std::mt19937 rng(11);
  // One kernel prepared without keepdims for a (33, 33) output of a (33, 33, 33) input: every axis gives
  // that output, so only the run-time values of axes say which is reduced; the plan follows them.
  for (const char* op : {"ReduceSum", "ReduceLogSumExp"}) {
    Case cube = reduce_case(op, random_tensor(rng, {33, 33, 33}, -1, 1), {0}, false, true);
    Prepared kernel = prepare(cube, "");
    ASSERT_EQ(kernel.implementation, "cpu");
    Prepared reference = prepare(cube, "reference");
    for (const Ints& axes : {Ints{0}, Ints{1}, Ints{2}, Ints{-1}, Ints{1}, Ints{0}}) {
      SCOPED_TRACE(std::string(op) + " axis " + std::to_string(axes[0]));
      cube.inputs[1] = int64s(axes);
      expect_same(run_prepared(*kernel.kernel, cube).at(0), run_prepared(*reference.kernel, cube).at(0), false);
    }
  }
  // Axes whose output sizes do not match the declared output fail at run.
  Case wrong = reduce_case("ReduceSum", random_tensor(rng, {6, 5}, -1, 1), {0}, true, true);
  Prepared k = prepare(wrong, "");
  wrong.inputs[1] = int64s({1});
  EXPECT_THROW(run_prepared(*k.kernel, wrong), Error);
  wrong.inputs[1] = int64s({0, 0});
  EXPECT_THROW(run_prepared(*k.kernel, wrong), Error);
}

TEST(CpuReductions, PrepareErrorsNameTheNode) {
  std::mt19937 rng(5);
  Case repeated = reduce_case("ReduceMax", random_tensor(rng, {4, 5}, -1, 1), {1, -1}, true, false);
  try {
    prepare(repeated, "");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("test_node"), std::string::npos) << e.what();
  }
  Case out_of_range = reduce_case("ReduceMax", random_tensor(rng, {4, 5}, -1, 1), {1}, true, false);
  out_of_range.attributes["axes"] = Ints{2};
  EXPECT_THROW(prepare(out_of_range, ""), Error);
}

TEST(CpuReductions, NanAndInfinity) {
  std::mt19937 rng(13);
  for (const char* op : kReduceOps) {
    for (const Ints& axes : {Ints{0}, Ints{1}, Ints{}}) {
      Tensor x = input_for(rng, op, {67, 45});
      auto v = x.data<float>();
      v[3] = std::numeric_limits<float>::quiet_NaN();                                             // row 0, column 3
      v[45 * 10 + 7] = std::numeric_limits<float>::infinity();                                    // row 10, column 7
      v[45 * 20 + 8] = -std::numeric_limits<float>::infinity();                                   // row 20, column 8
      for (int64_t r = 0; r < 67; ++r) v[45 * r + 44] = -std::numeric_limits<float>::infinity();  // column 44
      expect_agree(reduce_case(op, x, axes, true, true), "special values, axes " + std::to_string(axes.size()));
    }
  }
}

TEST(CpuReductions, TrailingAxesLongRows) {
  // (outer, inner >= 128): oneDNN's reduction for Sum/Mean, our rows for the others.
  std::mt19937 rng(17);
  for (const char* op : kReduceOps) {
    for (const Ints& sizes : {Ints{1024, 256}, Ints{3, 8, 1000}, Ints{1, 200003}}) {
      const Tensor x = input_for(rng, op, sizes);
      Ints axes = {static_cast<int64_t>(sizes.size()) - 1};
      if (sizes.size() == 3) axes = {1, 2};
      expect_agree(reduce_case(op, x, axes, true, true), label_of(sizes, axes, true, true));
    }
  }
}

TEST(CpuReductions, ProductsAndNormsBeyondFloatRangeMidway) {
  // ReduceProd of 2000 values 1.1 then 2000 values 1/1.1 is 1, though 1.1^2000 overflows float; ReduceL2 of
  // values near 1e-25 and 1e25 (their squares leave float range, their norms do not).
  for (const Ints& axes : {Ints{1}, Ints{0}}) {
    const Ints sizes = axes[0] == 1 ? Ints{3, 4000} : Ints{4000, 3};
    Tensor p(DType::Float32, sizes);
    auto pv = p.data<float>();
    for (size_t i = 0; i < pv.size(); ++i) {
      const size_t along = axes[0] == 1 ? i % 4000 : i / 3;
      pv[i] = along < 2000 ? 1.1f : 1.0f / 1.1f;
    }
    expect_agree(reduce_case("ReduceProd", p, axes, true, true), "product overflowing float midway");
    for (float magnitude : {1e-25f, 1e25f}) {
      std::mt19937 rng(23);
      Tensor x = random_tensor(rng, {300, 37}, -1, 1);
      for (float& v : x.data<float>()) v *= magnitude;
      Case c = reduce_case("ReduceL2", x, axes, true, true);
      Prepared ours = prepare(c, "");
      Prepared reference = prepare(c, "reference");
      const Tensor a = run_prepared(*ours.kernel, c).at(0), r = run_prepared(*reference.kernel, c).at(0);
      for (int64_t i = 0; i < r.numel(); ++i) {
        ASSERT_NEAR(a.data<float>()[i] / magnitude, r.data<float>()[i] / magnitude, 1e-5) << magnitude << " " << i;
      }
    }
  }
}

Case arg_case(const std::string& op, Tensor x, int64_t axis, bool keepdims, bool last) {
  Case c{.op = op, .opset = 13};
  Ints out = x.sizes();
  const auto rank = static_cast<int64_t>(out.size());
  const int64_t a = axis < 0 ? axis + rank : axis;
  if (keepdims) {
    out[a] = 1;
  } else {
    out.erase(out.begin() + a);
  }
  c.attributes["axis"] = axis;
  c.attributes["keepdims"] = int64_t{keepdims ? 1 : 0};
  c.attributes["select_last_index"] = int64_t{last ? 1 : 0};
  c.inputs.push_back(std::move(x));
  c.outputs.push_back({DType::Int64, out});
  return c;
}

TEST(CpuReductions, ArgMaxArgMinMatchReference) {
  std::mt19937 rng(19);
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (const Ints& sizes : {Ints{64, 16, 128}, Ints{33, 1, 301}, Ints{1000, 3}, Ints{5, 70001}, Ints{17}}) {
      Tensor x = random_tensor(rng, sizes, -2, 2);
      Tensor ties = random_tensor(rng, sizes, 0, 4);
      for (float& v : ties.data<float>()) v = std::floor(v);  // many equal values
      Tensor nans = random_tensor(rng, sizes, -2, 2);
      auto nv = nans.data<float>();
      for (size_t i = 0; i < nv.size(); i += 7) nv[i] = std::numeric_limits<float>::quiet_NaN();
      const auto rank = static_cast<int64_t>(sizes.size());
      for (int64_t axis = -rank; axis < rank; ++axis) {
        for (bool keepdims : {true, false}) {
          for (bool last : {false, true}) {
            const std::string label = "axis " + std::to_string(axis) + (keepdims ? " keepdims" : "") +
                                      (last ? " select_last_index" : "") + " rank " + std::to_string(rank);
            expect_agree(arg_case(op, x, axis, keepdims, last), label);
            expect_agree(arg_case(op, ties, axis, keepdims, last), label + " ties");
            expect_agree(arg_case(op, nans, axis, keepdims, last), label + " NaN");
          }
        }
      }
    }
  }
}

TEST(CpuReductions, RegistryPicksCpuForFloat32Only) {
  for (const char* op : kReduceOps) {
    const KernelEntry* entry = KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Float32);
    ASSERT_NE(entry, nullptr) << op;
    EXPECT_EQ(entry->implementation, "cpu") << op;
    EXPECT_EQ(KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Int64)->implementation, "reference");
  }
  for (const char* op : {"ArgMax", "ArgMin"}) {
    EXPECT_EQ(KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Float32)->implementation, "cpu") << op;
  }
}

TEST(CpuReductions, ZeroSizeFallsBackToReference) {
  for (const char* op : kReduceOps) {
    Case c = reduce_case(op, Tensor(DType::Float32, {0, 3}), {0}, true, true);
    Prepared ours = prepare(c, "");
    Prepared reference = prepare(c, "reference");
    expect_same(run_prepared(*ours.kernel, c).at(0), run_prepared(*reference.kernel, c).at(0), false);
  }
}

}  // namespace
