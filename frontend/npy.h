// NumPy .npy files (format versions 1.0 to 3.0, little-endian, C order): how `onnxtrain run` reads inputs
// and writes outputs, and how users compare with PyTorch.
//
//   Tensor x = read_npy("x.npy");
//   write_npy("logits.npy", logits);
#pragma once

#include <string>

#include "graph/tensor.h"

namespace onnxtrain {

// Throws Error naming the file (missing, not .npy, Fortran order, big-endian, unsupported dtype, truncated).
Tensor read_npy(const std::string& path);
void write_npy(const std::string& path, const Tensor& tensor);

// A tensor file by extension: .npy, or .pb (an ONNX TensorProto).
Tensor read_tensor_file(const std::string& path);

}  // namespace onnxtrain
