// Math op schemas (graph/ops/), the elementwise, reduction, Dropout and loss ops (nn_ops_test.cc: Conv,
// Gemm, MatMul, pooling, normalisation, Softmax): shape inference with symbolic batch dims, opset differences, costs,
// constant folding, and errors that name the node.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/graph.h"
#include "graph/op_schema.h"
#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"
#include "tests/op_graph.h"

using namespace onnxtrain;

namespace {

using namespace onnxtrain::testing_support;

// --- elementwise binary ----------------------------------------------------------------------------

TEST(Elementwise, BroadcastKeepsSymbolicBatch) {
  OpGraph t;
  NodeId add =
      t.node("Add", {t.input(DType::Float32, Shape({N, Dim(3), Dim(1)})), t.input(DType::Float32, Shape::of({4}))});
  t.infer(add);
  EXPECT_EQ(t.shape(add), "(N,3,4)");
  EXPECT_EQ(t.out(add).dtype, DType::Float32);
}

TEST(Elementwise, BroadcastFailureNamesBothShapes) {
  OpGraph t;
  NodeId mul = t.node("Mul", {t.input(DType::Float32, Shape({N, Dim(3)})), t.input(DType::Float32, Shape::of({4, 5}))});
  std::string message = t.error(mul);
  EXPECT_TRUE(contains(message, "(N,3)")) << message;
  EXPECT_TRUE(contains(message, "(4,5)")) << message;
}

TEST(Elementwise, TypeMismatchFails) {
  OpGraph t;
  NodeId sub = t.node("Sub", {t.input(DType::Float32, Shape::of({3})), t.input(DType::Int64, Shape::of({3}))});
  EXPECT_TRUE(contains(t.error(sub), "int64")) << "";
}

TEST(Elementwise, PowExponentMayDifferFromOpset12) {
  OpGraph t;
  t.opset = 11;
  NodeId old_pow = t.node("Pow", {t.input(DType::Float32, Shape::of({3})), t.input(DType::Int64, Shape::of({}))});
  t.error(old_pow);
  t.opset = 13;
  NodeId pow = t.node("Pow", {t.input(DType::Float32, Shape::of({3})), t.input(DType::Int64, Shape::of({}))});
  t.infer(pow);
  EXPECT_EQ(t.out(pow).dtype, DType::Float32);
}

TEST(Elementwise, KnownValuesStaySymbolic) {
  OpGraph t;
  // Mul(Gather(Shape(x), 1), 4) where dim 1 of x is the batch symbol.
  ValueId batch = t.known(Shape::of({}), {N});
  NodeId mul = t.node("Mul", {batch, t.constant(Tensor::scalar_int64(4))});
  t.infer(mul);
  ASSERT_TRUE(t.out(mul).known);
  EXPECT_EQ((*t.out(mul).known)[0].to_string(), "4*N");
  EXPECT_EQ(t.shape(mul), "()");

  NodeId div = t.node("Div", {t.g.node(mul).outputs[0], t.constant(Tensor::scalar_int64(2))});
  t.infer(div);
  EXPECT_EQ((*t.out(div).known)[0].to_string(), "2*N");

  // A 1-D shape vector (N,3) plus a broadcast 1-element constant.
  NodeId add = t.node("Add", {t.known(Shape::of({2}), {N, Dim(3)}), t.constant(Tensor::vector_int64({1}))});
  t.infer(add);
  ASSERT_TRUE(t.out(add).known);
  EXPECT_TRUE((*t.out(add).known)[0].is_unknown());
  EXPECT_EQ((*t.out(add).known)[1].to_string(), "4");

  NodeId sub = t.node("Sub", {t.known(Shape::of({2}), {N * Dim(3), Dim(7)}), t.known(Shape::of({2}), {N, Dim(2)})});
  t.infer(sub);
  EXPECT_EQ((*t.out(sub).known)[0].to_string(), "2*N");
  EXPECT_EQ((*t.out(sub).known)[1].to_string(), "5");
}

TEST(Elementwise, FoldsIntAndFloatConstants) {
  OpGraph t;
  NodeId add = t.node("Add", {t.constant(Tensor::vector_int64({1, 2, 3})), t.constant(Tensor::scalar_int64(10))});
  t.infer(add);
  auto sum = t.fold(add);
  ASSERT_EQ(sum.size(), 1u);
  EXPECT_EQ(sum[0].to_int64(), (std::vector<int64_t>{11, 12, 13}));
  EXPECT_EQ(sum[0].sizes(), (std::vector<int64_t>{3}));

  NodeId div = t.node("Div", {t.constant(floats({2, 1}, {1, 3})), t.constant(floats({2}, {2, 4}))});
  t.infer(div);
  auto quotient = t.fold(div);
  ASSERT_EQ(quotient.size(), 1u);
  EXPECT_EQ(quotient[0].sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(quotient[0].to_double(), (std::vector<double>{0.5, 0.25, 1.5, 0.75}));

  NodeId int_div = t.node("Div", {t.constant(Tensor::vector_int64({7, -7})), t.constant(Tensor::scalar_int64(2))});
  EXPECT_EQ(t.fold(int_div)[0].to_int64(), (std::vector<int64_t>{3, -3}));  // truncates like ONNX Runtime

  NodeId by_zero = t.node("Div", {t.constant(Tensor::vector_int64({7})), t.constant(Tensor::scalar_int64(0))});
  EXPECT_THROW(t.fold(by_zero), Error);

  Tensor half(DType::Float64, {});
  half.data<double>()[0] = 0.5;
  NodeId pow = t.node("Pow", {t.constant(Tensor::vector_int64({4, 9})), t.constant(half)});
  EXPECT_EQ(t.fold(pow)[0].to_int64(), (std::vector<int64_t>{2, 3}));
  // float16 math declines (the node stays unfolded), never an internal error.
  NodeId half_pow = t.node("Pow", {t.constant(Tensor::vector_int64({4, 9})), t.constant(Tensor(DType::Float16, {}))});
  EXPECT_TRUE(t.fold(half_pow).empty());

  Tensor int32s(DType::Int32, {2});
  int32s.data<int32_t>()[0] = 5;
  int32s.data<int32_t>()[1] = -6;
  NodeId mul = t.node("Mul", {t.constant(int32s), t.constant(int32s)});
  auto squares = t.fold(mul);
  EXPECT_EQ(squares[0].dtype(), DType::Int32);
  EXPECT_EQ(squares[0].to_int64(), (std::vector<int64_t>{25, 36}));

  Tensor bytes(DType::UInt8, {2});
  bytes.data<uint8_t>()[0] = 200;
  bytes.data<uint8_t>()[1] = 7;
  NodeId sub = t.node("Sub", {t.constant(bytes), t.constant(bytes)});
  EXPECT_EQ(t.fold(sub)[0].dtype(), DType::UInt8);
  EXPECT_EQ(t.fold(sub)[0].to_int64(), (std::vector<int64_t>{0, 0}));

  Tensor halves(DType::Float16, {2});
  NodeId half_add = t.node("Add", {t.constant(halves), t.constant(halves)});
  EXPECT_TRUE(t.fold(half_add).empty());  // declined: the node stays
}

// Mod: fmod 0 gives the remainder the divisor's sign (numpy.mod), fmod 1 the dividend's (C's fmod); ONNX
// defines fmod 0 for integers only. TorchScript exports of torchvision's VisionTransformer fold int64 Mods.
TEST(Elementwise, ModFoldsBothSignConventions) {
  OpGraph t;
  const Tensor a = Tensor::vector_int64({-4, 7, 5, -8}), b = Tensor::vector_int64({3, -3, 2, -1});
  NodeId python_mod = t.node("Mod", {t.constant(a), t.constant(b)});
  t.infer(python_mod);
  EXPECT_EQ(t.fold(python_mod)[0].to_int64(), (std::vector<int64_t>{2, -2, 1, 0}));
  NodeId c_mod = t.node("Mod", {t.constant(a), t.constant(b)}, 1, {{"fmod", int64_t{1}}});
  t.infer(c_mod);
  EXPECT_EQ(t.fold(c_mod)[0].to_int64(), (std::vector<int64_t>{-1, 1, 1, 0}));

  NodeId by_zero = t.node("Mod", {t.constant(a), t.constant(Tensor::scalar_int64(0))});
  EXPECT_THROW(t.fold(by_zero), Error);

  NodeId float_mod =
      t.node("Mod", {t.constant(floats({2}, {-5.5f, 5.5f})), t.constant(floats({}, {2}))}, 1, {{"fmod", int64_t{1}}});
  t.infer(float_mod);
  EXPECT_EQ(t.fold(float_mod)[0].to_double(), (std::vector<double>{-1.5, 1.5}));
  NodeId float_without_fmod = t.node("Mod", {t.constant(floats({1}, {1})), t.constant(floats({1}, {2}))});
  EXPECT_THROW(t.infer(float_without_fmod), Error);

  // Known sizes carry through (shape arithmetic): 10 % 4.
  NodeId sizes = t.node("Mod", {t.known(Shape::of({1}), {Dim(10)}), t.known(Shape::of({1}), {Dim(4)})});
  t.infer(sizes);
  EXPECT_EQ((*t.out(sizes).known)[0].to_string(), "2");
}

// --- variadic --------------------------------------------------------------------------------------

TEST(Variadic, BroadcastsAllInputs) {
  OpGraph t;
  NodeId sum = t.node("Sum", {t.input(DType::Float32, Shape({N, Dim(1)})), t.input(DType::Float32, Shape::of({5})),
                              t.input(DType::Float32, Shape::of({1, 1}))});
  t.infer(sum);
  EXPECT_EQ(t.shape(sum), "(N,5)");
  EXPECT_DOUBLE_EQ(t.cost(sum).forward_flops, 2 * 10);  // two adds per output element

  NodeId max = t.node("Max", {t.constant(Tensor::vector_int64({1, 8, 3})), t.constant(Tensor::vector_int64({4, 2, 6})),
                              t.constant(Tensor::scalar_int64(5))});
  t.infer(max);
  EXPECT_EQ(t.fold(max)[0].to_int64(), (std::vector<int64_t>{5, 8, 6}));

  NodeId mean = t.node("Mean", {t.constant(floats({2}, {1, 2})), t.constant(floats({2}, {3, 6}))});
  EXPECT_EQ(t.fold(mean)[0].to_double(), (std::vector<double>{2, 4}));

  NodeId bad = t.node("Min", {t.input(DType::Float32, Shape::of({3})), t.input(DType::Float64, Shape::of({3}))});
  t.error(bad);
}

TEST(Variadic, MinOfKnownStaticValues) {
  OpGraph t;
  NodeId min = t.node("Min", {t.known(Shape::of({2}), {Dim(5), N}), t.constant(Tensor::vector_int64({3, 9}))});
  t.infer(min);
  ASSERT_TRUE(t.out(min).known);
  EXPECT_EQ((*t.out(min).known)[0].to_string(), "3");
  EXPECT_TRUE((*t.out(min).known)[1].is_unknown());
}

// --- unary, Clip, PRelu ----------------------------------------------------------------------------

TEST(Unary, KeepsShapeAndChecksTypes) {
  OpGraph t;
  for (const char* op :
       {"Relu", "Sigmoid", "Tanh",       "Erf",      "Sqrt",      "Exp", "Log",  "Sin",         "Cos",       "Ceil",
        "Neg",  "Abs",     "Reciprocal", "Softplus", "LeakyRelu", "Elu", "Selu", "HardSigmoid", "HardSwish", "Gelu"}) {
    NodeId n = t.node(op, {t.input(DType::Float32, nchw(3, 8, 8))});
    t.infer(n);
    EXPECT_EQ(t.shape(n), "(N,3,8,8)") << op;
    EXPECT_EQ(t.out(n).dtype, DType::Float32) << op;
  }
  t.error(t.node("Sigmoid", {t.input(DType::Int64, Shape::of({3}))}));
  t.error(t.node("Gelu", {t.input(DType::Float32, Shape::of({3}))}, 1, {{"approximate", std::string("fast")}}));
}

TEST(Unary, Folds) {
  OpGraph t;
  EXPECT_EQ(t.fold(t.node("Sqrt", {t.constant(floats({2}, {4, 9}))}))[0].to_double(), (std::vector<double>{2, 3}));
  EXPECT_EQ(t.fold(t.node("Neg", {t.constant(Tensor::vector_int64({1, -2}))}))[0].to_int64(),
            (std::vector<int64_t>{-1, 2}));
  EXPECT_EQ(t.fold(t.node("Abs", {t.constant(Tensor::vector_int64({-3}))}))[0].to_int64(), (std::vector<int64_t>{3}));
  EXPECT_EQ(t.fold(t.node("Reciprocal", {t.constant(floats({1}, {4}))}))[0].to_double(), (std::vector<double>{0.25}));
  EXPECT_NEAR(t.fold(t.node("Exp", {t.constant(floats({1}, {1}))}))[0].to_double()[0], std::exp(1.0), 1e-6);
  EXPECT_NEAR(t.fold(t.node("Log", {t.constant(floats({1}, {1}))}))[0].to_double()[0], 0.0, 1e-12);
  EXPECT_TRUE(t.fold(t.node("Sqrt", {t.constant(Tensor::vector_int64({4}))})).empty());  // declined
}

TEST(Unary, ClipMinMaxAreAttributesBeforeOpset11) {
  OpGraph t;
  t.opset = 6;
  NodeId with_attrs = t.node("Clip", {t.input(DType::Float32, Shape({N, Dim(4)}))}, 1, {{"min", 0.0}, {"max", 6.0}});
  t.infer(with_attrs);
  EXPECT_EQ(t.shape(with_attrs), "(N,4)");
  NodeId with_inputs = t.node("Clip", {t.input(DType::Float32, Shape({N, Dim(4)})), t.constant(floats({}, {0}))});
  EXPECT_TRUE(contains(t.error(with_inputs), "opset 11"));

  t.opset = 11;
  NodeId clip11 = t.node(
      "Clip", {t.input(DType::Float32, Shape({N, Dim(4)})), t.constant(floats({}, {0})), t.constant(floats({}, {6}))});
  t.infer(clip11);
  EXPECT_EQ(t.shape(clip11), "(N,4)");
  NodeId max_only =
      t.node("Clip", {t.input(DType::Float32, Shape({N, Dim(4)})), ValueId{}, t.constant(floats({}, {6}))});
  t.infer(max_only);
  NodeId not_scalar = t.node("Clip", {t.input(DType::Float32, Shape({N, Dim(4)})), t.constant(floats({2}, {0, 1}))});
  EXPECT_TRUE(contains(t.error(not_scalar), "scalar"));
}

TEST(Unary, PReluSlopeBroadcastsOntoInput) {
  OpGraph t;
  NodeId ok =
      t.node("PRelu", {t.input(DType::Float32, nchw(64, 8, 8)), t.input(DType::Float32, Shape::of({64, 1, 1}))});
  t.infer(ok);
  EXPECT_EQ(t.shape(ok), "(N,64,8,8)");
  EXPECT_EQ(OpGraph::schema("PRelu").input_kind(1), InputKind::Weight);
  NodeId bad = t.node("PRelu", {t.input(DType::Float32, nchw(64, 8, 4)), t.input(DType::Float32, Shape::of({64}))});
  EXPECT_TRUE(contains(t.error(bad), "(64,1,1)"));
}

// --- reductions ------------------------------------------------------------------------------------

TEST(Reduce, AxesAttributeBeforeOpset18InputAfter) {
  OpGraph t;
  t.opset = 13;
  NodeId attr = t.node("ReduceMean", {t.input(DType::Float32, Shape({N, Dim(3), Dim(4)}))}, 1,
                       {{"axes", std::vector<int64_t>{1}}, {"keepdims", int64_t{0}}});
  t.infer(attr);
  EXPECT_EQ(t.shape(attr), "(N,4)");
  NodeId input13 = t.node("ReduceMean",
                          {t.input(DType::Float32, Shape({N, Dim(3), Dim(4)})), t.constant(Tensor::vector_int64({1}))});
  EXPECT_TRUE(contains(t.error(input13), "attribute before opset 18"));
  NodeId all = t.node("ReduceMean", {t.input(DType::Float32, Shape({N, Dim(3), Dim(4)}))});
  t.infer(all);
  EXPECT_EQ(t.shape(all), "(1,1,1)");

  t.opset = 18;
  NodeId input18 = t.node(
      "ReduceMean", {t.input(DType::Float32, Shape({N, Dim(3), Dim(4)})), t.constant(Tensor::vector_int64({-1}))});
  t.infer(input18);
  EXPECT_EQ(t.shape(input18), "(N,3,1)");
  NodeId attr18 = t.node("ReduceMean", {t.input(DType::Float32, Shape({N, Dim(3), Dim(4)}))}, 1,
                         {{"axes", std::vector<int64_t>{1}}});
  EXPECT_TRUE(contains(t.error(attr18), "input from opset 18"));
  NodeId noop =
      t.node("ReduceMax", {t.input(DType::Float32, Shape({N, Dim(3)}))}, 1, {{"noop_with_empty_axes", int64_t{1}}});
  t.infer(noop);
  EXPECT_EQ(t.shape(noop), "(N,3)");
  NodeId twice =
      t.node("ReduceL2", {t.input(DType::Float32, Shape({N, Dim(3)})), t.constant(Tensor::vector_int64({1, -1}))});
  EXPECT_TRUE(contains(t.error(twice), "twice"));
}

TEST(Reduce, ReduceSumTakesAxesInputFrom13) {
  OpGraph t;
  t.opset = 13;
  NodeId sum = t.node("ReduceSum",
                      {t.input(DType::Float32, Shape({N, Dim(3), Dim(4)})), t.constant(Tensor::vector_int64({0, 2}))},
                      1, {{"keepdims", int64_t{0}}});
  t.infer(sum);
  EXPECT_EQ(t.shape(sum), "(3)");
  NodeId runtime_axes =
      t.node("ReduceSum", {t.input(DType::Float32, Shape({N, Dim(3), Dim(4)})), t.input(DType::Int64, Shape::of({2}))},
             1, {{"keepdims", int64_t{0}}});
  t.infer(runtime_axes);
  EXPECT_EQ(t.shape(runtime_axes), "(?)");  // one dim left, size unknown
  EXPECT_EQ(t.out(runtime_axes).shape.rank(), 1);
  NodeId kept = t.node("ReduceSumSquare", {t.input(DType::Float32, Shape({N, Dim(1), Dim(4)}))}, 1);
  t.infer(kept);
  EXPECT_EQ(t.shape(kept), "(1,1,1)");
  NodeId no_axes =
      t.node("ReduceSum", {t.input(DType::Float32, Shape({N, Dim(3)}))}, 1, {{"noop_with_empty_axes", int64_t{1}}});
  t.infer(no_axes);
  EXPECT_EQ(t.shape(no_axes), "(N,3)");
}

TEST(Reduce, KnownShapeArithmeticAndFolds) {
  OpGraph t;
  t.opset = 13;
  NodeId prod = t.node("ReduceProd", {t.known(Shape::of({3}), {N, Dim(3), Dim(4)})}, 1, {{"keepdims", int64_t{0}}});
  t.infer(prod);
  ASSERT_TRUE(t.out(prod).known);
  EXPECT_EQ((*t.out(prod).known)[0].to_string(), "12*N");
  EXPECT_EQ(t.shape(prod), "()");

  Tensor matrix = Tensor::vector_int64({1, 2, 3, 4, 5, 6}).reshaped({2, 3});
  EXPECT_EQ(
      t.fold(t.node("ReduceProd", {t.constant(Tensor::vector_int64({2, 3, 4}))}, 1, {{"keepdims", int64_t{0}}}))[0]
          .to_int64(),
      (std::vector<int64_t>{24}));
  auto rows = t.fold(t.node("ReduceSum", {t.constant(matrix), t.constant(Tensor::vector_int64({1}))}));
  EXPECT_EQ(rows[0].sizes(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(rows[0].to_int64(), (std::vector<int64_t>{6, 15}));
  auto cols = t.fold(
      t.node("ReduceMax", {t.constant(matrix)}, 1, {{"axes", std::vector<int64_t>{0}}, {"keepdims", int64_t{0}}}));
  EXPECT_EQ(cols[0].to_int64(), (std::vector<int64_t>{4, 5, 6}));
  auto all = t.fold(t.node("ReduceMin", {t.constant(matrix)}, 1, {{"keepdims", int64_t{0}}}));
  EXPECT_EQ(all[0].sizes(), (std::vector<int64_t>{}));
  EXPECT_EQ(all[0].to_int64(), (std::vector<int64_t>{1}));
  Tensor empty_rows(DType::Float32, {2, 0});
  auto empty_max = t.fold(t.node("ReduceMax", {t.constant(empty_rows)}, 1, {{"axes", std::vector<int64_t>{1}}}));
  EXPECT_EQ(empty_max[0].sizes(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(empty_max[0].to_double()[0], -INFINITY);  // ONNX: an empty max is -inf
  EXPECT_EQ(OpGraph::schema("ReduceMean").fold, nullptr);
}

TEST(Reduce, ArgMaxArgMin) {
  OpGraph t;
  NodeId argmax = t.node("ArgMax", {t.input(DType::Float32, Shape({N, Dim(10)}))}, 1,
                         {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}});
  t.infer(argmax);
  EXPECT_EQ(t.shape(argmax), "(N)");
  EXPECT_EQ(t.out(argmax).dtype, DType::Int64);
  NodeId argmin = t.node("ArgMin", {t.input(DType::Float32, Shape({N, Dim(10)}))});
  t.infer(argmin);
  EXPECT_EQ(t.shape(argmin), "(1,10)");
  EXPECT_DOUBLE_EQ(t.cost(argmin).backward_flops, 0);
}

// --- Dropout ---------------------------------------------------------------------------------------

TEST(Dropout, RatioAttributeBefore12InputsFrom12) {
  OpGraph t;
  t.opset = 7;
  NodeId d7 = t.node("Dropout", {t.input(DType::Float32, Shape({N, Dim(8)}))}, 2, {{"ratio", 0.3}});
  t.infer(d7);
  EXPECT_EQ(t.out(d7, 1).dtype, DType::Float32);  // the mask has the input's type before opset 10
  t.opset = 10;
  NodeId d10 = t.node("Dropout", {t.input(DType::Float32, Shape({N, Dim(8)}))}, 2);
  t.infer(d10);
  EXPECT_EQ(t.shape(d10, 1), "(N,8)");
  EXPECT_EQ(t.out(d10, 1).dtype, DType::Bool);
  NodeId ratio_input = t.node("Dropout", {t.input(DType::Float32, Shape({N, Dim(8)})), t.constant(floats({}, {0.5}))});
  EXPECT_TRUE(contains(t.error(ratio_input), "opset 12"));
  EXPECT_TRUE(contains(t.error(t.node("Dropout", {t.input(DType::Float32, Shape({N, Dim(8)}))}, 1, {{"ratio", 1.5}})),
                       "ratio"));

  t.opset = 12;
  Tensor on(DType::Bool, {});
  on.data<uint8_t>()[0] = 1;
  NodeId d12 = t.node("Dropout",
                      {t.input(DType::Float32, Shape({N, Dim(8)})), t.constant(floats({}, {0.1})), t.constant(on)}, 2);
  t.infer(d12);
  EXPECT_EQ(t.shape(d12), "(N,8)");
  EXPECT_EQ(t.out(d12, 1).dtype, DType::Bool);
  EXPECT_EQ(OpGraph::schema("Dropout").input_kind(1), InputKind::NonDifferentiable);
  EXPECT_EQ(OpGraph::schema("Dropout").input_kind(2), InputKind::NonDifferentiable);
  NodeId bad_mode =
      t.node("Dropout", {t.input(DType::Float32, Shape({N, Dim(8)})), ValueId{}, t.constant(Tensor::scalar_int64(1))});
  EXPECT_TRUE(contains(t.error(bad_mode), "bool"));
  NodeId bad_ratio = t.node("Dropout", {t.input(DType::Float32, Shape({N, Dim(8)})), t.constant(floats({}, {1.5}))});
  EXPECT_TRUE(contains(t.error(bad_ratio), "ratio"));
}

// --- losses ----------------------------------------------------------------------------------------

TEST(Loss, SoftmaxCrossEntropyAndNll) {
  OpGraph t;
  t.opset = 13;
  NodeId mean = t.node("SoftmaxCrossEntropyLoss",
                       {t.input(DType::Float32, Shape({N, Dim(10)})), t.input(DType::Int64, Shape({N}))}, 2);
  t.infer(mean);
  EXPECT_EQ(t.shape(mean), "()");
  EXPECT_EQ(t.shape(mean, 1), "(N,10)");
  EXPECT_EQ(OpGraph::schema("SoftmaxCrossEntropyLoss").input_kind(1), InputKind::NonDifferentiable);
  EXPECT_DOUBLE_EQ(t.cost(mean).forward_flops, 4.0 * 20);

  NodeId none = t.node("SoftmaxCrossEntropyLoss",
                       {t.input(DType::Float32, Shape({N, Dim(10), Dim(4)})), t.input(DType::Int32, Shape({N, Dim(4)})),
                        t.input(DType::Float32, Shape::of({10}))},
                       1, {{"reduction", std::string("none")}, {"ignore_index", int64_t{-1}}});
  t.infer(none);
  EXPECT_EQ(t.shape(none), "(N,4)");

  NodeId labels = t.node("SoftmaxCrossEntropyLoss", {t.input(DType::Float32, Shape({N, Dim(10), Dim(4)})),
                                                     t.input(DType::Int64, Shape({N, Dim(5)}))});
  EXPECT_EQ(t.error(labels), "SoftmaxCrossEntropyLoss: labels have shape (N,5) but scores (N,10,4) need (N,4)");
  NodeId float_labels = t.node("SoftmaxCrossEntropyLoss",
                               {t.input(DType::Float32, Shape({N, Dim(10)})), t.input(DType::Float32, Shape({N}))});
  EXPECT_TRUE(contains(t.error(float_labels), "int32 or int64"));
  NodeId weights =
      t.node("NegativeLogLikelihoodLoss", {t.input(DType::Float32, Shape({N, Dim(10)})),
                                           t.input(DType::Int64, Shape({N})), t.input(DType::Float32, Shape::of({9}))});
  EXPECT_TRUE(contains(t.error(weights), "weights"));
  NodeId nll = t.node("NegativeLogLikelihoodLoss",
                      {t.input(DType::Float32, Shape({N, Dim(3), Dim(5)})), t.input(DType::Int64, Shape({N, Dim(5)}))},
                      1, {{"reduction", std::string("sum")}});
  t.infer(nll);
  EXPECT_EQ(t.shape(nll), "()");
  NodeId reduction = t.node("NegativeLogLikelihoodLoss",
                            {t.input(DType::Float32, Shape({N, Dim(3)})), t.input(DType::Int64, Shape({N}))}, 1,
                            {{"reduction", std::string("max")}});
  t.error(reduction);
}

// --- robustness ------------------------------------------------------------------------------------

// Every math op accepts inputs of unknown rank (the output is unknown or partly known, never a crash).
TEST(Robustness, UnknownRankInputs) {
  struct Case {
    const char* op;
    std::vector<DType> inputs;
    size_t outputs;
    std::map<std::string, Attribute> attributes;
  };
  const DType F = DType::Float32, I = DType::Int64;
  const std::vector<Case> cases = {
      {"Add", {F, F}, 1, {}},
      {"Pow", {F, F}, 1, {}},
      {"Max", {F, F, F}, 1, {}},
      {"Relu", {F}, 1, {}},
      {"Clip", {F, F, F}, 1, {}},
      {"PRelu", {F, F}, 1, {}},
      {"Conv", {F, F, F}, 1, {}},
      {"ConvTranspose", {F, F}, 1, {}},
      {"Gemm", {F, F, F}, 1, {}},
      {"MatMul", {F, F}, 1, {}},
      {"MaxPool", {F}, 2, {{"kernel_shape", std::vector<int64_t>{2, 2}}}},
      {"AveragePool", {F}, 1, {{"kernel_shape", std::vector<int64_t>{2}}}},
      {"GlobalAveragePool", {F}, 1, {}},
      {"BatchNormalization", {F, F, F, F, F}, 1, {}},
      {"InstanceNormalization", {F, F, F}, 1, {}},
      {"LayerNormalization", {F, F, F}, 3, {}},
      {"LRN", {F}, 1, {{"size", int64_t{3}}}},
      {"Softmax", {F}, 1, {}},
      {"ReduceSum", {F, I}, 1, {}},
      {"ReduceMean", {F, I}, 1, {{"keepdims", int64_t{0}}}},
      {"ArgMax", {F}, 1, {}},
      {"Dropout", {F, F}, 2, {}},
      {"SoftmaxCrossEntropyLoss", {F, I, F}, 2, {}},
      {"NegativeLogLikelihoodLoss", {F, I}, 1, {}},
  };
  for (const Case& c : cases) {
    OpGraph t;
    t.opset = 18;
    std::vector<ValueId> inputs;
    for (DType d : c.inputs) inputs.push_back(t.input(d, Shape::unknown_rank()));
    NodeId n = t.node(c.op, inputs, c.outputs, c.attributes);
    EXPECT_NO_THROW(t.infer(n)) << c.op;
    EXPECT_NE(t.out(n).dtype, DType::Undefined) << c.op;
    EXPECT_NO_THROW(t.cost(n)) << c.op;
  }
}

TEST(Robustness, WrongInputCountNamesTheNode) {
  OpGraph t;
  NodeId conv = t.node("Conv", {t.input(DType::Float32, nchw(1, 8, 8))});
  EXPECT_TRUE(contains(t.error(conv), "inputs"));
}

}  // namespace
