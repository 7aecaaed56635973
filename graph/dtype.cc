#include "graph/dtype.h"

#include <iterator>

namespace onnxtrain {

std::size_t dtype_size(DType type) {
  switch (type) {
    case DType::Float32:
    case DType::Int32:
    case DType::UInt32:
      return 4;
    case DType::Float64:
    case DType::Int64:
    case DType::UInt64:
    case DType::Complex64:
      return 8;
    case DType::Float16:
    case DType::BFloat16:
    case DType::Int16:
    case DType::UInt16:
      return 2;
    case DType::Int8:
    case DType::UInt8:
    case DType::Bool:
      return 1;
    case DType::Complex128:
      return 16;
    case DType::Undefined:
    case DType::String:
      return 0;
  }
  return 0;
}

std::string_view dtype_name(DType type) {
  switch (type) {
    case DType::Undefined:
      return "undefined";
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
    case DType::Float16:
      return "float16";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Int8:
      return "int8";
    case DType::UInt8:
      return "uint8";
    case DType::Int16:
      return "int16";
    case DType::UInt16:
      return "uint16";
    case DType::Int32:
      return "int32";
    case DType::UInt32:
      return "uint32";
    case DType::Int64:
      return "int64";
    case DType::UInt64:
      return "uint64";
    case DType::Bool:
      return "bool";
    case DType::String:
      return "string";
    case DType::Complex64:
      return "complex64";
    case DType::Complex128:
      return "complex128";
  }
  return "undefined";
}

bool is_floating(DType type) {
  return type == DType::Float32 || type == DType::Float64 || type == DType::Float16 || type == DType::BFloat16;
}

bool is_integer(DType type) {
  switch (type) {
    case DType::Int8:
    case DType::UInt8:
    case DType::Int16:
    case DType::UInt16:
    case DType::Int32:
    case DType::UInt32:
    case DType::Int64:
    case DType::UInt64:
      return true;
    default:
      return false;
  }
}

DType dtype_from_onnx_code(int64_t code) {
  // In code order: 0 = UNDEFINED, 1 = FLOAT, ... 16 = BFLOAT16.
  constexpr DType kByCode[] = {DType::Undefined,  DType::Float32, DType::UInt8,  DType::Int8,   DType::UInt16,
                               DType::Int16,      DType::Int32,   DType::Int64,  DType::String, DType::Bool,
                               DType::Float16,    DType::Float64, DType::UInt32, DType::UInt64, DType::Complex64,
                               DType::Complex128, DType::BFloat16};
  return code >= 0 && code < static_cast<int64_t>(std::size(kByCode)) ? kByCode[code] : DType::Undefined;
}

}  // namespace onnxtrain
