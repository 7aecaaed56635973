// Einsum, lowered at import to Transpose, Reshape, ReduceSum and MatMul (frontend/einsum_lowering.h; ONNX's
// node tests check the forward of its equations, run by onnx_conformance_test): an attention block written
// with torch.einsum, exported by TorchScript and by dynamo, trains with PyTorch's gradients
// (tests/data/einsum/make_einsum_exports.py); the written model keeps its Einsum nodes; what is not lowered
// (a diagonal) is refused at import, naming the node.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <fstream>

#include "executor/inference_session.h"
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

// A model of one Einsum node named "e" over inputs of these dims (a string is a symbol), its output of
// `output_rank` dims, written to a file.
std::string einsum_model(const std::string& name, const std::string& equation,
                         const std::vector<std::vector<std::string>>& inputs, int output_rank) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto& g = *m.mutable_graph();
  g.set_name("g");
  onnx::NodeProto& n = *g.add_node();
  n.set_name("e");
  n.set_op_type("Einsum");
  n.add_output("y");
  onnx::AttributeProto& a = *n.add_attribute();
  a.set_name("equation");
  a.set_type(onnx::AttributeProto::STRING);
  a.set_s(equation);
  for (size_t i = 0; i < inputs.size(); ++i) {
    onnx::ValueInfoProto& v = *g.add_input();
    v.set_name("x" + std::to_string(i));
    n.add_input(v.name());
    auto& t = *v.mutable_type()->mutable_tensor_type();
    t.set_elem_type(onnx::TensorProto::FLOAT);
    for (const std::string& d : inputs[i]) {
      if (std::isdigit(static_cast<unsigned char>(d[0])))
        t.mutable_shape()->add_dim()->set_dim_value(std::stoll(d));
      else
        t.mutable_shape()->add_dim()->set_dim_param(d);
    }
  }
  g.add_output()->set_name("y");
  auto& out = *g.mutable_output(0)->mutable_type()->mutable_tensor_type();
  out.set_elem_type(onnx::TensorProto::FLOAT);
  for (int d = 0; d < output_rank; ++d) out.mutable_shape()->add_dim();  // sizes left to inference
  const std::string path = testing::TempDir() + "/" + name + ".onnx";
  std::ofstream(path, std::ios::binary) << m.SerializeAsString();
  return path;
}

Tensor counting(const std::vector<int64_t>& sizes) {
  Tensor t(DType::Float32, sizes);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i % 7) - 3.0f;
  return t;
}

// An outside check: an implicit output with an uppercase letter ("iJ" is "iJ->Ji": numpy orders by character
// code) aborted inside Debian's ONNX library at opset 13. The import writes the output out first.
TEST(Einsum, AnImplicitUppercaseOutputIsWrittenOutBeforeOnnxSeesIt) {
  const ImportedModel model = import_model(einsum_model("implicit_upper", "iJ", {{"2", "3"}}, 2));
  const Tensor x = counting({2, 3});
  const Tensor y = InferenceSession(model.graph).run({{"x0", x}}).at("y");
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{3, 2}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(y.data<float>()[j * 2 + i], x.data<float>()[i * 3 + j]);
}

// "btd,de->bte" over a batch and a sequence of symbols (a Linear over a sequence, the commonest einsum of a
// dynamic-sequence export): the free axes' sizes come from the operands' shapes at run time.
TEST(Einsum, TwoSymbolicFreeAxesAreSizedFromTheOperands) {
  const std::string path = einsum_model("linear_seq", "btd,de->bte", {{"batch", "seq", "4"}, {"4", "5"}}, 3);
  ImportedModel model = import_model(path);
  EXPECT_EQ(model.graph.value(model.graph.outputs[0]).shape.to_string(), "(batch,seq,5)");
  model = import_model(path, {.dims = {{"seq", 3}}});
  const Tensor a = counting({2, 3, 4}), w = counting({4, 5});
  const Tensor y = InferenceSession(model.graph).run({{"x0", a}, {"x1", w}}).at("y");
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{2, 3, 5}));
  for (int64_t r = 0; r < 6; ++r) {
    for (int64_t e = 0; e < 5; ++e) {
      float want = 0;
      for (int64_t d = 0; d < 4; ++d) want += a.data<float>()[r * 4 + d] * w.data<float>()[d * 5 + e];
      EXPECT_EQ(y.data<float>()[r * 5 + e], want) << r << "," << e;
    }
  }
}

// A contraction it refuses halfway (after its Transpose, two flattened groups of symbolic size): inspect listed
// a node of empty name after such a refusal, read from memory the lowering's new nodes had moved (an outside
// check; ASan's build of this test catches it). The Transpose left reads the input and feeds nothing: gone.
TEST(Einsum, ARefusalHalfwayLeavesTheGraphAsItWas) {
  const std::string path = einsum_model("two_groups", "kij,kl->ijl", {{"k", "i", "j"}, {"k", "5"}}, 3);
  const ImportedModel model = import_model(path, {.keep_untypable = true});
  ASSERT_EQ(model.untyped_nodes.size(), 1u);
  EXPECT_EQ(model.untyped_nodes[0].rfind("node 'e' (Einsum): ", 0), 0u) << model.untyped_nodes[0];
  EXPECT_EQ(model.graph.node_count(), 1u);
  EXPECT_THROW(import_model(path), Error);
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
