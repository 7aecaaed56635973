#include "frontend/tensor_proto.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "frontend/tensor_file.h"

#include "graph/error.h"

namespace onnxtrain {

// Copies typed repeated fields into the tensor, narrowing as the ONNX spec stores them (int32_data
// holds int8/int16/uint8/uint16/bool/float16/bfloat16 too, one element per entry).
template <typename Out, typename Field>
static void copy_field(const Field& field, Tensor& t, const char* what) {
  if (static_cast<int64_t>(field.size()) != t.numel()) {
    throw Error("initializer '" + std::string(what) + "' has " + std::to_string(field.size()) +
                " stored elements but its dims say " + std::to_string(t.numel()));
  }
  auto* dst = reinterpret_cast<Out*>(t.raw());
  for (int i = 0; i < field.size(); ++i) dst[i] = static_cast<Out>(field.Get(i));
}

Tensor tensor_from_proto(const onnx::TensorProto& proto) {
  const std::string& name = proto.name();
  DType dtype = dtype_from_onnx_code(proto.data_type());
  if (dtype == DType::Undefined || dtype == DType::String || dtype == DType::Complex64 ||
      dtype == DType::Complex128) {
    throw Error("initializer '" + name + "' has data type " + std::to_string(proto.data_type()) +
                ", which onnxtrain does not support");
  }
  std::vector<int64_t> sizes(proto.dims().begin(), proto.dims().end());
  for (int64_t s : sizes)
    if (s < 0) throw Error("initializer '" + name + "' has a negative dimension");
  Tensor t(dtype, sizes);
  if (proto.has_raw_data()) {
    if (proto.raw_data().size() != t.nbytes()) {
      throw Error("initializer '" + name + "' holds " + std::to_string(proto.raw_data().size()) + " bytes, its " +
                  std::string(dtype_name(dtype)) + " dims need " + std::to_string(t.nbytes()) + " (truncated or corrupt)");
    }
    if (t.nbytes() > 0) std::memcpy(t.raw(), proto.raw_data().data(), t.nbytes());  // an empty buffer may be null
    return t;
  }
  if (t.numel() == 0) return t;
  switch (dtype) {
    case DType::Float32: copy_field<float>(proto.float_data(), t, name.c_str()); break;
    case DType::Float64: copy_field<double>(proto.double_data(), t, name.c_str()); break;
    case DType::Int64: copy_field<int64_t>(proto.int64_data(), t, name.c_str()); break;
    case DType::UInt64: copy_field<uint64_t>(proto.uint64_data(), t, name.c_str()); break;
    case DType::UInt32: copy_field<uint32_t>(proto.uint64_data(), t, name.c_str()); break;
    case DType::Int32: copy_field<int32_t>(proto.int32_data(), t, name.c_str()); break;
    case DType::Int16: copy_field<int16_t>(proto.int32_data(), t, name.c_str()); break;
    case DType::UInt16: case DType::Float16: case DType::BFloat16:
      copy_field<uint16_t>(proto.int32_data(), t, name.c_str());
      break;
    case DType::Int8: copy_field<int8_t>(proto.int32_data(), t, name.c_str()); break;
    case DType::UInt8: case DType::Bool: copy_field<uint8_t>(proto.int32_data(), t, name.c_str()); break;
    default:
      throw Error("initializer '" + name + "' stores " + std::string(dtype_name(dtype)) +
                  " in typed fields, which onnxtrain does not read");
  }
  return t;
}

}  // namespace onnxtrain

namespace onnxtrain {

Tensor read_tensor_proto_file(const std::string& path) {
  try {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot open the file (missing?)");
    std::ostringstream bytes;
    bytes << in.rdbuf();
    onnx::TensorProto proto;
    if (!proto.ParseFromString(bytes.str())) throw Error("not an ONNX TensorProto (truncated or corrupt protobuf)");
    return tensor_from_proto(proto);
  } catch (Error& e) {
    e.in_file(path);
    throw;
  }
}

}  // namespace onnxtrain
