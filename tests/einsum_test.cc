// Einsum, lowered at import to Transpose, Reshape, ReduceSum and MatMul (frontend/einsum_lowering.h; ONNX's
// node tests check the forward of its equations, run by onnx_conformance_test): an attention block written
// with torch.einsum, exported by TorchScript and by dynamo, trains with PyTorch's gradients
// (tests/data/einsum/make_einsum_exports.py); the written model keeps its Einsum nodes; what is not lowered
// (a diagonal) is refused at import, naming the node.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "frontend/importer.h"
#include "graph/error.h"
#include "tests/cli_run.h"
#include "tests/pytorch_reference.h"

namespace onnxtrain {
namespace {

const std::string kDir = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/einsum/";

class EinsumExport : public ::testing::TestWithParam<std::string> {};

// Four projection and output weights, the classifier's weight and bias.
TEST_P(EinsumExport, FirstStepGradientsMatchPyTorch) {
  const ImportedModel model = import_model(kDir + GetParam());
  EXPECT_TRUE(std::ranges::any_of(model.notes, [](const std::string& n) { return n.find("lowered 8 Einsum") == 0; }));
  testing_support::expect_first_step_matches_pytorch(kDir + GetParam(), kDir + "einsum_reference.npz", 6);
}

INSTANTIATE_TEST_SUITE_P(TorchScriptAndDynamo, EinsumExport, ::testing::Values("einsum_ts.onnx", "einsum_dynamo.onnx"),
                         [](const auto& info) {
                           return info.param.find("dynamo") != std::string::npos ? "dynamo" : "torchscript";
                         });

// The trained model is the input model with new weights: its Einsum nodes, not their lowering.
TEST(Einsum, TheWrittenModelKeepsTheEinsumNodes) {
  const std::string out = testing::TempDir() + "/einsum_trained.onnx";
  const testing_support::CliRun r =
      testing_support::run_cli("train " + kDir + "einsum_ts.onnx --data npz:" + kDir +
                               "einsum_reference.npz --epochs 1 --validation 0 --test-data none -o " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  onnx::ModelProto m;
  std::ifstream in(out, std::ios::binary);
  ASSERT_TRUE(m.ParseFromIstream(&in));
  int einsums = 0, matmuls = 0;
  for (const auto& n : m.graph().node()) {
    einsums += n.op_type() == "Einsum" ? 1 : 0;
    matmuls += n.op_type() == "MatMul" ? 1 : 0;
  }
  EXPECT_EQ(einsums, 8);
  EXPECT_EQ(matmuls, 0);
  std::filesystem::remove(out);
}

TEST(Einsum, ADiagonalIsRefusedNamingTheNode) {
  try {
    import_model(kDir + "einsum_diagonal.onnx");
    FAIL() << "a diagonal was lowered";
  } catch (const Error& e) {
    EXPECT_EQ(e.node(), "diagonal");
    EXPECT_NE(std::string(e.what()).find("repeated within one term"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace onnxtrain
