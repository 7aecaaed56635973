// Every model of Debian's libonnx-testdata node suite either loads or is refused with an onnxtrain::Error
// that names the file; nothing crashes. Where onnxtrain's own schemas infer a static output shape, it
// must equal the shape of the expected output tensor (test_data_set_0/output_N.pb).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>

#include "frontend/importer.h"
#include "frontend/tensor_file.h"

using namespace onnxtrain;
namespace fs = std::filesystem;

namespace {

const fs::path kNodeSuite = "/usr/share/libonnx-testdata/data/node";

// Node tests whose inferred shape may legitimately differ from the stored output, with the reason.
const std::map<std::string, std::string> kShapeExclusions = {};

TEST(OnnxNodeSuite, EveryModelLoadsOrIsRefusedClearly) {
  if (!fs::exists(kNodeSuite)) GTEST_FAIL() << kNodeSuite << " missing: run tools/install-deps.sh (libonnx-testdata)";
  std::vector<fs::path> dirs;
  for (const auto& entry : fs::directory_iterator(kNodeSuite))
    if (fs::exists(entry.path() / "model.onnx")) dirs.push_back(entry.path());
  std::sort(dirs.begin(), dirs.end());
  ASSERT_GT(dirs.size(), 500u);

  int loaded = 0, refused = 0, shapes_checked = 0, shapes_unchecked = 0;
  std::map<std::string, int> refusal_reasons;
  std::vector<std::string> crashes, mismatches;
  for (const fs::path& dir : dirs) {
    const std::string path = (dir / "model.onnx").string();
    const std::string test = dir.filename().string();
    try {
      ImportedModel model = import_model(path);
      ++loaded;
      const Graph& g = model.graph;
      for (size_t i = 0; i < g.outputs.size(); ++i) {
        fs::path expected_file = dir / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb");
        const Value& out = g.value(g.outputs[i]);
        if (!fs::exists(expected_file) || !out.shape.is_static() || !model.unsupported_ops.empty()) {
          ++shapes_unchecked;
          continue;
        }
        Tensor expected = read_tensor_proto_file(expected_file.string());
        ++shapes_checked;
        if (out.shape.static_sizes() != expected.sizes() && !kShapeExclusions.count(test)) {
          mismatches.push_back(test + " output " + std::to_string(i) + ": inferred " + out.shape.to_string() +
                               ", expected " + Shape::of(expected.sizes()).to_string());
        }
      }
    } catch (const Error& e) {
      ++refused;
      const std::string text = e.what();
      EXPECT_NE(text.find(path), std::string::npos) << "refusal does not name the file: " << text;
      // Group by the message without file and node, e.g. "unknown op 'Foo'...".
      std::string reason = e.message().substr(0, 70);
      ++refusal_reasons[reason];
    } catch (const std::exception& e) {
      crashes.push_back(test + ": " + e.what());
    }
  }
  std::printf("libonnx-testdata node suite: %zu models, %d loaded, %d refused with a clear error\n", dirs.size(),
              loaded, refused);
  std::printf("output shapes: %d checked against the expected tensors, %d not checked (no schema or not static)\n",
              shapes_checked, shapes_unchecked);
  for (const auto& [reason, count] : refusal_reasons) std::printf("  refused %3d× %s\n", count, reason.c_str());
  for (const auto& c : crashes) ADD_FAILURE() << "not a clear error: " << c;
  for (const auto& m : mismatches) ADD_FAILURE() << "shape mismatch: " << m;
  EXPECT_EQ(loaded + refused, static_cast<int>(dirs.size()));
}

}  // namespace
