// Neural-network op schemas (graph/ops/): Conv and ConvTranspose, Gemm and MatMul, pooling, BatchNorm,
// InstanceNorm and LayerNorm, Softmax: shape inference with symbolic batch dims, opset differences, costs
// and errors that name the node. (math_ops_test.cc: the elementwise, reduction, Dropout and loss ops.)
#include <gtest/gtest.h>

#include <cmath>

#include "graph/graph.h"
#include "graph/op_schema.h"
#include "tests/op_graph.h"

using namespace onnxtrain;
using namespace onnxtrain::testing_support;

namespace {

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

}  // namespace
