// Conversion between ONNX TensorProto / type codes and onnxtrain's Tensor / DType (frontend-internal).
#pragma once

#include <onnx/onnx_pb.h>

#include "graph/tensor.h"

namespace onnxtrain {

// The tensor's data; raw_data or typed fields. External data must have been loaded already.
Tensor tensor_from_proto(const onnx::TensorProto& proto);

}  // namespace onnxtrain
