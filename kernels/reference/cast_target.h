// Cast's `to` attribute, read as the reference and "cuda" Cast kernels read it: an ONNX TensorProto code
// or, at opset 1, a type name. Fails naming the op and node when it is absent or names no tensor type.
//
//   const DType to = cast_target(spec);   // "to" = 1 or "FLOAT" -> DType::Float32
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

#include "kernels/reference/common.h"

namespace onnxtrain::reference {

inline DType cast_target(const KernelSpec& spec) {
  static const std::pair<const char*, DType> kNames[] = {
      {"FLOAT", DType::Float32}, {"DOUBLE", DType::Float64}, {"FLOAT16", DType::Float16}, {"BFLOAT16", DType::BFloat16},
      {"INT8", DType::Int8},     {"UINT8", DType::UInt8},    {"INT16", DType::Int16},     {"UINT16", DType::UInt16},
      {"INT32", DType::Int32},   {"UINT32", DType::UInt32},  {"INT64", DType::Int64},     {"UINT64", DType::UInt64},
      {"BOOL", DType::Bool},     {"STRING", DType::String}};
  const auto it = spec.attributes.find("to");
  if (it == spec.attributes.end()) kernel_fail(spec, "the 'to' attribute is required");
  if (const auto* code = std::get_if<int64_t>(&it->second)) {
    const DType to = dtype_from_onnx_code(*code);
    if (to == DType::Undefined)
      kernel_fail(spec, "'to' = " + std::to_string(*code) + " is no tensor type onnxtrain knows");
    return to;
  }
  if (const auto* name = std::get_if<std::string>(&it->second)) {
    for (const auto& [type_name, dtype] : kNames)
      if (*name == type_name) return dtype;
    kernel_fail(spec, "'to' = '" + *name + "' is no tensor type onnxtrain knows");
  }
  kernel_fail(spec, "the 'to' attribute must be a type code or name");
}

}  // namespace onnxtrain::reference
