// The elementwise, comparison/logic, cast, reduction and softmax reference kernels on hand-computed
// cases: broadcasting (scalars, size-1 dims, rank promotion), float32 and float64, integer semantics,
// opset forms (attributes vs inputs), and onnxtrain::Error for what the kernels do not support.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/kernel.h"
#include "tests/reference_kernel_call.h"

using namespace onnxtrain;

namespace {

template <typename T>
Tensor tensor(DType dtype, std::vector<int64_t> sizes, const std::vector<T>& values) {
  Tensor t(dtype, std::move(sizes));
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  for (size_t i = 0; i < values.size(); ++i) t.data<T>()[i] = values[i];
  return t;
}
Tensor f32(std::vector<int64_t> s, const std::vector<float>& v) { return tensor(DType::Float32, s, v); }
Tensor f64(std::vector<int64_t> s, const std::vector<double>& v) { return tensor(DType::Float64, s, v); }
Tensor i32(std::vector<int64_t> s, const std::vector<int32_t>& v) { return tensor(DType::Int32, s, v); }
Tensor i64(std::vector<int64_t> s, const std::vector<int64_t>& v) { return tensor(DType::Int64, s, v); }
Tensor u8(std::vector<int64_t> s, const std::vector<uint8_t>& v) { return tensor(DType::UInt8, s, v); }
Tensor b8(std::vector<int64_t> s, const std::vector<uint8_t>& v) { return tensor(DType::Bool, s, v); }
Tensor f16(std::vector<int64_t> s, const std::vector<uint16_t>& bits) { return tensor(DType::Float16, s, bits); }

using namespace testing_support;

template <typename T>
void expect_near(const std::vector<T>& got, const std::vector<double>& want, double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tolerance) << "element " << i;
}

TEST(ReferenceElementwise, EveryOpIsRegistered) {
  for (const char* op : {"Add",
                         "Sub",
                         "Mul",
                         "Div",
                         "Pow",
                         "Min",
                         "Max",
                         "Sum",
                         "Mean",
                         "Relu",
                         "Sigmoid",
                         "Tanh",
                         "Erf",
                         "Sqrt",
                         "Exp",
                         "Log",
                         "Neg",
                         "Abs",
                         "Reciprocal",
                         "Sin",
                         "Cos",
                         "Ceil",
                         "Softplus",
                         "LeakyRelu",
                         "Elu",
                         "Selu",
                         "HardSigmoid",
                         "HardSwish",
                         "Gelu",
                         "Clip",
                         "PRelu",
                         "Equal",
                         "Less",
                         "LessOrEqual",
                         "Greater",
                         "GreaterOrEqual",
                         "Cast",
                         "CastLike",
                         "ReduceMean",
                         "ReduceSum",
                         "ReduceMax",
                         "ReduceMin",
                         "ReduceProd",
                         "ReduceL2",
                         "ReduceSumSquare",
                         "ReduceLogSumExp",
                         "ArgMax",
                         "ArgMin",
                         "Softmax",
                         "LogSoftmax"}) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      EXPECT_NE(KernelRegistry::builtin().find("", op, DeviceKind::Cpu, dtype, "reference"), nullptr) << op;
    }
  }
  for (const char* op : {"Not", "And", "Or", "Xor", "Where"}) {
    EXPECT_NE(KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Bool, "reference"), nullptr) << op;
  }
}

TEST(ReferenceElementwise, BinaryBroadcastingPatterns) {
  const Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  // Row vector, scalar, size-1 dims on both sides, rank promotion.
  EXPECT_EQ(values<float>(run1({"Add", 14, {}, {a, f32({3}, {10, 20, 30})}, {{DType::Float32, {2, 3}}}})),
            (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(values<float>(run1({"Mul", 14, {}, {f32({}, {2}), a}, {{DType::Float32, {2, 3}}}})),
            (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ(
      values<float>(run1({"Sub", 14, {}, {f32({2, 1}, {1, 2}), f32({1, 3}, {1, 2, 3})}, {{DType::Float32, {2, 3}}}})),
      (std::vector<float>{0, -1, -2, 1, 0, -1}));
  EXPECT_EQ(values<float>(
                run1({"Add", 14, {}, {f32({3}, {1, 2, 3}), f32({2, 1, 1}, {10, 20})}, {{DType::Float32, {2, 1, 3}}}})),
            (std::vector<float>{11, 12, 13, 21, 22, 23}));
  expect_near(values<double>(run1({"Div", 14, {}, {f64({2}, {1, 3}), f64({2}, {4, 7})}, {{DType::Float64, {2}}}})),
              {0.25, 3.0 / 7.0}, 1e-15);
}

TEST(ReferenceElementwise, IntegerArithmetic) {
  EXPECT_EQ(values<int32_t>(
                run1({"Div", 14, {}, {i32({4}, {7, -7, 7, -7}), i32({4}, {2, 2, -2, -2})}, {{DType::Int32, {4}}}})),
            (std::vector<int32_t>{3, -3, -3, 3}));  // truncates toward zero
  EXPECT_EQ(values<int64_t>(run1({"Mul", 14, {}, {i64({2}, {3, -4}), i64({}, {5})}, {{DType::Int64, {2}}}})),
            (std::vector<int64_t>{15, -20}));
  EXPECT_EQ(values<uint8_t>(run1({"Add", 14, {}, {u8({2}, {250, 1}), u8({2}, {10, 2})}, {{DType::UInt8, {2}}}})),
            (std::vector<uint8_t>{4, 3}));  // wraps
  EXPECT_NE(
      error_of({"Div", 14, {}, {i32({2}, {1, 2}), i32({2}, {1, 0})}, {{DType::Int32, {2}}}}).find("division by zero"),
      std::string::npos);
}

TEST(ReferenceElementwise, ModSignConventions) {
  const Tensor a = i64({4}, {-4, 7, 5, INT64_MIN}), b = i64({4}, {3, -3, 2, -1});
  EXPECT_EQ(values<int64_t>(run1({"Mod", 13, {}, {a, b}, {{DType::Int64, {4}}}})),
            (std::vector<int64_t>{2, -2, 1, 0}));  // the divisor's sign; INT64_MIN % -1 does not trap
  EXPECT_EQ(values<int64_t>(run1({"Mod", 13, {{"fmod", int64_t{1}}}, {a, b}, {{DType::Int64, {4}}}})),
            (std::vector<int64_t>{-1, 1, 1, 0}));  // the dividend's
  expect_near(
      values<float>(
          run1({"Mod", 13, {{"fmod", int64_t{1}}}, {f32({2}, {-5.5f, 5.5f}), f32({}, {2})}, {{DType::Float32, {2}}}})),
      {-1.5, 1.5}, 0);
  EXPECT_NE(error_of({"Mod", 13, {}, {i64({1}, {1}), i64({1}, {0})}, {{DType::Int64, {1}}}}).find("modulo by zero"),
            std::string::npos);
  EXPECT_NE(error_of({"Mod", 13, {}, {f32({1}, {1}), f32({1}, {2})}, {{DType::Float32, {1}}}}).find("fmod=1"),
            std::string::npos);
}

TEST(ReferenceElementwise, PowWithItsOwnExponentType) {
  expect_near(
      values<float>(run1({"Pow", 15, {}, {f32({3}, {2, 4, 9}), f32({3}, {3, 0.5f, -1})}, {{DType::Float32, {3}}}})),
      {8, 2, 1.0 / 9}, 1e-6);
  expect_near(values<double>(run1({"Pow", 15, {}, {f64({2}, {1.5, -2}), i64({}, {2})}, {{DType::Float64, {2}}}})),
              {2.25, 4}, 0);
  EXPECT_EQ(values<int32_t>(run1({"Pow", 15, {}, {i32({3}, {1, 2, 3}), f32({3}, {4, 5, 6})}, {{DType::Int32, {3}}}})),
            (std::vector<int32_t>{1, 32, 729}));
  // Exact for integers beyond double's 53 bits.
  EXPECT_EQ(values<int64_t>(run1({"Pow", 15, {}, {i64({1}, {3}), i64({1}, {39})}, {{DType::Int64, {1}}}})),
            (std::vector<int64_t>{4052555153018976267}));
  EXPECT_NE(error_of({"Pow", 7, {}, {f32({1}, {2}), i64({1}, {2})}, {{DType::Float32, {1}}}}).find("opset 12"),
            std::string::npos);
}

TEST(ReferenceElementwise, VariadicMinMaxSumMean) {
  const Tensor a = f32({2, 2}, {1, 5, 3, 7}), b = f32({2}, {4, 2}), c = f32({}, {3});
  const TensorDesc out{DType::Float32, {2, 2}};
  EXPECT_EQ(values<float>(run1({"Max", 13, {}, {a, b, c}, {out}})), (std::vector<float>{4, 5, 4, 7}));
  EXPECT_EQ(values<float>(run1({"Min", 13, {}, {a, b, c}, {out}})), (std::vector<float>{1, 2, 3, 2}));
  EXPECT_EQ(values<float>(run1({"Sum", 13, {}, {a, b, c}, {out}})), (std::vector<float>{8, 10, 10, 12}));
  expect_near(values<double>(run1({"Mean", 13, {}, {f64({2}, {1, 2}), f64({2}, {2, 5})}, {{DType::Float64, {2}}}})),
              {1.5, 3.5}, 0);
  EXPECT_EQ(values<float>(run1({"Sum", 13, {}, {b}, {{DType::Float32, {2}}}})), (std::vector<float>{4, 2}));
  EXPECT_EQ(values<int32_t>(run1({"Max", 13, {}, {i32({3}, {-1, 5, 2}), i32({3}, {0, -5, 9})}, {{DType::Int32, {3}}}})),
            (std::vector<int32_t>{0, 5, 9}));
  EXPECT_TRUE(
      std::isnan(values<float>(run1({"Min", 13, {}, {f32({1}, {NAN}), f32({1}, {1})}, {{DType::Float32, {1}}}}))[0]));
  // float16 Max picks an input exactly: 1.0 (0x3c00) vs -2.0 (0xc000).
  EXPECT_EQ(values<uint16_t>(
                run1({"Max", 13, {}, {f16({2}, {0x3c00, 0xc000}), f16({1}, {0x3800})}, {{DType::Float16, {2}}}})),
            (std::vector<uint16_t>{0x3c00, 0x3800}));
}

TEST(ReferenceElementwise, BinaryErrors) {
  const TensorDesc out{DType::Float32, {2}};
  EXPECT_NE(error_of({"Add", 14, {}, {f32({2}, {1, 2}), f64({2}, {1, 2})}, {out}}).find("dtype"), std::string::npos);
  EXPECT_NE(error_of({"Add", 14, {}, {f32({2}, {1, 2}), f32({3}, {1, 2, 3})}, {out}}).find("do not broadcast"),
            std::string::npos);
  EXPECT_NE(error_of({"Add", 14, {}, {f32({2}, {1, 2}), f32({2}, {1, 2})}, {{DType::Float32, {3}}}}).find("output 0"),
            std::string::npos);
  error_of({"Sum", 13, {}, {i32({2}, {1, 2})}, {{DType::Int32, {2}}}});           // no kernel for int32 Sum
  error_of({"Add", 14, {}, {b8({1}, {1}), b8({1}, {0})}, {{DType::Bool, {1}}}});  // nor for bool Add
}

TEST(ReferenceElementwise, UnaryMath) {
  const TensorDesc out3{DType::Float64, {3}};
  expect_near(values<double>(run1({"Relu", 14, {}, {f64({3}, {-1, 0, 2})}, {out3}})), {0, 0, 2}, 0);
  EXPECT_EQ(values<int32_t>(run1({"Relu", 14, {}, {i32({2}, {-3, 4})}, {{DType::Int32, {2}}}})),
            (std::vector<int32_t>{0, 4}));
  expect_near(values<double>(run1({"Sigmoid", 13, {}, {f64({3}, {0, -800, 2})}, {out3}})),
              {0.5, 0, 1 / (1 + std::exp(-2.0))}, 1e-15);
  expect_near(values<float>(run1({"Tanh", 13, {}, {f32({2}, {0, 1})}, {{DType::Float32, {2}}}})), {0, std::tanh(1.0)},
              1e-6);
  expect_near(values<double>(run1({"Erf", 13, {}, {f64({3}, {0, 1, -1})}, {out3}})),
              {0, 0.8427007929497149, -0.8427007929497149}, 1e-15);
  expect_near(values<double>(run1({"Sqrt", 13, {}, {f64({3}, {4, 2, 0})}, {out3}})), {2, std::sqrt(2.0), 0}, 0);
  expect_near(values<double>(run1({"Exp", 13, {}, {f64({3}, {0, 1, -1})}, {out3}})), {1, M_E, 1 / M_E}, 1e-15);
  expect_near(values<double>(run1({"Log", 13, {}, {f64({3}, {1, M_E, 0.5})}, {out3}})), {0, 1, -M_LN2}, 1e-15);
  expect_near(values<double>(run1({"Reciprocal", 13, {}, {f64({3}, {2, -4, 0.5})}, {out3}})), {0.5, -0.25, 2}, 0);
  expect_near(values<double>(run1({"Sin", 7, {}, {f64({3}, {0, M_PI / 2, -M_PI / 6})}, {out3}})), {0, 1, -0.5}, 1e-15);
  expect_near(values<double>(run1({"Cos", 7, {}, {f64({3}, {0, M_PI, M_PI / 3})}, {out3}})), {1, -1, 0.5}, 1e-15);
  expect_near(values<double>(run1({"Ceil", 13, {}, {f64({3}, {1.2, -1.5, 3})}, {out3}})), {2, -1, 3}, 0);
  expect_near(values<double>(run1({"Floor", 13, {}, {f64({3}, {1.2, -1.5, 3})}, {out3}})), {1, -2, 3}, 0);
  EXPECT_EQ(values<int64_t>(run1({"Neg", 13, {}, {i64({2}, {3, -4})}, {{DType::Int64, {2}}}})),
            (std::vector<int64_t>{-3, 4}));
  EXPECT_EQ(values<int32_t>(run1({"Abs", 13, {}, {i32({3}, {-3, 4, 0})}, {{DType::Int32, {3}}}})),
            (std::vector<int32_t>{3, 4, 0}));
  expect_near(values<double>(run1({"Abs", 13, {}, {f64({2}, {-1.5, 2})}, {{DType::Float64, {2}}}})), {1.5, 2}, 0);
}

TEST(ReferenceElementwise, Activations) {
  const TensorDesc out{DType::Float64, {3}};
  const Tensor x = f64({3}, {-2, 0, 3});
  expect_near(values<double>(run1({"Softplus", 13, {}, {f64({3}, {0, 100, -100})}, {out}})),
              {M_LN2, 100, std::exp(-100.0)}, 1e-15);
  expect_near(values<double>(run1({"LeakyRelu", 16, {}, {x}, {out}})), {-0.02, 0, 3}, 1e-15);
  expect_near(values<double>(run1({"LeakyRelu", 16, {{"alpha", 0.5}}, {x}, {out}})), {-1, 0, 3}, 1e-15);
  expect_near(values<double>(run1({"Elu", 6, {{"alpha", 2.0}}, {x}, {out}})), {2 * (std::exp(-2.0) - 1), 0, 3}, 1e-15);
  const double alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875;
  expect_near(values<double>(run1({"Selu", 6, {}, {x}, {out}})), {gamma * alpha * (std::exp(-2.0) - 1), 0, gamma * 3},
              1e-15);
  expect_near(values<double>(run1({"HardSigmoid", 6, {}, {x}, {out}})), {0.1, 0.5, 1}, 1e-15);
  expect_near(values<double>(run1({"HardSigmoid", 6, {{"alpha", 0.5}, {"beta", 0.25}}, {x}, {out}})), {0, 0.25, 1},
              1e-15);
  expect_near(values<double>(run1({"HardSwish", 14, {}, {f64({3}, {-4, 1, 4})}, {out}})), {0, 1 * (1.0 / 6 + 0.5), 4},
              1e-15);
  expect_near(values<double>(run1({"Gelu", 20, {}, {f64({3}, {-1, 0, 1})}, {out}})),
              {-0.15865525393145707, 0, 0.8413447460685429}, 1e-15);
  expect_near(values<float>(
                  run1({"Gelu", 20, {{"approximate", std::string("tanh")}}, {f32({1}, {1})}, {{DType::Float32, {1}}}})),
              {0.8411919906082768}, 1e-6);
}

TEST(ReferenceElementwise, ClipAttributesAndInputs) {
  const Tensor x = f32({4}, {-2, 0.5f, 3, NAN});
  const TensorDesc out{DType::Float32, {4}};
  auto clipped = values<float>(run1({"Clip", 6, {{"min", -1.0}, {"max", 1.0}}, {x}, {out}}));
  EXPECT_EQ(std::vector<float>(clipped.begin(), clipped.begin() + 3), (std::vector<float>{-1, 0.5f, 1}));
  EXPECT_TRUE(std::isnan(clipped[3]));
  clipped = values<float>(run1({"Clip", 13, {}, {x, f32({}, {0}), Tensor()}, {out}}));  // min only
  EXPECT_EQ(std::vector<float>(clipped.begin(), clipped.begin() + 3), (std::vector<float>{0, 0.5f, 3}));
  clipped = values<float>(run1({"Clip", 13, {}, {x, Tensor(), f32({1}, {1})}, {out}}));  // max only, shape (1)
  EXPECT_EQ(std::vector<float>(clipped.begin(), clipped.begin() + 3), (std::vector<float>{-2, 0.5f, 1}));
  EXPECT_EQ(values<int32_t>(
                run1({"Clip", 13, {}, {i32({3}, {-5, 2, 9}), i32({}, {0}), i32({}, {4})}, {{DType::Int32, {3}}}})),
            (std::vector<int32_t>{0, 2, 4}));
  // min > max gives max everywhere.
  EXPECT_EQ(
      values<int32_t>(run1({"Clip", 13, {}, {i32({2}, {-5, 9}), i32({}, {5}), i32({}, {1})}, {{DType::Int32, {2}}}})),
      (std::vector<int32_t>{1, 1}));
  EXPECT_NE(error_of({"Clip", 13, {}, {x, f32({2}, {0, 1})}, {out}}).find("scalar"), std::string::npos);
  error_of({"Clip", 6, {}, {i32({1}, {1})}, {{DType::Int32, {1}}}});  // integers only from opset 11 on
}

TEST(ReferenceElementwise, PReluSlopeBroadcasts) {
  const Tensor x = f32({1, 2, 2}, {-1, 2, -3, 4});
  EXPECT_EQ(values<float>(run1({"PRelu", 16, {}, {x, f32({2, 1}, {0.5f, 0.25f})}, {{DType::Float32, {1, 2, 2}}}})),
            (std::vector<float>{-0.5f, 2, -0.75f, 4}));
  EXPECT_EQ(values<float>(run1({"PRelu", 16, {}, {x, f32({}, {0.1f})}, {{DType::Float32, {1, 2, 2}}}})),
            (std::vector<float>{-0.1f, 2, -0.3f, 4}));
  EXPECT_NE(error_of({"PRelu", 16, {}, {f32({2}, {1, 2}), f32({2, 2}, {1, 2, 3, 4})}, {{DType::Float32, {2}}}})
                .find("does not broadcast onto X"),
            std::string::npos);
}

TEST(ReferenceElementwise, UnaryErrors) {
  // The factory itself rejects a dtype its entry does not list.
  const KernelEntry* sigmoid =
      KernelRegistry::builtin().find("", "Sigmoid", DeviceKind::Cpu, DType::Float32, "reference");
  ASSERT_NE(sigmoid, nullptr);
  KernelSpec spec{.op_type = "Sigmoid", .opset = 13, .inputs = {{DType::Int32, {1}}}, .outputs = {{DType::Int32, {1}}}};
  EXPECT_THROW(sigmoid->prepare(spec), Error);
  error_of({"Sigmoid", 13, {}, {i32({1}, {1})}, {{DType::Int32, {1}}}});
  error_of({"Relu", 14, {}, {u8({1}, {1})}, {{DType::UInt8, {1}}}});
  EXPECT_NE(error_of({"Gelu", 20, {{"approximate", std::string("erf")}}, {f32({1}, {1})}, {{DType::Float32, {1}}}})
                .find("approximate"),
            std::string::npos);
  EXPECT_NE(error_of({"Exp", 13, {}, {f32({2}, {1, 2})}, {{DType::Float64, {2}}}}).find("output 0"), std::string::npos);
}

TEST(ReferenceElementwise, ComparisonsAndLogic) {
  const TensorDesc out{DType::Bool, {2, 2}};
  EXPECT_EQ(values<uint8_t>(run1({"Equal", 13, {}, {i64({2, 2}, {1, 2, 3, 4}), i64({2}, {1, 4})}, {out}})),
            (std::vector<uint8_t>{1, 0, 0, 1}));
  EXPECT_EQ(values<uint8_t>(run1({"Less", 13, {}, {f32({2, 2}, {1, 2, 3, 4}), f32({}, {2.5f})}, {out}})),
            (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(values<uint8_t>(run1({"LessOrEqual", 16, {}, {f64({2, 1}, {1, 3}), f64({1, 2}, {1, 2})}, {out}})),
            (std::vector<uint8_t>{1, 1, 0, 0}));
  EXPECT_EQ(values<uint8_t>(run1({"Greater", 13, {}, {i32({2}, {1, 5}), i32({2}, {1, 2})}, {{DType::Bool, {2}}}})),
            (std::vector<uint8_t>{0, 1}));
  EXPECT_EQ(
      values<uint8_t>(run1({"GreaterOrEqual", 16, {}, {i32({2}, {1, 5}), i32({2}, {1, 6})}, {{DType::Bool, {2}}}})),
      (std::vector<uint8_t>{1, 0}));
  EXPECT_EQ(values<uint8_t>(run1({"Equal", 13, {}, {b8({2}, {1, 0}), b8({2}, {1, 1})}, {{DType::Bool, {2}}}})),
            (std::vector<uint8_t>{1, 0}));
  const Tensor p = b8({2, 2}, {0, 0, 1, 1}), q = b8({2}, {0, 1});
  EXPECT_EQ(values<uint8_t>(run1({"And", 7, {}, {p, q}, {out}})), (std::vector<uint8_t>{0, 0, 0, 1}));
  EXPECT_EQ(values<uint8_t>(run1({"Or", 7, {}, {p, q}, {out}})), (std::vector<uint8_t>{0, 1, 1, 1}));
  EXPECT_EQ(values<uint8_t>(run1({"Xor", 7, {}, {p, q}, {out}})), (std::vector<uint8_t>{0, 1, 1, 0}));
  EXPECT_EQ(values<uint8_t>(run1({"Not", 1, {}, {q}, {{DType::Bool, {2}}}})), (std::vector<uint8_t>{1, 0}));
  error_of({"Less", 13, {}, {b8({1}, {1}), b8({1}, {0})}, {{DType::Bool, {1}}}});
  error_of({"And", 7, {}, {f32({1}, {1}), f32({1}, {0})}, {{DType::Bool, {1}}}});
  error_of({"Equal", 13, {}, {f32({1}, {1}), i32({1}, {1})}, {{DType::Bool, {1}}}});
}

TEST(ReferenceElementwise, WhereBroadcastsAnyDtype) {
  const Tensor condition = b8({2, 1}, {1, 0});
  EXPECT_EQ(values<float>(run1(
                {"Where", 16, {}, {condition, f32({1, 3}, {1, 2, 3}), f32({}, {-1})}, {{DType::Float32, {2, 3}}}})),
            (std::vector<float>{1, 2, 3, -1, -1, -1}));
  EXPECT_EQ(
      values<int64_t>(run1(
          {"Where", 16, {}, {b8({3}, {0, 1, 0}), i64({3}, {1, 2, 3}), i64({3}, {4, 5, 6})}, {{DType::Int64, {3}}}})),
      (std::vector<int64_t>{4, 2, 6}));
  EXPECT_EQ(values<uint16_t>(run1(
                {"Where", 16, {}, {b8({2}, {1, 0}), f16({2}, {1, 2}), f16({2}, {3, 4})}, {{DType::Float16, {2}}}})),
            (std::vector<uint16_t>{1, 4}));
  error_of({"Where", 16, {}, {f32({1}, {1}), f32({1}, {1}), f32({1}, {2})}, {{DType::Float32, {1}}}});
  error_of({"Where", 16, {}, {b8({1}, {1}), f32({1}, {1}), f64({1}, {2})}, {{DType::Float32, {1}}}});
}

TEST(ReferenceElementwise, CastBetweenNumericTypes) {
  auto cast = [](const Tensor& x, int64_t onnx_code, DType to) {
    return run1({"Cast", 13, {{"to", onnx_code}}, {x}, {{to, x.sizes()}}});
  };
  const Tensor x = f32({5}, {1.7f, -1.7f, 2.5f, -0.5f, 300});
  EXPECT_EQ(values<int32_t>(cast(x, 6, DType::Int32)), (std::vector<int32_t>{1, -1, 2, 0, 300}));
  EXPECT_EQ(values<int64_t>(cast(f64({3}, {NAN, 1e30, -1e30}), 7, DType::Int64)),
            (std::vector<int64_t>{0, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(values<uint8_t>(cast(f32({3}, {0, 0.5f, NAN}), 9, DType::Bool)), (std::vector<uint8_t>{0, 1, 1}));
  EXPECT_EQ(values<float>(cast(b8({2}, {1, 0}), 1, DType::Float32)), (std::vector<float>{1, 0}));
  EXPECT_EQ(values<double>(cast(i64({2}, {-3, 9007199254740993}), 11, DType::Float64)),
            (std::vector<double>{-3, 9007199254740992.0}));
  EXPECT_EQ(values<int8_t>(cast(i32({2}, {200, -1}), 3, DType::Int8)), (std::vector<int8_t>{-56, -1}));  // wraps
  // Cast at opset 1 names the type; CastLike takes the dtype of its second input.
  EXPECT_EQ(values<int64_t>(run1({"Cast", 1, {{"to", std::string("INT64")}}, {x}, {{DType::Int64, {5}}}})),
            (std::vector<int64_t>{1, -1, 2, 0, 300}));
  EXPECT_EQ(values<int32_t>(run1({"CastLike", 15, {}, {f64({2}, {-2.9, 2.9}), i32({1}, {0})}, {{DType::Int32, {2}}}})),
            (std::vector<int32_t>{-2, 2}));
}

TEST(ReferenceElementwise, CastToFloat16RoundsToNearestEven) {
  const double tie_up = 1 + 0x1p-11 + 0x1p-30;  // just above a tie: through float32 it would round down
  const Tensor x = f64(
      {11}, {1, 65504, 65520, 1 + 0x1p-11, 1 + 3 * 0x1p-11, tie_up, 0x1p-24, 0x1p-25, 3 * 0x1p-25, -INFINITY, 1.0 / 3});
  EXPECT_EQ(
      values<uint16_t>(run1({"Cast", 13, {{"to", int64_t{10}}}, {x}, {{DType::Float16, {11}}}})),
      (std::vector<uint16_t>{0x3c00, 0x7bff, 0x7c00, 0x3c00, 0x3c02, 0x3c01, 0x0001, 0x0000, 0x0002, 0xfc00, 0x3555}));
  EXPECT_TRUE(std::isnan(
      values<float>(run1({"Cast", 13, {{"to", int64_t{1}}}, {f16({1}, {0x7e00})}, {{DType::Float32, {1}}}}))[0]));
  EXPECT_EQ(
      values<float>(run1(
          {"Cast", 13, {{"to", int64_t{1}}}, {f16({4}, {0x3555, 0x0001, 0xfc00, 0xc000})}, {{DType::Float32, {4}}}})),
      (std::vector<float>{0.333251953125f, 0x1p-24f, -INFINITY, -2}));
  // bfloat16 truncates (ONNX 1.12's reference): 1.00390625 is 0x3f808000.
  const Tensor bf = run1({"Cast", 13, {{"to", int64_t{16}}}, {f32({2}, {1.00390625f, -2})}, {{DType::BFloat16, {2}}}});
  EXPECT_EQ(values<uint16_t>(bf), (std::vector<uint16_t>{0x3f80, 0xc000}));
  EXPECT_EQ(values<float>(run1({"Cast", 13, {{"to", int64_t{1}}}, {bf}, {{DType::Float32, {2}}}})),
            (std::vector<float>{1, -2}));
}

TEST(ReferenceElementwise, CastErrors) {
  const Tensor x = f32({1}, {1});
  EXPECT_NE(error_of({"Cast", 13, {{"to", int64_t{8}}}, {x}, {{DType::String, {1}}}}).find("string"),
            std::string::npos);
  EXPECT_NE(error_of({"Cast", 13, {}, {x}, {{DType::Int32, {1}}}}).find("'to'"), std::string::npos);
  EXPECT_NE(error_of({"Cast", 13, {{"to", int64_t{6}}}, {x}, {{DType::Int64, {1}}}}).find("output 0"),
            std::string::npos);
}

TEST(ReferenceReduce, AxesAsInputAndKeepdims) {
  const Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(values<float>(run1({"ReduceSum", 13, {}, {x, i64({1}, {1})}, {{DType::Float32, {2, 1}}}})),
            (std::vector<float>{6, 15}));
  EXPECT_EQ(
      values<float>(run1({"ReduceSum", 13, {{"keepdims", int64_t{0}}}, {x, i64({1}, {-2})}, {{DType::Float32, {3}}}})),
      (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(values<float>(run1({"ReduceSum", 13, {}, {x}, {{DType::Float32, {1, 1}}}})), (std::vector<float>{21}));
  EXPECT_EQ(values<float>(run1({"ReduceSum", 13, {}, {x, i64({0}, {})}, {{DType::Float32, {1, 1}}}})),
            (std::vector<float>{21}));
  EXPECT_EQ(
      values<float>(run1({"ReduceSum", 13, {{"noop_with_empty_axes", int64_t{1}}}, {x}, {{DType::Float32, {2, 3}}}})),
      values<float>(x));
  expect_near(values<double>(run1({"ReduceMean",
                                   18,
                                   {{"keepdims", int64_t{0}}},
                                   {f64({2, 2}, {1, 2, 3, 5}), i64({2}, {0, 1})},
                                   {{DType::Float64, {}}}})),
              {2.75}, 0);
  // The axes input's values disagree with the declared output: an error at run time.
  EXPECT_NE(error_of({"ReduceSum", 13, {}, {x, i64({1}, {0})}, {{DType::Float32, {2, 1}}}}).find("output"),
            std::string::npos);
}

TEST(ReferenceReduce, EveryKindWithAxesAttribute) {
  const Tensor x = f64({2, 2}, {3, -4, 1, 2});
  const TensorDesc rows{DType::Float64, {2, 1}};
  const Attributes axis1{{"axes", std::vector<int64_t>{1}}};
  expect_near(values<double>(run1({"ReduceMean", 13, axis1, {x}, {rows}})), {-0.5, 1.5}, 0);
  expect_near(values<double>(run1({"ReduceMax", 13, axis1, {x}, {rows}})), {3, 2}, 0);
  expect_near(values<double>(run1({"ReduceMin", 13, axis1, {x}, {rows}})), {-4, 1}, 0);
  expect_near(values<double>(run1({"ReduceProd", 13, axis1, {x}, {rows}})), {-12, 2}, 0);
  expect_near(values<double>(run1({"ReduceL2", 13, axis1, {x}, {rows}})), {5, std::sqrt(5.0)}, 1e-15);
  expect_near(values<double>(run1({"ReduceSumSquare", 13, axis1, {x}, {rows}})), {25, 5}, 0);
  expect_near(values<double>(run1({"ReduceLogSumExp", 13, axis1, {x}, {rows}})),
              {std::log(std::exp(3.0) + std::exp(-4.0)), std::log(std::exp(1.0) + std::exp(2.0))}, 1e-14);
  // Large values do not overflow.
  expect_near(values<float>(run1({"ReduceLogSumExp", 13, {}, {f32({2}, {1000, 1000})}, {{DType::Float32, {1}}}})),
              {1000 + M_LN2}, 1e-3);
  expect_near(values<double>(run1({"ReduceMean",
                                   13,
                                   {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}},
                                   {x},
                                   {{DType::Float64, {2}}}})),
              {2, -1}, 0);
}

TEST(ReferenceReduce, IntegersAndEmptyReductions) {
  EXPECT_EQ(values<int32_t>(run1({"ReduceMean", 13, {}, {i32({2}, {1, 2})}, {{DType::Int32, {1}}}})),
            (std::vector<int32_t>{1}));  // integer division
  EXPECT_EQ(values<int64_t>(run1({"ReduceMax", 13, {}, {i64({3}, {-5, 7, 2})}, {{DType::Int64, {1}}}})),
            (std::vector<int64_t>{7}));
  const Tensor empty(DType::Float32, {2, 0});
  const TensorDesc out{DType::Float32, {2, 1}};
  EXPECT_EQ(values<float>(run1({"ReduceSum", 13, {}, {empty, i64({1}, {1})}, {out}})), (std::vector<float>{0, 0}));
  EXPECT_EQ(values<float>(run1({"ReduceMax", 13, {{"axes", std::vector<int64_t>{1}}}, {empty}, {out}})),
            (std::vector<float>{-INFINITY, -INFINITY}));
  EXPECT_EQ(values<float>(run1({"ReduceProd", 13, {{"axes", std::vector<int64_t>{1}}}, {empty}, {out}})),
            (std::vector<float>{1, 1}));
}

TEST(ReferenceReduce, Errors) {
  const Tensor x = f32({2, 2}, {1, 2, 3, 4});
  const TensorDesc out{DType::Float32, {2, 1}};
  EXPECT_NE(error_of({"ReduceMean", 18, {{"axes", std::vector<int64_t>{1}}}, {x}, {out}}).find("not an attribute"),
            std::string::npos);
  EXPECT_NE(error_of({"ReduceMean", 13, {{"axes", std::vector<int64_t>{2}}}, {x}, {out}}).find("out of range"),
            std::string::npos);
  EXPECT_NE(error_of({"ReduceMean", 13, {{"axes", std::vector<int64_t>{1, -1}}}, {x}, {out}}).find("repeated"),
            std::string::npos);
  error_of({"ReduceSum", 13, {}, {b8({1}, {1})}, {{DType::Bool, {1}}}});
}

TEST(ReferenceReduce, ArgMaxArgMin) {
  const Tensor x = f32({2, 3}, {1, 3, 3, 5, 2, 5});
  EXPECT_EQ(values<int64_t>(run1({"ArgMax", 13, {{"axis", int64_t{1}}}, {x}, {{DType::Int64, {2, 1}}}})),
            (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(
      values<int64_t>(run1(
          {"ArgMax", 13, {{"axis", int64_t{-1}}, {"select_last_index", int64_t{1}}}, {x}, {{DType::Int64, {2, 1}}}})),
      (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(values<int64_t>(run1({"ArgMin", 13, {{"keepdims", int64_t{0}}}, {x}, {{DType::Int64, {3}}}})),
            (std::vector<int64_t>{0, 1, 0}));
  EXPECT_EQ(
      values<int64_t>(run1({"ArgMin", 13, {{"axis", int64_t{0}}}, {i32({3}, {4, -1, -1})}, {{DType::Int64, {1}}}})),
      (std::vector<int64_t>{1}));
  error_of({"ArgMax", 13, {{"axis", int64_t{2}}}, {x}, {{DType::Int64, {2, 1}}}});
}

TEST(ReferenceSoftmax, AxisSemanticsByOpset) {
  const Tensor x = f64({2, 3}, {1, 2, 3, 0, 0, 0});
  expect_near(values<double>(run1({"Softmax", 13, {}, {x}, {{DType::Float64, {2, 3}}}})),
              {0.09003057317038046, 0.24472847105479764, 0.6652409557748219, 1.0 / 3, 1.0 / 3, 1.0 / 3}, 1e-15);
  // (2,1,2) over axis 1: opset 13 normalises the size-1 axis alone; opset 11 flattens dims 1.. into one row.
  const Tensor y = f32({2, 1, 2}, {0, 0, 1, 1});
  EXPECT_EQ(values<float>(run1({"Softmax", 13, {{"axis", int64_t{1}}}, {y}, {{DType::Float32, {2, 1, 2}}}})),
            (std::vector<float>{1, 1, 1, 1}));
  EXPECT_EQ(values<float>(run1({"Softmax", 11, {}, {y}, {{DType::Float32, {2, 1, 2}}}})),
            (std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}));
  // Column-wise (axis 0) and log-softmax of large values.
  expect_near(values<double>(
                  run1({"Softmax", 13, {{"axis", int64_t{0}}}, {f64({2, 1}, {0, M_LN2})}, {{DType::Float64, {2, 1}}}})),
              {1.0 / 3, 2.0 / 3}, 1e-15);
  expect_near(values<float>(run1({"LogSoftmax", 13, {}, {f32({2}, {1000, 1001})}, {{DType::Float32, {2}}}})),
              {-1.3132616875182228, -0.31326168751822286}, 1e-6);
  error_of({"Softmax", 13, {}, {i32({2}, {1, 2})}, {{DType::Int32, {2}}}});
  error_of({"Softmax", 13, {{"axis", int64_t{2}}}, {x}, {{DType::Float64, {2, 3}}}});
}

}  // namespace
