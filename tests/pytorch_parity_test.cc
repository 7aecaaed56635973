// Ops beyond ONNX's node tests (which check their forward, run by onnx_conformance_test) and the harness's
// finite differences, in the graphs PyTorch's exporters make of them, with PyTorch's first-step gradients
// (each fixture's script beside it):
// - ScatterND: slice assignment into an activation (tests/data/scatter_nd/);
// - Tile with repeats known only at run time: a table repeated once per row of the batch, imported with the
//   batch symbolic, as `train` imports it (tests/data/tile/; DeBERTa-v2's relative positions).
#include <gtest/gtest.h>

#include <ostream>

#include "tests/pytorch_reference.h"

namespace onnxtrain {
namespace {

struct ParityCase {
  std::string dir, model, reference;
  size_t parameters = 0;
  bool bind_batch = true;
  friend void PrintTo(const ParityCase& c, std::ostream* os) { *os << c.dir << "/" << c.model; }
};

class PyTorchParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(PyTorchParity, FirstStepGradientsMatchPyTorch) {
  const ParityCase& c = GetParam();
  const std::string dir = std::string(ONNXTRAIN_SOURCE_DIR) + "/tests/data/" + c.dir + "/";
  testing_support::expect_first_step_matches_pytorch(dir + c.model, dir + c.reference, c.parameters, c.bind_batch);
}

// ScatterND: both Linears' weights and biases and the assigned parameter; Tile: the same and the table.
INSTANTIATE_TEST_SUITE_P(
    Exports, PyTorchParity,
    ::testing::Values(ParityCase{"scatter_nd", "scatter_nd_ts.onnx", "scatter_nd_reference.npz", 5},
                      ParityCase{"scatter_nd", "scatter_nd_dynamo.onnx", "scatter_nd_reference.npz", 5},
                      ParityCase{"tile", "tile_ts.onnx", "tile_reference.npz", 5, false},
                      ParityCase{"tile", "tile_dynamo.onnx", "tile_reference.npz", 5, false}),
    [](const auto& info) {
      std::string name = info.param.model.substr(0, info.param.model.find('.'));
      return name;
    });

}  // namespace
}  // namespace onnxtrain
