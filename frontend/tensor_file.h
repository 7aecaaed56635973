// Reading a tensor saved as an ONNX TensorProto file (.pb), as ONNX's node tests and `onnxtrain run`
// inputs use.
//
//   Tensor t = read_tensor_proto_file("test_data_set_0/output_0.pb");
#pragma once

#include <string>

#include "graph/tensor.h"

namespace onnxtrain {

// Throws Error naming the file when it is missing or not a TensorProto.
Tensor read_tensor_proto_file(const std::string& path);

}  // namespace onnxtrain
