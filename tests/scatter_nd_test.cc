// ScatterND beyond ONNX's node tests (which check its forward, run by onnx_conformance_test) and the
// harness's finite differences: slice assignment into an activation, exported by TorchScript and by
// dynamo, trains with PyTorch's gradients (tests/data/scatter_nd/make_scatter_nd_exports.py).
#include <gtest/gtest.h>

#include "tests/pytorch_reference.h"

namespace onnxtrain {
namespace {

const std::string kDir = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/scatter_nd/";

class ScatterNDExport : public ::testing::TestWithParam<std::string> {};

// Both Linears' weights and biases and the assigned parameter p.
TEST_P(ScatterNDExport, FirstStepGradientsMatchPyTorch) {
  testing_support::expect_first_step_matches_pytorch(kDir + GetParam(), kDir + "scatter_nd_reference.npz", 5);
}

INSTANTIATE_TEST_SUITE_P(TorchScriptAndDynamo, ScatterNDExport,
                         ::testing::Values("scatter_nd_ts.onnx", "scatter_nd_dynamo.onnx"), [](const auto& info) {
                           return info.param.find("dynamo") != std::string::npos ? "dynamo" : "torchscript";
                         });

}  // namespace
}  // namespace onnxtrain
