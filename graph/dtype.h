// Element types of tensors. The numbering is onnxtrain's own; frontend/ maps ONNX's codes onto it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace onnxtrain {

enum class DType {
  Undefined,
  Float32,
  Float64,
  Float16,
  BFloat16,
  Int8,
  UInt8,
  Int16,
  UInt16,
  Int32,
  UInt32,
  Int64,
  UInt64,
  Bool,
  String,
  Complex64,
  Complex128,
};

std::size_t dtype_size(DType type);       // bytes per element; 0 for Undefined/String
std::string_view dtype_name(DType type);  // "float32", "int64", ...
bool is_floating(DType type);
bool is_integer(DType type);  // signed or unsigned integers, not bool
// ONNX's TensorProto::DataType code (as models store it, also in Cast's `to`); Undefined when unknown.
DType dtype_from_onnx_code(int64_t code);

}  // namespace onnxtrain
