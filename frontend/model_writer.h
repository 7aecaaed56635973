// Writing a trained model: the original .onnx file with some initializers' data replaced (trained
// parameters, BatchNorm running statistics), everything else as it was. What `onnxtrain train -o` writes.
//
//   write_trained_model("models/cnn_opset17.onnx", "out/cnn_trained.onnx", trainer.trained_initializers());
//
// Tensors kept in external data files are loaded and written inline, so the result is one self-contained
// file. The file appears atomically (written to a temporary file beside it, then renamed) and passes the
// ONNX checker (for the opsets and IR versions Debian's ONNX 1.12 knows).
#pragma once

#include <map>
#include <string>

#include "graph/tensor.h"

namespace onnxtrain {

// Throws Error naming the file: the source cannot be read, a named initializer is missing from it or has
// another dtype or element count, the output cannot be written, or the checker rejects the result.
void write_trained_model(const std::string& source_model, const std::string& out_path,
                         const std::map<std::string, Tensor>& initializers);

}  // namespace onnxtrain
