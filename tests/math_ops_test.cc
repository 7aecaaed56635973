// Math op schemas (graph/ops/): shape inference with symbolic batch dims, opset differences, costs,
// constant folding, and errors that name the node.
#include <gtest/gtest.h>

#include <cmath>

#include "graph/graph.h"
#include "graph/op_schema.h"
#include "graph/ops/data_movement_fold.h"
#include "graph/ops/op_helpers.h"

using namespace onnxtrain;

namespace {

const Dim N = Dim::symbol("N");

Shape nchw(int64_t c, int64_t h, int64_t w) { return Shape({N, Dim(c), Dim(h), Dim(w)}); }

Tensor floats(std::vector<int64_t> sizes, const std::vector<float>& values) {
  return op_helpers::tensor_from(DType::Float32, std::move(sizes), values);
}

// A hand-built graph with one node under test at a time.
struct OpGraph {
  Graph g;
  int opset = 17;

  ValueId input(DType dtype, Shape shape) {
    ValueId v = g.add_value({.name = "in" + std::to_string(g.value_count()),
                             .dtype = dtype,
                             .shape = std::move(shape),
                             .role = ValueRole::Input});
    g.inputs.push_back(v);
    return v;
  }
  ValueId constant(Tensor t) {
    Shape shape = Shape::of(t.sizes());
    DType dtype = t.dtype();
    return g.add_value({.name = "c" + std::to_string(g.value_count()),
                        .dtype = dtype,
                        .shape = shape,
                        .role = ValueRole::Constant,
                        .data = std::move(t)});
  }
  // An int64 value whose element values are known symbolically (as after Gather(Shape(x), 0)).
  ValueId known(Shape shape, std::vector<Dim> values) {
    return g.add_value({.name = "k" + std::to_string(g.value_count()),
                        .dtype = DType::Int64,
                        .shape = std::move(shape),
                        .known = std::move(values)});
  }
  NodeId node(const std::string& op, std::vector<ValueId> inputs, size_t outputs = 1,
              std::map<std::string, Attribute> attributes = {}) {
    std::vector<ValueId> outs;
    for (size_t i = 0; i < outputs; ++i) outs.push_back(g.add_value({.name = op + "_out" + std::to_string(i)}));
    return g.add_node({.name = op + "_node",
                       .op_type = op,
                       .opset = opset,
                       .inputs = std::move(inputs),
                       .outputs = std::move(outs),
                       .attributes = std::move(attributes)});
  }
  static const OpSchema& schema(const std::string& op) {
    const OpSchema* s = OpRegistry::builtin().find("", op);
    EXPECT_NE(s, nullptr) << op;
    return *s;
  }
  void infer(NodeId n) { infer_node(g, n, schema(g.node(n).op_type)); }
  const Value& out(NodeId n, size_t i = 0) { return g.value(g.node(n).outputs[i]); }
  std::string shape(NodeId n, size_t i = 0) { return out(n, i).shape.to_string(); }
  // Infers and returns the error message; fails the test when nothing is thrown or the node is not named.
  std::string error(NodeId n) {
    try {
      infer(n);
    } catch (const Error& e) {
      EXPECT_TRUE(e.has_node());
      EXPECT_EQ(e.node(), g.node(n).name);
      return e.message();
    }
    ADD_FAILURE() << "no error for " << g.node(n).op_type;
    return "";
  }
  OpCost cost(NodeId n, int64_t batch = 2) { return node_cost(g, n, schema(g.node(n).op_type), {{"N", batch}}); }
  std::vector<Tensor> fold(NodeId n) {
    FoldContext ctx{g.node(n), {}, {}};
    for (ValueId in : g.node(n).inputs) ctx.inputs.push_back(in.valid() ? *g.value(in).data : Tensor());
    return schema(g.node(n).op_type).fold(ctx);
  }
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

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

// --- Conv, ConvTranspose ---------------------------------------------------------------------------

TEST(Conv, ShapesAndCost) {
  OpGraph t;
  NodeId conv = t.node("Conv",
                       {t.input(DType::Float32, nchw(1, 28, 28)), t.input(DType::Float32, Shape::of({32, 1, 3, 3})),
                        t.input(DType::Float32, Shape::of({32}))},
                       1, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}});
  t.infer(conv);
  EXPECT_EQ(t.shape(conv), "(N,32,28,28)");
  // N=2: MACs = 2·32·28·28·1·9; forward 2·MACs + bias, backward 4·MACs + bias.
  const double macs = 2.0 * 32 * 28 * 28 * 9;
  const double bias = 2.0 * 32 * 28 * 28;
  EXPECT_DOUBLE_EQ(t.cost(conv).forward_flops, 2 * macs + bias);
  EXPECT_DOUBLE_EQ(t.cost(conv).backward_flops, 4 * macs + bias);
  EXPECT_EQ(OpGraph::schema("Conv").input_kind(1), InputKind::Weight);
  EXPECT_EQ(OpGraph::schema("Conv").input_kind(2), InputKind::Weight);
}

TEST(Conv, AutoPadStridesDilationsGroups) {
  OpGraph t;
  auto conv = [&](Shape x, Shape w, std::map<std::string, Attribute> attrs) {
    NodeId n = t.node("Conv", {t.input(DType::Float32, std::move(x)), t.input(DType::Float32, std::move(w))}, 1,
                      std::move(attrs));
    t.infer(n);
    return t.shape(n);
  };
  using Ints = std::vector<int64_t>;
  EXPECT_EQ(
      conv(nchw(1, 7, 7), Shape::of({4, 1, 3, 3}), {{"auto_pad", std::string("SAME_UPPER")}, {"strides", Ints{2, 2}}}),
      "(N,4,4,4)");
  EXPECT_EQ(conv(nchw(1, 7, 7), Shape::of({4, 1, 3, 3}), {{"auto_pad", std::string("SAME_LOWER")}}), "(N,4,7,7)");
  EXPECT_EQ(conv(nchw(1, 7, 5), Shape::of({4, 1, 3, 3}), {{"auto_pad", std::string("VALID")}, {"strides", Ints{2, 2}}}),
            "(N,4,3,2)");
  EXPECT_EQ(conv(nchw(1, 7, 7), Shape::of({4, 1, 3, 3}), {{"dilations", Ints{2, 2}}}), "(N,4,3,3)");
  EXPECT_EQ(conv(nchw(1, 7, 5), Shape::of({2, 1, 3, 3}), {{"pads", Ints{1, 0, 1, 0}}, {"strides", Ints{2, 2}}}),
            "(N,2,4,2)");
  EXPECT_EQ(conv(nchw(8, 9, 9), Shape::of({8, 1, 3, 3}), {{"group", int64_t{8}}}), "(N,8,7,7)");  // depthwise
  EXPECT_EQ(conv(Shape({N, Dim(3), Dim(10)}), Shape::of({6, 3, 4}), {}), "(N,6,7)");              // 1-D
  EXPECT_EQ(conv(Shape({N, Dim(2), Dim(4), Dim(4), Dim(4)}), Shape::of({5, 2, 3, 3, 3}), {}), "(N,5,2,2,2)");  // 3-D
  // A symbolic spatial dim survives a "same" convolution and becomes unknown otherwise.
  EXPECT_EQ(conv(Shape({N, Dim(1), Dim::symbol("H"), Dim(8)}), Shape::of({4, 1, 3, 3}), {{"pads", Ints{1, 1, 1, 1}}}),
            "(N,4,H,8)");
  EXPECT_EQ(conv(Shape({N, Dim(1), Dim::symbol("H"), Dim(8)}), Shape::of({4, 1, 3, 3}), {}), "(N,4,?,6)");
  EXPECT_EQ(conv(Shape::unknown_rank(), Shape::of({4, 1, 3, 3}), {}), "(?)");
}

TEST(Conv, ClearErrors) {
  OpGraph t;
  NodeId channels =
      t.node("Conv", {t.input(DType::Float32, nchw(1, 28, 28)), t.input(DType::Float32, Shape::of({8, 3, 3, 3}))});
  EXPECT_EQ(t.error(channels),
            "Conv: weight has 3 input channels per group but input has 1 channels (shape (N,1,28,28))");
  NodeId bias =
      t.node("Conv", {t.input(DType::Float32, nchw(3, 28, 28)), t.input(DType::Float32, Shape::of({8, 3, 3, 3})),
                      t.input(DType::Float32, Shape::of({4}))});
  EXPECT_TRUE(contains(t.error(bias), "bias"));
  NodeId too_big =
      t.node("Conv", {t.input(DType::Float32, nchw(3, 2, 2)), t.input(DType::Float32, Shape::of({8, 3, 3, 3}))});
  EXPECT_TRUE(contains(t.error(too_big), "larger than the padded input"));
  NodeId rank =
      t.node("Conv", {t.input(DType::Float32, Shape({N, Dim(3)})), t.input(DType::Float32, Shape::of({8, 3}))});
  t.error(rank);
  NodeId pads =
      t.node("Conv", {t.input(DType::Float32, nchw(3, 8, 8)), t.input(DType::Float32, Shape::of({8, 3, 3, 3}))}, 1,
             {{"pads", std::vector<int64_t>{1, 1}}});
  EXPECT_TRUE(contains(t.error(pads), "pads"));
}

TEST(Conv, Transpose) {
  OpGraph t;
  auto deconv = [&](Shape x, Shape w, std::map<std::string, Attribute> attrs) {
    NodeId n = t.node("ConvTranspose", {t.input(DType::Float32, std::move(x)), t.input(DType::Float32, std::move(w))},
                      1, std::move(attrs));
    t.infer(n);
    return t.shape(n);
  };
  using Ints = std::vector<int64_t>;
  EXPECT_EQ(deconv(nchw(1, 3, 3), Shape::of({1, 2, 3, 3}), {}), "(N,2,5,5)");
  EXPECT_EQ(deconv(nchw(1, 3, 3), Shape::of({1, 2, 3, 3}), {{"strides", Ints{3, 2}}, {"output_padding", Ints{1, 1}}}),
            "(N,2,10,8)");
  EXPECT_EQ(deconv(nchw(1, 3, 3), Shape::of({1, 2, 3, 3}), {{"strides", Ints{3, 2}}, {"output_shape", Ints{10, 8}}}),
            "(N,2,10,8)");
  EXPECT_EQ(deconv(nchw(1, 3, 3), Shape::of({1, 2, 3, 3}),
                   {{"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}}),
            "(N,2,6,6)");
  EXPECT_EQ(deconv(nchw(1, 3, 3), Shape::of({1, 2, 3, 3}), {{"strides", Ints{3, 2}}, {"pads", Ints{1, 2, 1, 2}}}),
            "(N,2,7,3)");
  EXPECT_EQ(deconv(nchw(4, 3, 3), Shape::of({4, 2, 3, 3}), {{"group", int64_t{2}}}), "(N,4,5,5)");
  EXPECT_EQ(deconv(Shape({N, Dim(1), Dim::symbol("H")}), Shape::of({1, 2, 2}), {{"strides", Ints{2}}}), "(N,2,2*H)");

  NodeId bad = t.node("ConvTranspose",
                      {t.input(DType::Float32, nchw(3, 3, 3)), t.input(DType::Float32, Shape::of({1, 2, 3, 3}))});
  EXPECT_TRUE(contains(t.error(bad), "input has 3 channels"));
  // N=2: MACs = input numel · (W numel / C) = 2·1·3·3 · 18.
  NodeId costed = t.node("ConvTranspose",
                         {t.input(DType::Float32, nchw(1, 3, 3)), t.input(DType::Float32, Shape::of({1, 2, 3, 3}))});
  t.infer(costed);
  EXPECT_DOUBLE_EQ(t.cost(costed).forward_flops, 2 * (2.0 * 9 * 18));
}

// --- Gemm, MatMul ----------------------------------------------------------------------------------

TEST(Gemm, TransposesBiasAndCost) {
  OpGraph t;
  NodeId gemm = t.node("Gemm",
                       {t.input(DType::Float32, Shape({N, Dim(784)})), t.input(DType::Float32, Shape::of({10, 784})),
                        t.input(DType::Float32, Shape::of({10}))},
                       1, {{"transB", int64_t{1}}});
  t.infer(gemm);
  EXPECT_EQ(t.shape(gemm), "(N,10)");
  // N=2: 2·M·N·K = 2·2·10·784, plus M·N for C; backward twice the product plus C.
  EXPECT_DOUBLE_EQ(t.cost(gemm).forward_flops, 2.0 * 2 * 10 * 784 + 20);
  EXPECT_DOUBLE_EQ(t.cost(gemm).backward_flops, 4.0 * 2 * 10 * 784 + 20);

  NodeId trans_a =
      t.node("Gemm", {t.input(DType::Float32, Shape({Dim(784), N})), t.input(DType::Float32, Shape::of({784, 10}))}, 1,
             {{"transA", int64_t{1}}});
  t.infer(trans_a);
  EXPECT_EQ(t.shape(trans_a), "(N,10)");

  NodeId inner =
      t.node("Gemm", {t.input(DType::Float32, Shape({N, Dim(784)})), t.input(DType::Float32, Shape::of({128, 10}))});
  EXPECT_EQ(t.error(inner), "Gemm: inner dimensions differ: (N,784) x (128,10)");
  NodeId bias =
      t.node("Gemm", {t.input(DType::Float32, Shape({N, Dim(784)})), t.input(DType::Float32, Shape::of({784, 10})),
                      t.input(DType::Float32, Shape::of({20}))});
  EXPECT_TRUE(contains(t.error(bias), "(20)"));
  // A flag that is neither 0 nor 1 is a malformed model, not "transposed" (issue 22).
  NodeId odd =
      t.node("Gemm", {t.input(DType::Float32, Shape({N, Dim(784)})), t.input(DType::Float32, Shape::of({10, 784}))}, 1,
             {{"transB", int64_t{7}}});
  EXPECT_EQ(t.error(odd), "Gemm: transB must be 0 or 1, got 7");
}

TEST(Gemm, BiasRequiredBeforeOpset11) {
  OpGraph t;
  t.opset = 9;
  NodeId no_c =
      t.node("Gemm", {t.input(DType::Float32, Shape({N, Dim(4)})), t.input(DType::Float32, Shape::of({4, 2}))});
  EXPECT_TRUE(contains(t.error(no_c), "opset 11"));
  t.opset = 11;
  NodeId ok = t.node("Gemm", {t.input(DType::Float32, Shape({N, Dim(4)})), t.input(DType::Float32, Shape::of({4, 2}))});
  t.infer(ok);
  EXPECT_EQ(t.shape(ok), "(N,2)");
}

TEST(MatMul, NumpyRules) {
  OpGraph t;
  auto matmul = [&](Shape a, Shape b) {
    NodeId n = t.node("MatMul", {t.input(DType::Float32, std::move(a)), t.input(DType::Float32, std::move(b))});
    t.infer(n);
    return t.shape(n);
  };
  const Dim B = Dim::symbol("B");
  EXPECT_EQ(matmul(Shape({N, Dim(784)}), Shape::of({784, 128})), "(N,128)");
  EXPECT_EQ(matmul(Shape::of({784}), Shape({B, Dim(784), Dim(10)})), "(B,10)");
  EXPECT_EQ(matmul(Shape({N, Dim(3), Dim(4)}), Shape::of({4})), "(N,3)");
  EXPECT_EQ(matmul(Shape::of({4}), Shape::of({4})), "()");
  EXPECT_EQ(matmul(Shape::of({2, 1, 3, 4}), Shape::of({5, 4, 6})), "(2,5,3,6)");
  EXPECT_EQ(matmul(Shape::unknown_rank(), Shape::of({4, 6})), "(?)");

  NodeId inner =
      t.node("MatMul", {t.input(DType::Float32, Shape({N, Dim(784)})), t.input(DType::Float32, Shape::of({128, 10}))});
  EXPECT_EQ(t.error(inner), "MatMul: inner dimensions differ: (N,784) x (128,10)");
  NodeId batch =
      t.node("MatMul", {t.input(DType::Float32, Shape::of({2, 3, 4})), t.input(DType::Float32, Shape::of({5, 4, 6}))});
  EXPECT_TRUE(contains(t.error(batch), "batch dimensions"));

  NodeId costed =
      t.node("MatMul", {t.input(DType::Float32, Shape({N, Dim(784)})), t.input(DType::Float32, Shape::of({784, 128}))});
  t.infer(costed);
  EXPECT_DOUBLE_EQ(t.cost(costed).forward_flops, 2.0 * 2 * 128 * 784);
  EXPECT_DOUBLE_EQ(t.cost(costed).backward_flops, 4.0 * 2 * 128 * 784);
  EXPECT_EQ(OpGraph::schema("MatMul").input_kind(1), InputKind::Data);
}

// --- pools -----------------------------------------------------------------------------------------

TEST(Pool, MaxPoolCeilModeAndIndices) {
  OpGraph t;
  using Ints = std::vector<int64_t>;
  NodeId pool = t.node("MaxPool", {t.input(DType::Float32, nchw(1, 4, 4))}, 2,
                       {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}});
  t.infer(pool);
  EXPECT_EQ(t.shape(pool), "(N,1,2,2)");
  EXPECT_EQ(t.out(pool, 1).dtype, DType::Int64);
  EXPECT_EQ(t.shape(pool, 1), "(N,1,2,2)");
  // N=2: 9 window elements per output element, same backward.
  EXPECT_DOUBLE_EQ(t.cost(pool).forward_flops, 9.0 * 8);
  EXPECT_DOUBLE_EQ(t.cost(pool).backward_flops, 9.0 * 8);

  NodeId floor_mode = t.node("MaxPool", {t.input(DType::Float32, nchw(1, 4, 4))}, 1,
                             {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}});
  t.infer(floor_mode);
  EXPECT_EQ(t.shape(floor_mode), "(N,1,1,1)");
  // The last ceil-mode window would start in the trailing padding: dropped, as PyTorch does.
  NodeId dropped = t.node(
      "MaxPool", {t.input(DType::Float32, nchw(1, 5, 5))}, 1,
      {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}, {"ceil_mode", int64_t{1}}});
  t.infer(dropped);
  EXPECT_EQ(t.shape(dropped), "(N,1,3,3)");
  // With asymmetric pads floor mode may already end in the padding; ceil mode never yields fewer.
  NodeId asymmetric = t.node("AveragePool", {t.input(DType::Float32, Shape({N, Dim(1), Dim(5)}))}, 1,
                             {{"kernel_shape", Ints{2}}, {"pads", Ints{1, 2}}, {"ceil_mode", int64_t{1}}});
  t.infer(asymmetric);
  EXPECT_EQ(t.shape(asymmetric), "(N,1,7)");
  NodeId dilated = t.node("MaxPool", {t.input(DType::Float32, nchw(1, 4, 4))}, 1,
                          {{"kernel_shape", Ints{2, 2}}, {"dilations", Ints{2, 2}}});
  t.infer(dilated);
  EXPECT_EQ(t.shape(dilated), "(N,1,2,2)");
  NodeId no_kernel = t.node("MaxPool", {t.input(DType::Float32, nchw(1, 4, 4))});
  EXPECT_TRUE(contains(t.error(no_kernel), "kernel_shape"));
}

TEST(Pool, AverageAndGlobal) {
  OpGraph t;
  using Ints = std::vector<int64_t>;
  NodeId avg = t.node("AveragePool", {t.input(DType::Float32, nchw(3, 32, 32))}, 1,
                      {{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}});
  t.infer(avg);
  EXPECT_EQ(t.shape(avg), "(N,3,16,16)");
  NodeId avg1d =
      t.node("AveragePool", {t.input(DType::Float32, Shape({N, Dim(3), Dim(32)}))}, 1, {{"kernel_shape", Ints{2}}});
  t.infer(avg1d);
  EXPECT_EQ(t.shape(avg1d), "(N,3,31)");
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    NodeId g = t.node(op, {t.input(DType::Float32, nchw(512, 7, 7))});
    t.infer(g);
    EXPECT_EQ(t.shape(g), "(N,512,1,1)");
    EXPECT_DOUBLE_EQ(t.cost(g).forward_flops, 2.0 * 512 * 49);
  }
  NodeId unknown =
      t.node("AveragePool", {t.input(DType::Float32, Shape::unknown_rank())}, 1, {{"kernel_shape", Ints{2, 2}}});
  t.infer(unknown);
  EXPECT_EQ(t.shape(unknown), "(?)");
}

// --- normalisation ---------------------------------------------------------------------------------

TEST(BatchNorm, Opset9OutputsMeanVarAndSaved) {
  OpGraph t;
  t.opset = 9;
  std::vector<ValueId> in{t.input(DType::Float32, nchw(16, 8, 8))};
  for (int i = 0; i < 4; ++i) in.push_back(t.input(DType::Float32, Shape::of({16})));
  NodeId bn = t.node("BatchNormalization", in, 5);
  t.infer(bn);
  EXPECT_EQ(t.shape(bn), "(N,16,8,8)");
  for (size_t i = 1; i < 5; ++i) EXPECT_EQ(t.shape(bn, i), "(16)");
  EXPECT_TRUE(op_helpers::batch_norm_training(t.g.node(bn)));
  const OpSchema& schema = OpGraph::schema("BatchNormalization");
  EXPECT_EQ(schema.input_kind(1), InputKind::Weight);
  EXPECT_EQ(schema.input_kind(2), InputKind::Weight);
  EXPECT_EQ(schema.input_kind(3), InputKind::State);
  EXPECT_EQ(schema.input_kind(4), InputKind::State);
  // N=2: ~5 FLOPs per element forward, ~8 backward.
  EXPECT_DOUBLE_EQ(t.cost(bn).forward_flops, 5.0 * 2 * 16 * 64);
}

TEST(BatchNorm, Opset15RunningStatsOnlyInTrainingMode) {
  OpGraph t;
  t.opset = 15;
  auto inputs = [&](DType stats) {
    std::vector<ValueId> in{t.input(DType::Float16, nchw(16, 8, 8)), t.input(DType::Float16, Shape::of({16})),
                            t.input(DType::Float16, Shape::of({16}))};
    in.push_back(t.input(stats, Shape::of({16})));
    in.push_back(t.input(stats, Shape::of({16})));
    return in;
  };
  NodeId train = t.node("BatchNormalization", inputs(DType::Float32), 3, {{"training_mode", int64_t{1}}});
  t.infer(train);
  EXPECT_EQ(t.shape(train, 1), "(16)");
  EXPECT_EQ(t.out(train, 0).dtype, DType::Float16);
  EXPECT_EQ(t.out(train, 1).dtype, DType::Float32);  // T2 of input_mean from opset 15
  EXPECT_TRUE(op_helpers::batch_norm_training(t.g.node(train)));

  NodeId eval_with_stats = t.node("BatchNormalization", inputs(DType::Float32), 3);
  EXPECT_TRUE(contains(t.error(eval_with_stats), "training_mode=1"));
  NodeId eval = t.node("BatchNormalization", inputs(DType::Float32), 1);
  t.infer(eval);
  EXPECT_FALSE(op_helpers::batch_norm_training(t.g.node(eval)));

  std::vector<ValueId> wrong{t.input(DType::Float32, nchw(64, 8, 8)), t.input(DType::Float32, Shape::of({32}))};
  for (int i = 0; i < 3; ++i) wrong.push_back(t.input(DType::Float32, Shape::of({64})));
  EXPECT_EQ(t.error(t.node("BatchNormalization", wrong, 1)),
            "BatchNormalization: scale has shape (32) but must be (64), one value per channel of the input (N,64,8,8)");
}

TEST(Normalization, InstanceNormAndLayerNorm) {
  OpGraph t;
  NodeId inorm =
      t.node("InstanceNormalization", {t.input(DType::Float32, nchw(3, 8, 8)), t.input(DType::Float32, Shape::of({3})),
                                       t.input(DType::Float32, Shape::of({3}))});
  t.infer(inorm);
  EXPECT_EQ(t.shape(inorm), "(N,3,8,8)");
  EXPECT_EQ(OpGraph::schema("InstanceNormalization").input_kind(1), InputKind::Weight);

  NodeId ln = t.node("LayerNormalization",
                     {t.input(DType::Float16, Shape({N, Dim(3), Dim(4)})), t.input(DType::Float16, Shape::of({3, 4}))},
                     3, {{"axis", int64_t{1}}});
  t.infer(ln);
  EXPECT_EQ(t.shape(ln), "(N,3,4)");
  EXPECT_EQ(t.shape(ln, 1), "(N,1,1)");
  EXPECT_EQ(t.out(ln, 1).dtype, DType::Float32);  // stash_type defaults to float
  EXPECT_EQ(t.out(ln, 2).dtype, DType::Float32);

  NodeId last =
      t.node("LayerNormalization", {t.input(DType::Float32, Shape({N, Dim(3), Dim(4)})),
                                    t.input(DType::Float32, Shape::of({4})), t.input(DType::Float32, Shape::of({4}))});
  t.infer(last);
  EXPECT_EQ(t.shape(last), "(N,3,4)");
  NodeId bad = t.node("LayerNormalization",
                      {t.input(DType::Float32, Shape({N, Dim(3), Dim(4)})), t.input(DType::Float32, Shape::of({5}))});
  EXPECT_TRUE(contains(t.error(bad), "Scale of shape (5)"));
  NodeId axis = t.node("LayerNormalization",
                       {t.input(DType::Float32, Shape({N, Dim(3)})), t.input(DType::Float32, Shape::of({3}))}, 1,
                       {{"axis", int64_t{2}}});
  EXPECT_TRUE(contains(t.error(axis), "out of range"));

  NodeId lrn = t.node("LRN", {t.input(DType::Float32, nchw(3, 8, 8))}, 1, {{"size", int64_t{5}}});
  t.infer(lrn);
  EXPECT_EQ(t.shape(lrn), "(N,3,8,8)");
  EXPECT_TRUE(contains(t.error(t.node("LRN", {t.input(DType::Float32, nchw(3, 8, 8))})), "size"));
}

// --- softmax ---------------------------------------------------------------------------------------

TEST(Softmax, CoercionBeforeOpset13) {
  OpGraph t;
  t.opset = 11;
  NodeId sm11 = t.node("Softmax", {t.input(DType::Float32, nchw(3, 4, 5))});
  t.infer(sm11);
  EXPECT_EQ(t.shape(sm11), "(N,3,4,5)");
  auto coerced = op_helpers::softmax_axes(t.g.node(sm11), 4);
  EXPECT_EQ(coerced.first, 1);  // default axis 1, normalised over every dim from there
  EXPECT_EQ(coerced.last, 3);
  NodeId out_of_range = t.node("LogSoftmax", {t.input(DType::Float32, Shape({N, Dim(10)}))}, 1, {{"axis", int64_t{2}}});
  EXPECT_TRUE(contains(t.error(out_of_range), "axis 2"));

  t.opset = 13;
  NodeId sm13 = t.node("Softmax", {t.input(DType::Float32, nchw(3, 4, 5))});
  t.infer(sm13);
  auto single = op_helpers::softmax_axes(t.g.node(sm13), 4);
  EXPECT_EQ(single.first, 3);  // default -1, that axis alone
  EXPECT_EQ(single.last, 3);
  NodeId axis1 = t.node("LogSoftmax", {t.input(DType::Float32, nchw(3, 4, 5))}, 1, {{"axis", int64_t{1}}});
  t.infer(axis1);
  EXPECT_EQ(op_helpers::softmax_axes(t.g.node(axis1), 4).last, 1);
  EXPECT_DOUBLE_EQ(t.cost(axis1).forward_flops, 5.0 * 2 * 60);
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
