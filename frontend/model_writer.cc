#include "frontend/model_writer.h"

#include <onnx/checker.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "frontend/importer.h"
#include "frontend/model_file.h"
#include "frontend/tensor_proto.h"
#include "graph/error.h"

namespace onnxtrain {
namespace fs = std::filesystem;

namespace {

int default_opset(const onnx::ModelProto& model) {
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") return static_cast<int>(op.version());
  return 0;
}

void replace_data(onnx::TensorProto& proto, const Tensor& tensor, const std::string& source) {
  const Tensor old = tensor_from_proto(proto);
  if (old.dtype() != tensor.dtype() || old.numel() != tensor.numel()) {
    throw Error(source + ": initializer '" + proto.name() + "' is " + std::string(dtype_name(old.dtype())) + " with " +
                std::to_string(old.numel()) + " elements, the trained one " + std::string(dtype_name(tensor.dtype())) +
                " with " + std::to_string(tensor.numel()));
  }
  proto.clear_float_data();
  proto.clear_double_data();
  proto.clear_int32_data();
  proto.clear_int64_data();
  proto.clear_uint64_data();
  proto.clear_external_data();
  proto.set_data_location(onnx::TensorProto::DEFAULT);
  proto.set_raw_data(reinterpret_cast<const char*>(tensor.raw()), tensor.nbytes());  // little-endian hosts
}

}  // namespace

void write_trained_model(const std::string& source_model, const std::string& out_path,
                         const std::map<std::string, Tensor>& initializers) {
  onnx::ModelProto model = read_model_file(source_model);
  load_external_data(model, source_model);

  std::map<std::string, onnx::TensorProto*> by_name;
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) by_name[t.name()] = &t;
  for (const auto& [name, tensor] : initializers) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw Error(source_model + ": has no initializer '" + name + "' to replace");
    replace_data(*it->second, tensor, source_model);
  }

  if (default_opset(model) <= kOnnxLibraryMaxOpset && model.ir_version() <= onnx::Version::IR_VERSION) {
    try {
      onnx::checker::check_model(model);
    } catch (const std::exception& e) {
      throw Error(out_path + ": the ONNX checker rejects the trained model: " + e.what());
    }
  }

  const fs::path out(out_path);
  if (out.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(out.parent_path(), ec);
    if (ec) throw Error(out_path + ": cannot create the folder " + out.parent_path().string() + ": " + ec.message());
  }
  const fs::path temp = out.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream file(temp, std::ios::binary | std::ios::trunc);
    if (!file) throw Error(out_path + ": cannot write " + temp.string());
    if (!model.SerializeToOstream(&file) || !file.flush()) {
      file.close();
      fs::remove(temp);
      throw Error(out_path + ": writing " + temp.string() + " failed (disk full?)");
    }
  }
  std::error_code ec;
  fs::rename(temp, out, ec);
  if (ec) {
    fs::remove(temp);
    throw Error(out_path + ": cannot rename " + temp.string() + " to it: " + ec.message());
  }
}

}  // namespace onnxtrain
