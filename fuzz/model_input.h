// The model fuzz targets' one test: the input as scratch_dir()/model.onnx, imported as `onnxtrain inspect`
// and `train` import it (import_model: parse, external data, function inlining, checks, ONNX's checker,
// shape inference and version converter, onnxtrain's schemas, constant folding). External data resolves
// against the model's folder, where weights.bin (64 KiB of small floats) lies for models that name it.
#pragma once

#include <cstring>
#include <vector>

#include "frontend/importer.h"
#include "fuzz/fuzz_input.h"

namespace onnxtrain::fuzz {

inline constexpr char kExternalDataFile[] = "weights.bin";

inline void import_model_input(const uint8_t* data, size_t size) {
  static const bool external_data_written = [] {
    std::vector<float> values(16384);
    for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i % 17) * 0.125f - 1.0f;
    write_bytes(kExternalDataFile, values.data(), values.size() * sizeof(float));
    return true;
  }();
  (void)external_data_written;
  const std::string path = write_input("model.onnx", data, size);
  expect_clean([&] { import_model(path); });
}

}  // namespace onnxtrain::fuzz
