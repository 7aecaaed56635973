#include "frontend/tensor_proto.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "frontend/tensor_file.h"
#include "graph/error.h"
#include "graph/shape.h"

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

// How many elements the typed field that holds `dtype` stores (the ONNX spec's layout); -1: no such field.
static int64_t typed_field_size(const onnx::TensorProto& proto, DType dtype) {
  switch (dtype) {
    case DType::Float32:
      return proto.float_data_size();
    case DType::Float64:
      return proto.double_data_size();
    case DType::Int64:
      return proto.int64_data_size();
    case DType::UInt64:
    case DType::UInt32:
      return proto.uint64_data_size();
    case DType::Int32:
    case DType::Int16:
    case DType::UInt16:
    case DType::Float16:
    case DType::BFloat16:
    case DType::Int8:
    case DType::UInt8:
    case DType::Bool:
      return proto.int32_data_size();
    default:
      return -1;
  }
}

Tensor tensor_from_proto(const onnx::TensorProto& proto) {
  const std::string& name = proto.name();
  DType dtype = dtype_from_onnx_code(proto.data_type());
  if (dtype == DType::Undefined || dtype == DType::String || dtype == DType::Complex64 || dtype == DType::Complex128) {
    throw Error("initializer '" + name + "' has data type " + std::to_string(proto.data_type()) +
                ", which onnxtrain does not support");
  }
  std::vector<int64_t> sizes(proto.dims().begin(), proto.dims().end());
  // The dims are checked against the data stored before anything is allocated: they come from the file.
  uint64_t numel = 1, nbytes = 0;
  bool overflow = false;
  for (int64_t s : sizes) {
    if (s < 0) throw Error("initializer '" + name + "' has a negative dimension");
    // within int64 at every step: a later 0 must not hide a product Tensor cannot count
    overflow =
        overflow || __builtin_mul_overflow(numel, static_cast<uint64_t>(s), &numel) || numel > uint64_t{INT64_MAX};
  }
  if (overflow || __builtin_mul_overflow(numel, dtype_size(dtype), &nbytes) || nbytes > uint64_t{INT64_MAX})
    throw Error("initializer '" + name + "' has dims " + Shape::of(sizes).to_string() +
                ", more bytes than any file holds");
  if (proto.has_raw_data() && proto.raw_data().size() != nbytes) {
    throw Error("initializer '" + name + "' holds " + std::to_string(proto.raw_data().size()) + " bytes, its " +
                std::string(dtype_name(dtype)) + " dims need " + std::to_string(nbytes) + " (truncated or corrupt)");
  }
  const int64_t stored = typed_field_size(proto, dtype);
  if (!proto.has_raw_data() && numel > 0 && stored >= 0 && static_cast<uint64_t>(stored) != numel) {
    throw Error("initializer '" + name + "' has " + std::to_string(stored) + " stored elements but its dims say " +
                std::to_string(numel));
  }
  Tensor t(dtype, sizes);
  if (proto.has_raw_data()) {
    if (t.nbytes() > 0) std::memcpy(t.raw(), proto.raw_data().data(), t.nbytes());  // an empty buffer may be null
    return t;
  }
  if (t.numel() == 0) return t;
  switch (dtype) {
    case DType::Float32:
      copy_field<float>(proto.float_data(), t, name.c_str());
      break;
    case DType::Float64:
      copy_field<double>(proto.double_data(), t, name.c_str());
      break;
    case DType::Int64:
      copy_field<int64_t>(proto.int64_data(), t, name.c_str());
      break;
    case DType::UInt64:
      copy_field<uint64_t>(proto.uint64_data(), t, name.c_str());
      break;
    case DType::UInt32:
      copy_field<uint32_t>(proto.uint64_data(), t, name.c_str());
      break;
    case DType::Int32:
      copy_field<int32_t>(proto.int32_data(), t, name.c_str());
      break;
    case DType::Int16:
      copy_field<int16_t>(proto.int32_data(), t, name.c_str());
      break;
    case DType::UInt16:
    case DType::Float16:
    case DType::BFloat16:
      copy_field<uint16_t>(proto.int32_data(), t, name.c_str());
      break;
    case DType::Int8:
      copy_field<int8_t>(proto.int32_data(), t, name.c_str());
      break;
    case DType::UInt8:
    case DType::Bool:
      copy_field<uint8_t>(proto.int32_data(), t, name.c_str());
      break;
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
