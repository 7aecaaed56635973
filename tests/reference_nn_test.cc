// Reference kernels of the conv, matmul, pooling, normalisation, dropout and loss families against small
// hand-computed cases (float64, as the gradient checks use them), and their prepare-time refusals.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/kernel.h"
#include "kernels/philox.h"

using namespace onnxtrain;

namespace {

Tensor tensor(std::vector<int64_t> sizes, const std::vector<double>& values, DType dtype = DType::Float64) {
  Tensor t(dtype, std::move(sizes));
  EXPECT_EQ(static_cast<size_t>(t.numel()), values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::Float64:
        t.data<double>()[i] = values[i];
        break;
      case DType::Float32:
        t.data<float>()[i] = static_cast<float>(values[i]);
        break;
      case DType::Int64:
        t.data<int64_t>()[i] = static_cast<int64_t>(values[i]);
        break;
      case DType::Int32:
        t.data<int32_t>()[i] = static_cast<int32_t>(values[i]);
        break;
      case DType::Bool:
        t.data<uint8_t>()[i] = values[i] != 0;
        break;
      default:
        ADD_FAILURE() << "unsupported test dtype";
    }
  }
  return t;
}

Tensor iota(std::vector<int64_t> sizes, double first = 0) {
  Tensor t(DType::Float64, std::move(sizes));
  for (int64_t i = 0; i < t.numel(); ++i) t.data<double>()[i] = first + static_cast<double>(i);
  return t;
}

KernelSpec make_spec(const std::string& op, int opset, Attributes attributes, const std::vector<Tensor>& inputs,
                     const std::vector<TensorDesc>& outputs) {
  KernelSpec spec{op, "", opset, std::move(attributes), {}, outputs, "test_node"};
  for (const Tensor& t : inputs) spec.inputs.push_back({t.dtype(), t.sizes()});
  return spec;
}

// Prepares the reference kernel of `op` and runs it once; an omitted input is a default Tensor, an omitted
// output a default TensorDesc.
std::vector<Tensor> run_op(const std::string& op, int opset, Attributes attributes, const std::vector<Tensor>& inputs,
                           const std::vector<TensorDesc>& outputs) {
  const KernelSpec spec = make_spec(op, opset, std::move(attributes), inputs, outputs);
  const KernelEntry* entry = KernelRegistry::builtin().find("", op, DeviceKind::Cpu, kernel_dtype(spec), "reference");
  if (!entry) throw std::runtime_error("no reference kernel for " + op);
  std::unique_ptr<Kernel> kernel = entry->prepare(spec);
  std::vector<Tensor> results;
  std::vector<TensorView> in, out;
  for (const Tensor& t : inputs) in.push_back(TensorView::of(t));
  for (const TensorDesc& d : outputs) results.push_back(d.present() ? Tensor(d.dtype, d.sizes) : Tensor());
  for (Tensor& t : results) out.push_back(TensorView::of(t));
  Stream stream;
  kernel->run(stream, in, out);
  return results;
}

void prepare_only(const std::string& op, int opset, Attributes attributes, const std::vector<Tensor>& inputs,
                  const std::vector<TensorDesc>& outputs) {
  const KernelSpec spec = make_spec(op, opset, std::move(attributes), inputs, outputs);
  const KernelEntry* entry = KernelRegistry::builtin().find("", op, DeviceKind::Cpu, DType::Float64, "reference");
  ASSERT_NE(entry, nullptr);
  entry->prepare(spec);
}

TensorDesc f64(std::vector<int64_t> sizes) { return {DType::Float64, std::move(sizes)}; }

void expect_values(const Tensor& t, const std::vector<double>& expected, double tolerance = 1e-12) {
  const std::vector<double> got = t.dtype() == DType::Int64 ? std::vector<double>() : t.to_double();
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) EXPECT_NEAR(got[i], expected[i], tolerance) << "element " << i;
}

void expect_ints(const Tensor& t, const std::vector<int64_t>& expected) { EXPECT_EQ(t.to_int64(), expected); }

using Ints = std::vector<int64_t>;

TEST(ReferenceConv, ThreeByThreeWithPadsStridesAndBias) {
  auto y = run_op("Conv", 17, {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}},
                  {iota({1, 1, 4, 4}), tensor({1, 1, 3, 3}, std::vector<double>(9, 1.0)), tensor({1}, {1})},
                  {f64({1, 1, 2, 2})});
  expect_values(y[0], {11, 25, 52, 91});
}

TEST(ReferenceConv, GroupsKeepChannelsApart) {
  std::vector<double> x(18, 1.0);
  for (size_t i = 9; i < 18; ++i) x[i] = 2.0;
  std::vector<double> w(18, 1.0);
  for (size_t i = 9; i < 18; ++i) w[i] = i == 13 ? 3.0 : 0.0;  // second filter: centre tap 3
  auto y = run_op("Conv", 17, {{"group", int64_t{2}}}, {tensor({1, 2, 3, 3}, x), tensor({2, 1, 3, 3}, w)},
                  {f64({1, 2, 1, 1})});
  expect_values(y[0], {9, 6});
}

TEST(ReferenceConv, AutoPadSameSplitsTheOddPad) {
  const Tensor x = tensor({1, 1, 5}, {1, 2, 3, 4, 5});
  const Tensor w = tensor({1, 1, 2}, {1, 1});
  expect_values(run_op("Conv", 17, {{"auto_pad", std::string("SAME_UPPER")}}, {x, w}, {f64({1, 1, 5})})[0],
                {3, 5, 7, 9, 5});
  expect_values(run_op("Conv", 17, {{"auto_pad", std::string("SAME_LOWER")}}, {x, w}, {f64({1, 1, 5})})[0],
                {1, 3, 5, 7, 9});
  // Dilation 2 reads every other element: y[i] = x[i] + x[i+2].
  expect_values(run_op("Conv", 17, {{"dilations", Ints{2}}}, {x, w}, {f64({1, 1, 3})})[0], {4, 6, 8});
}

TEST(ReferenceConv, Float32MatchesFloat64) {
  auto y = run_op("Conv", 17, {{"pads", Ints{1, 1, 1, 1}}, {"strides", Ints{2, 2}}},
                  {tensor({1, 1, 4, 4}, iota({1, 1, 4, 4}).to_double(), DType::Float32),
                   tensor({1, 1, 3, 3}, std::vector<double>(9, 1.0), DType::Float32)},
                  {{DType::Float32, {1, 1, 2, 2}}});
  expect_values(y[0], {10, 24, 51, 90});
}

TEST(ReferenceConvTranspose, StridesPadsOutputPaddingAndOutputShape) {
  const Tensor x = tensor({1, 1, 3}, {1, 2, 3});
  const Tensor w = tensor({1, 1, 3}, {1, 1, 1});
  expect_values(run_op("ConvTranspose", 17, {{"strides", Ints{2}}}, {x, w}, {f64({1, 1, 7})})[0],
                {1, 1, 3, 2, 5, 3, 3});
  expect_values(run_op("ConvTranspose", 17, {{"strides", Ints{2}}, {"pads", Ints{1, 1}}}, {x, w}, {f64({1, 1, 5})})[0],
                {1, 3, 2, 5, 3});
  expect_values(
      run_op("ConvTranspose", 17, {{"strides", Ints{2}}, {"output_padding", Ints{1}}}, {x, w}, {f64({1, 1, 8})})[0],
      {1, 1, 3, 2, 5, 3, 3, 0});
  // An output_shape one larger than the full result grows at the end, like output_padding.
  expect_values(
      run_op("ConvTranspose", 17, {{"strides", Ints{2}}, {"output_shape", Ints{8}}}, {x, w}, {f64({1, 1, 8})})[0],
      {1, 1, 3, 2, 5, 3, 3, 0});
}

TEST(ReferenceConvTranspose, GroupsAndBias) {
  // Two input channels, group 2, one output channel per group: each channel is scattered on its own.
  const Tensor x = tensor({1, 2, 2}, {1, 2, 10, 20});
  const Tensor w = tensor({2, 1, 2}, {1, 1, 1, -1});
  auto y = run_op("ConvTranspose", 17, {{"group", int64_t{2}}}, {x, w, tensor({2}, {0.5, 0})}, {f64({1, 2, 3})});
  expect_values(y[0], {1.5, 3.5, 2.5, 10, 10, -20});
}

TEST(ReferenceGemm, TransposesAlphaBetaAndBroadcastC) {
  const Tensor a = tensor({3, 2}, {1, 4, 2, 5, 3, 6});  // Aᵀ = [[1,2,3],[4,5,6]]
  const Tensor b = tensor({2, 3}, {1, 0, 1, 0, 1, 1});  // Bᵀ = [[1,0],[0,1],[1,1]]
  const Attributes attrs{{"transA", int64_t{1}}, {"transB", int64_t{1}}, {"alpha", 2.0}, {"beta", 0.5}};
  expect_values(run_op("Gemm", 13, attrs, {a, b, tensor({2, 1}, {10, 20})}, {f64({2, 2})})[0], {13, 15, 30, 32});
  expect_values(run_op("Gemm", 13, attrs, {a, b, tensor({}, {4})}, {f64({2, 2})})[0], {10, 12, 22, 24});
  expect_values(run_op("Gemm", 13, attrs, {a, b, Tensor()}, {f64({2, 2})})[0], {8, 10, 20, 22});
}

TEST(ReferenceMatMul, BatchBroadcastAndVectors) {
  const Tensor a = tensor({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  const Tensor b = tensor({2, 3, 2}, {1, 2, 3, 4, 5, 6, 1, 1, 1, 1, 1, 1});
  expect_values(run_op("MatMul", 13, {}, {a, b}, {f64({2, 2, 2})})[0], {22, 28, 49, 64, 6, 6, 15, 15});
  const Tensor row = tensor({3}, {1, 2, 3});
  expect_values(run_op("MatMul", 13, {}, {row, b}, {f64({2, 2})})[0], {22, 28, 6, 6});
  expect_values(run_op("MatMul", 13, {}, {a, tensor({3}, {1, 1, 1})}, {f64({1, 2})})[0], {6, 15});
  expect_values(run_op("MatMul", 13, {}, {row, tensor({3}, {4, 5, 6})}, {f64({})})[0], {32});
}

TEST(ReferencePooling, MaxPoolCeilModeWithIndices) {
  Tensor x = iota({1, 2, 4, 4});
  for (int64_t i = 16; i < 32; ++i) x.data<double>()[i] = -static_cast<double>(i - 16);
  const Attributes attrs{{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"ceil_mode", int64_t{1}}};
  auto out = run_op("MaxPool", 12, attrs, {x}, {f64({1, 2, 2, 2}), {DType::Int64, {1, 2, 2, 2}}});
  expect_values(out[0], {10, 11, 14, 15, 0, -2, -8, -10});
  expect_ints(out[1], {10, 11, 14, 15, 16, 18, 24, 26});
  Attributes column_major = attrs;
  column_major["storage_order"] = int64_t{1};
  out = run_op("MaxPool", 12, column_major, {x}, {f64({1, 2, 2, 2}), {DType::Int64, {1, 2, 2, 2}}});
  expect_ints(out[1], {10, 14, 11, 15, 16, 24, 18, 26});
}

TEST(ReferencePooling, AveragePoolCountIncludePad) {
  const Tensor x = iota({1, 1, 3, 3}, 1);
  Attributes attrs{{"kernel_shape", Ints{2, 2}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}};
  expect_values(run_op("AveragePool", 17, attrs, {x}, {f64({1, 1, 2, 2})})[0], {1, 2.5, 5.5, 7});
  attrs["count_include_pad"] = int64_t{1};
  expect_values(run_op("AveragePool", 17, attrs, {x}, {f64({1, 1, 2, 2})})[0], {0.25, 1.25, 2.75, 7});
}

TEST(ReferencePooling, AveragePoolCeilModeDoesNotCountTheOverhang) {
  const Tensor x = tensor({1, 1, 5}, {1, 2, 3, 4, 5});
  for (int64_t include_pad : {0, 1}) {
    const Attributes attrs{
        {"kernel_shape", Ints{2}}, {"strides", Ints{2}}, {"ceil_mode", int64_t{1}}, {"count_include_pad", include_pad}};
    expect_values(run_op("AveragePool", 17, attrs, {x}, {f64({1, 1, 3})})[0], {1.5, 3.5, 5});
  }
}

TEST(ReferencePooling, GlobalPools) {
  const Tensor x = iota({1, 2, 2, 2});
  expect_values(run_op("GlobalAveragePool", 17, {}, {x}, {f64({1, 2, 1, 1})})[0], {1.5, 5.5});
  expect_values(run_op("GlobalMaxPool", 17, {}, {x}, {f64({1, 2, 1, 1})})[0], {3, 7});
}

// X (N=2, C=2): channel 0 = {1, 3} (mean 2, variance 1), channel 1 = {2, 6} (mean 4, variance 4).
std::vector<Tensor> batch_norm_inputs() {
  return {tensor({2, 2}, {1, 2, 3, 6}), tensor({2}, {1, 2}), tensor({2}, {0, 1}), tensor({2}, {0, 0}),
          tensor({2}, {1, 1})};
}

TEST(ReferenceBatchNorm, TrainingModeUsesBatchStatisticsAndUpdatesRunningOnes) {
  auto out = run_op("BatchNormalization", 15, {{"training_mode", int64_t{1}}, {"epsilon", 0.0}}, batch_norm_inputs(),
                    {f64({2, 2}), f64({2}), f64({2})});
  expect_values(out[0], {-1, -1, 1, 3});
  expect_values(out[1], {0.2, 0.4});  // 0·0.9 + mean·0.1
  expect_values(out[2], {1.0, 1.3});  // 1·0.9 + population variance·0.1
}

TEST(ReferenceBatchNorm, OldTrainingFormOutputsSavedStatistics) {
  auto out = run_op("BatchNormalization", 9, {{"epsilon", 0.0}, {"momentum", 0.5}}, batch_norm_inputs(),
                    {f64({2, 2}), f64({2}), f64({2}), f64({2}), f64({2})});
  expect_values(out[0], {-1, -1, 1, 3});
  expect_values(out[1], {1, 2});
  expect_values(out[2], {1, 2.5});
  expect_values(out[3], {2, 4});
  expect_values(out[4], {1, 4});
}

TEST(ReferenceBatchNorm, InferenceUsesTheGivenStatistics) {
  std::vector<Tensor> in = batch_norm_inputs();
  in[3] = tensor({2}, {1, 2});
  in[4] = tensor({2}, {4, 16});
  auto out = run_op("BatchNormalization", 15, {{"epsilon", 0.0}}, in, {f64({2, 2})});
  expect_values(out[0], {0, 1, 1, 3});
}

TEST(ReferenceInstanceNorm, NormalisesEachPlane) {
  auto y = run_op("InstanceNormalization", 6, {{"epsilon", 0.0}},
                  {tensor({1, 2, 2}, {1, 3, 0, 4}), tensor({2}, {1, 2}), tensor({2}, {0, 1})}, {f64({1, 2, 2})});
  expect_values(y[0], {-1, 1, -1, 3});
}

TEST(ReferenceLayerNorm, LastAxisWithStatistics) {
  const Tensor x = tensor({2, 3}, {1, 2, 3, 2, 4, 6});
  auto out = run_op("LayerNormalization", 17, {{"epsilon", 0.0}, {"stash_type", int64_t{11}}},
                    {x, tensor({3}, {1, 1, 2}), tensor({3}, {0, 1, 0})}, {f64({2, 3}), f64({2, 1}), f64({2, 1})});
  const double r = std::sqrt(1.5);
  expect_values(out[0], {-r, 1, 2 * r, -r, 1, 2 * r});
  expect_values(out[1], {2, 4});
  expect_values(out[2], {r, std::sqrt(0.375)});
}

TEST(ReferenceLayerNorm, AxisZeroNormalisesEverything) {
  auto out = run_op("LayerNormalization", 17, {{"epsilon", 0.0}, {"axis", int64_t{0}}},
                    {tensor({2, 1}, {1, 3}), tensor({1}, {2})}, {f64({2, 1})});
  expect_values(out[0], {-2, 2});
}

TEST(ReferenceLrn, AcrossChannels) {
  // size 3: y_c = x_c / (1 + 1/3 · Σ x²)^1 over the neighbouring channels.
  auto y = run_op("LRN", 13, {{"size", int64_t{3}}, {"alpha", 1.0}, {"beta", 1.0}, {"bias", 1.0}},
                  {tensor({1, 3, 1}, {1, 2, 3})}, {f64({1, 3, 1})});
  expect_values(y[0], {1 / (1 + 5.0 / 3), 2 / (1 + 14.0 / 3), 3 / (1 + 13.0 / 3)});
}

TEST(ReferenceDropout, InferenceCopiesAndTrainingScalesTheKeptElements) {
  const Tensor x = iota({1000}, 1);
  const std::vector<TensorDesc> outputs{f64({1000}), {DType::Bool, {1000}}};
  auto out = run_op("Dropout", 13, {}, {x}, outputs);
  expect_values(out[0], x.to_double());
  EXPECT_EQ(out[1].to_int64(), std::vector<int64_t>(1000, 1));

  const Tensor ratio = tensor({}, {0.25});
  const Tensor training = tensor({}, {1}, DType::Bool);
  out = run_op("Dropout", 13, {{"seed", int64_t{7}}}, {x, ratio, training}, outputs);
  const std::vector<int64_t> mask = out[1].to_int64();
  int64_t kept = 0;
  for (size_t i = 0; i < mask.size(); ++i) {
    kept += mask[i];
    EXPECT_DOUBLE_EQ(out[0].data<double>()[i], mask[i] ? x.data<double>()[i] / 0.75 : 0.0);
  }
  EXPECT_GT(kept, 700);
  EXPECT_LT(kept, 800);
  // The mask is the documented Philox draw of each element (kernels/philox.h) for run index 0.
  for (size_t i = 0; i < mask.size(); ++i) {
    EXPECT_EQ(mask[i], dropout_keeps(dropout_draw(random_stream_seed(7, 0), i), 0.25) ? 1 : 0) << "element " << i;
  }
  // A fresh kernel with the same seed draws the same mask.
  EXPECT_EQ(run_op("Dropout", 13, {{"seed", int64_t{7}}}, {x, ratio, training}, outputs)[1].to_int64(), mask);
}

// scores rows: [0,0] → log p = [-ln 2, -ln 2]; [0, ln 3] → p = [1/4, 3/4]; the third is ignored.
std::vector<Tensor> loss_inputs(DType label_dtype) {
  return {tensor({3, 2}, {0, 0, 0, std::log(3.0), 1, 1}), tensor({3}, {0, 1, -100}, label_dtype), tensor({2}, {2, 1})};
}

TEST(ReferenceLosses, SoftmaxCrossEntropyWithWeightsAndIgnoreIndex) {
  const double e0 = 2 * std::log(2.0), e1 = -std::log(0.75);
  for (DType labels : {DType::Int64, DType::Int32}) {
    auto none =
        run_op("SoftmaxCrossEntropyLoss", 13, {{"reduction", std::string("none")}, {"ignore_index", int64_t{-100}}},
               loss_inputs(labels), {f64({3}), f64({3, 2})});
    expect_values(none[0], {e0, e1, 0});
    expect_values(none[1],
                  {-std::log(2.0), -std::log(2.0), std::log(0.25), std::log(0.75), -std::log(2.0), -std::log(2.0)});
    expect_values(
        run_op("SoftmaxCrossEntropyLoss", 13, {{"reduction", std::string("sum")}, {"ignore_index", int64_t{-100}}},
               loss_inputs(labels), {f64({})})[0],
        {e0 + e1});
    expect_values(
        run_op("SoftmaxCrossEntropyLoss", 13, {{"ignore_index", int64_t{-100}}}, loss_inputs(labels), {f64({})})[0],
        {(e0 + e1) / 3});  // mean divides by the weights of the elements not ignored
  }
}

TEST(ReferenceLosses, NegativeLogLikelihoodOverSpatialDims) {
  // input (N=1, C=2, D=2): class 0 = {-1, -2}, class 1 = {-3, -4}; target (1, 2) = {1, 0}.
  const Tensor input = tensor({1, 2, 2}, {-1, -2, -3, -4});
  const Tensor target = tensor({1, 2}, {1, 0}, DType::Int32);
  expect_values(
      run_op("NegativeLogLikelihoodLoss", 13, {{"reduction", std::string("none")}}, {input, target}, {f64({1, 2})})[0],
      {3, 2});
  expect_values(run_op("NegativeLogLikelihoodLoss", 13, {}, {input, target}, {f64({})})[0], {2.5});
  expect_values(run_op("NegativeLogLikelihoodLoss", 13, {{"ignore_index", int64_t{0}}}, {input, target}, {f64({})})[0],
                {3});
}

TEST(ReferenceLosses, LabelOutOfRangeIsAnError) {
  const Tensor input = tensor({1, 2}, {-1, -2});
  EXPECT_THROW(run_op("NegativeLogLikelihoodLoss", 13, {}, {input, tensor({1}, {2}, DType::Int64)}, {f64({})}), Error);
}

TEST(ReferenceNnKernels, UnsupportedAttributesAndDtypesAreRefusedAtPrepare) {
  const Tensor x = iota({1, 1, 4, 4});
  const Tensor w = tensor({1, 1, 3, 3}, std::vector<double>(9, 1.0));
  EXPECT_THROW(prepare_only("Conv", 17, {{"auto_pad", std::string("SAME_MIDDLE")}}, {x, w}, {f64({1, 1, 2, 2})}),
               Error);
  EXPECT_THROW(prepare_only("Conv", 17, {{"group", int64_t{2}}}, {x, w}, {f64({1, 1, 2, 2})}), Error);
  EXPECT_THROW(prepare_only("Conv", 17, {{"strides", Ints{1}}}, {x, w}, {f64({1, 1, 2, 2})}), Error);
  EXPECT_THROW(prepare_only("Conv", 17, {}, {x, tensor({1, 1, 3, 3}, std::vector<double>(9, 1.0), DType::Float32)},
                            {f64({1, 1, 2, 2})}),
               Error);
  EXPECT_THROW(prepare_only("MaxPool", 12, {{"kernel_shape", Ints{2, 2}}, {"storage_order", int64_t{2}}}, {x},
                            {f64({1, 1, 3, 3})}),
               Error);
  EXPECT_THROW(prepare_only("MaxPool", 12, {}, {x}, {f64({1, 1, 3, 3})}), Error);  // kernel_shape is required
  EXPECT_THROW(prepare_only("AveragePool", 12, {{"kernel_shape", Ints{2, 2}}, {"count_include_pad", int64_t{2}}}, {x},
                            {f64({1, 1, 3, 3})}),
               Error);
  EXPECT_THROW(prepare_only("Gemm", 13, {}, {iota({2, 3}), iota({2, 3})}, {f64({2, 3})}), Error);
  EXPECT_THROW(prepare_only("MatMul", 13, {}, {iota({2, 2, 3}), iota({3, 3, 2})}, {f64({3, 2, 2})}), Error);
  EXPECT_THROW(prepare_only("BatchNormalization", 15, {}, batch_norm_inputs(), {f64({2, 2}), f64({2}), f64({2})}),
               Error);
  EXPECT_THROW(
      prepare_only("LayerNormalization", 17, {}, {iota({2, 3}), iota({3})}, {f64({2, 3}), {DType::Float16, {2, 1}}}),
      Error);
  EXPECT_THROW(prepare_only("LayerNormalization", 17, {{"axis", int64_t{2}}}, {iota({2, 3}), iota({3})}, {f64({2, 3})}),
               Error);
  EXPECT_THROW(prepare_only("SoftmaxCrossEntropyLoss", 13, {{"reduction", std::string("average")}},
                            loss_inputs(DType::Int64), {f64({})}),
               Error);
  EXPECT_THROW(prepare_only("SoftmaxCrossEntropyLoss", 13, {}, {iota({3, 2}), iota({3})}, {f64({})}),
               Error);                                                         // float labels
  EXPECT_THROW(prepare_only("LRN", 13, {}, {x}, {f64({1, 1, 4, 4})}), Error);  // size is required
}

TEST(ReferenceNnKernels, DropoutRatioOutsideTheUnitIntervalIsAnErrorInTraining) {
  EXPECT_THROW(run_op("Dropout", 13, {}, {iota({4}), tensor({}, {1.0}), tensor({}, {1}, DType::Bool)}, {f64({4})}),
               Error);
}

}  // namespace
