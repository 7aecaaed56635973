// Resize and Upsample beyond ONNX's node tests (which check the forward sampling of every mode, run by
// onnx_conformance_test): PyTorch's exports of a network that enlarges and shrinks as UNets and
// F.interpolate do train with PyTorch's gradients (tests/data/resize/make_resize_exports.py); the gathered
// gradient (the CUDA kernels' code, run here on the host) is the exact transpose of the forward map for
// every mode and coordinate transformation; and what is not built is refused at import, naming the node.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "executor/inference_session.h"
#include "executor/trainer.h"
#include "frontend/dataset_readers.h"
#include "frontend/importer.h"
#include "graph/op_schema.h"
#include "kernels/resize_gather.h"
#include "tests/pytorch_reference.h"

namespace onnxtrain {
namespace {

const std::string kDir = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/resize/";

class ResizeExport : public ::testing::TestWithParam<std::string> {};

// The first step's loss and every parameter's gradient within 10x PyTorch's own float32 error (against
// its float64 run) plus 1e-6 of the tensor's largest element: five layers' weights and biases.
TEST_P(ResizeExport, FirstStepGradientsMatchPyTorch) {
  testing_support::expect_first_step_matches_pytorch(kDir + GetParam(), kDir + "upsample_reference.npz", 10);
}

INSTANTIATE_TEST_SUITE_P(TorchScriptAndDynamo, ResizeExport,
                         ::testing::Values("upsample_ts.onnx", "upsample_dynamo.onnx"), [](const auto& info) {
                           return info.param.find("dynamo") != std::string::npos ? "dynamo" : "torchscript";
                         });

// y = A·x for the forward's tables; the gathered gradient must equal Aᵀ·dy for every input element, so
// each axis's reach covers every output that reads it (a missed one would drop a term). Random lengths,
// scales and rois, in every mode and coordinate transformation, with rank 3.
TEST(Resize, GatheredGradientIsTheTransposeOfTheForward) {
  std::mt19937 rng(7);
  const char* modes[] = {"nearest", "linear", "cubic"};
  const char* coordinates[] = {"half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
                               "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  const char* nearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  int configurations = 0;
  for (const char* mode : modes) {
    for (const char* coordinate : coordinates) {
      for (int trial = 0; trial < 6; ++trial) {
        Attributes a{{"mode", std::string(mode)},
                     {"coordinate_transformation_mode", std::string(coordinate)},
                     {"nearest_mode", std::string(nearest[trial % 4])},
                     {"exclude_outside", int64_t{trial % 2}}};
        const ResizeSampling sampling = decode_resize_sampling(a, false);
        ASSERT_TRUE(sampling.error.empty()) << sampling.error;
        const std::vector<int64_t> in = {2, 1 + static_cast<int64_t>(rng() % 6), 1 + static_cast<int64_t>(rng() % 5)};
        std::uniform_real_distribution<double> scale(0.3, 3.2), roi(-0.4, 1.4);
        std::vector<double> scales = {1.0, scale(rng), scale(rng)};
        std::vector<double> box = {0, roi(rng), roi(rng), 1, roi(rng), roi(rng)};  // a reversed roi too
        // tf_crop_and_resize by sizes: a reversed roi would give a negative length from scales.
        const bool crop = std::string(coordinate) == "tf_crop_and_resize";
        std::vector<int64_t> sizes = {2, 1 + static_cast<int64_t>(rng() % 7), 1 + static_cast<int64_t>(rng() % 7)};
        std::string error;
        const std::vector<ResizeAxis> axes = crop
                                                 ? resolve_resize_axes(sampling, in, &box, nullptr, &sizes, &error)
                                                 : resolve_resize_axes(sampling, in, nullptr, &scales, nullptr, &error);
        ASSERT_FALSE(axes.empty()) << error;
        const ResizeTables tables = make_resize_tables(sampling, axes);
        const ResizeGeometry g = resize_geometry(axes, tables);
        const int64_t n_in = in[0] * in[1] * in[2], n_out = axes[0].out * axes[1].out * axes[2].out;
        std::vector<double> a_matrix(static_cast<size_t>(n_out * n_in)), unit(static_cast<size_t>(n_in));
        for (int64_t j = 0; j < n_in; ++j) {
          unit.assign(unit.size(), 0.0);
          unit[j] = 1.0;
          for (int64_t o = 0; o < n_out; ++o)
            a_matrix[o * n_in + j] = resize_value(g, tables.taps.data(), unit.data(), o, 0.0);
        }
        std::vector<double> dy(static_cast<size_t>(n_out));
        for (double& v : dy) v = std::uniform_real_distribution<double>(-1, 1)(rng);
        for (int64_t j = 0; j < n_in; ++j) {
          double expected = 0;
          for (int64_t o = 0; o < n_out; ++o) expected += a_matrix[o * n_in + j] * dy[o];
          const double got = resize_gradient(g, tables.taps.data(), tables.reach.data(), dy.data(), j);
          ASSERT_NEAR(got, expected, 1e-12) << mode << " " << coordinate << " input " << j << " of sizes " << in[1]
                                            << "x" << in[2] << ", scales " << scales[1] << ", " << scales[2];
        }
        ++configurations;
      }
    }
  }
  EXPECT_EQ(configurations, 3 * 7 * 6);
}

// antialias (opset 18) is not built: the import names the node and the attribute, not a wrong result.
TEST(Resize, AntialiasIsRefusedNamingTheNode) {
  try {
    import_model(kDir + "resize_antialias.onnx");
    FAIL() << "antialias=1 was accepted";
  } catch (const Error& e) {
    const std::string text = e.what();
    EXPECT_NE(text.find("shrink_aa"), std::string::npos) << text;
    EXPECT_NE(text.find("antialias"), std::string::npos) << text;
  }
}

// Upsample (opset 9) and Resize-10 sample asymmetrically. ONNX's version converter, which the import ran
// on opsets below 13, made them half-pixel Resizes (2.98 from ONNX Runtime on nearest x1.6, an outside
// check); and output 8 of nearest x1.6 falls on input 5.0 in float (ONNX Runtime, PyTorch) but 4.99999992
// in double. Both run as ONNX Runtime runs them now, for the reference and the CPU kernels; so does
// TorchScript's recompute_scale_factor=True, whose sizes come from Floor (which onnxtrain lacked).
TEST(Resize, OldOpsetsSampleAsOnnxRuntimeDoes) {
  const NpzArchive ref = read_npz(kDir + "legacy_reference.npz");
  for (const std::string name : {"upsample9_nearest", "resize10_bilinear", "recompute_scale_ts"}) {
    const ImportedModel model = import_model(kDir + name + ".onnx", {.batch = 1});
    ASSERT_TRUE(model.unsupported_ops.empty()) << name << ": " << model.unsupported_ops.front();
    bool kept = false;
    for (const std::string& note : model.notes) kept = kept || note.find("kept opset") != std::string::npos;
    EXPECT_EQ(kept, name != "recompute_scale_ts") << name << ": converted to another opset";
    for (const std::string kernels : {"reference", ""}) {
      InferenceSession session(model.graph, kernels);
      const Tensor y = session.run({{"x", *ref.find("x")}}).at("y");
      const std::vector<double> got = y.to_double(), want = ref.find(name)->to_double();
      ASSERT_EQ(got.size(), want.size()) << name;
      EXPECT_LE(testing_support::max_abs_difference(got, want), 1e-6)
          << name << " with the " << (kernels.empty() ? "cpu" : kernels) << " kernels";
    }
  }
}

// tf_crop_and_resize by scales over every axis lost the symbolic batch ((?,3,6,9)) though its roi is 0..1
// and its scale 1 there, and training then failed at a Gemm's gradient (an outside check).
TEST(Resize, ACropThatKeepsTheBatchKeepsItsSymbol) {
  const ImportedModel model = import_model(kDir + "crop_batch.onnx");
  const Shape& y = model.graph.value(model.graph.outputs.at(0)).shape;
  ASSERT_TRUE(y.rank_known);
  EXPECT_TRUE(y.dims[0].is_symbolic()) << y.to_string();
  EXPECT_EQ(y.dims[2], Dim(12)) << y.to_string();  // floor(8 x 0.8 x 2)
}

// The planner prices a Resize by its taps (it priced none before): each output element a multiply and an
// add per tap combination, 1, 2 or 4 taps per resized axis.
TEST(Resize, CostCountsTheTapsOfEveryResizedAxis) {
  const OpSchema* schema = OpRegistry::builtin().find("", "Resize");
  ASSERT_NE(schema, nullptr);
  ASSERT_NE(schema->cost, nullptr);
  Node node;
  node.op_type = "Resize";
  const Shape in = Shape::of({2, 3, 8, 8}), out = Shape::of({2, 3, 16, 16});
  auto flops = [&](const std::string& mode) {
    node.attributes = Attributes{{"mode", mode}};
    return schema->cost(CostContext{.node = node, .inputs = {in}, .outputs = {out}}).forward_flops;
  };
  const double elements = 2 * 3 * 16 * 16;
  EXPECT_EQ(flops("nearest"), 2 * elements);
  EXPECT_EQ(flops("linear"), 2 * 4 * elements);
  EXPECT_EQ(flops("cubic"), 2 * 16 * elements);
}

}  // namespace
}  // namespace onnxtrain
