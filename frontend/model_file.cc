#include "frontend/model_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <filesystem>
#include <fstream>

#include "frontend/importer.h"
#include "frontend/tensor_proto.h"
#include "graph/dtype.h"
#include "graph/error.h"

namespace onnxtrain {

namespace fs = std::filesystem;

onnx::ModelProto read_model_file(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("no such file");
  if (fs::is_directory(path, ec)) throw Error("is a directory, expected an .onnx file");
  // The file is parsed where the page cache holds it (a read-only mapping): read into a string through a
  // stream, a 100 MB model (ResNet-50) was copied three times and faulted in twice, 0.3 s of start-up.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open the file for reading");
  struct stat info {};
  const bool sized = ::fstat(fd, &info) == 0;
  const size_t size = sized ? static_cast<size_t>(info.st_size) : 0;
  if (!sized || size == 0) {
    ::close(fd);
    throw Error(sized ? "the file is empty, expected an ONNX model" : "cannot read the file's size");
  }
  if (size > static_cast<size_t>(INT_MAX)) {
    ::close(fd);
    throw Error("the file is " + std::to_string(size >> 20) +
                " MiB; a protobuf message is at most 2 GiB, so a model this big keeps its weights in external data "
                "(onnx.save_model(..., save_as_external_data=True))");
  }
  void* bytes = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (bytes == MAP_FAILED) throw Error("cannot read the file (mmap failed)");
  onnx::ModelProto model;
  const bool parsed = model.ParseFromArray(bytes, static_cast<int>(size));
  ::munmap(bytes, size);
  if (!parsed) {
    throw Error(
        "not an ONNX model: the file does not parse as an ONNX ModelProto (truncated or corrupt protobuf, "
        "or a different file format)");
  }
  // Random bytes and other protobufs can parse as a ModelProto by accident; a real model has these.
  if (!model.has_graph() || model.opset_import_size() == 0 || model.ir_version() <= 0) {
    throw Error("not an ONNX model: the file parses, but has no " +
                std::string(!model.has_graph()               ? "graph"
                            : model.opset_import_size() == 0 ? "opset_import"
                                                             : "ir_version") +
                " (truncated, corrupt, or a different file format)");
  }
  return model;
}

// An external-data "offset" or "length": a non-negative integer that fits int64, else Error.
static int64_t external_count(const std::string& text, const std::string& key, const std::string& what) {
  int64_t value = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 0)
    throw Error(what + " with " + key + " '" + text + "', which is not a non-negative integer of at most 2^63-1");
  return value;
}

static void load_one_external(onnx::TensorProto& tensor, const fs::path& folder) {
  const std::string what = "initializer '" + tensor.name() + "' is stored in external data";
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& entry : tensor.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offset = external_count(entry.value(), "offset", what);
    else if (entry.key() == "length")
      length = external_count(entry.value(), "length", what);
  }
  if (location.empty()) throw Error(what + " but names no location");
  fs::path relative(location);
  if (relative.is_absolute() || relative.lexically_normal().string().starts_with("..")) {
    throw Error(what + " at '" + location +
                "', outside the model's folder; onnxtrain reads only files next to the model");
  }
  fs::path file = folder / relative;
  std::error_code ec;
  if (fs::exists(file, ec) && !fs::is_regular_file(file, ec))
    throw Error(what + " in '" + file.string() + "', which is not a regular file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(what + " in '" + file.string() + "', which cannot be opened (missing external data file?)");
  in.seekg(0, std::ios::end);
  const int64_t size = in.tellg();
  if (offset > size || (length >= 0 && length > size - offset)) {
    throw Error(what + " at " + std::to_string(length < 0 ? 0 : length) + " bytes from offset " +
                std::to_string(offset) + " of '" + file.string() + "', which has only " + std::to_string(size) +
                " bytes (truncated?)");
  }
  if (length < 0) length = size - offset;
  std::string data(static_cast<size_t>(length), '\0');
  in.seekg(offset);
  in.read(data.data(), length);
  tensor.set_raw_data(std::move(data));
  tensor.clear_external_data();
  tensor.set_data_location(onnx::TensorProto::DEFAULT);
}

static void check_raw_data_size(const onnx::TensorProto& tensor, const std::string& what) {
  const std::size_t element = dtype_size(dtype_from_onnx_code(tensor.data_type()));
  if (!tensor.has_raw_data() || element == 0) return;  // typed fields, strings, types onnxtrain does not read
  uint64_t bytes = element;
  bool overflow = false;
  for (int64_t d : tensor.dims())
    overflow = overflow || d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes);
  if (overflow || bytes != tensor.raw_data().size()) {
    std::string dims;
    for (int64_t d : tensor.dims()) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    if (overflow) throw Error(what + " has dims (" + dims + "): negative, or more than 2^64 bytes");
    throw Error(what + " holds " + std::to_string(tensor.raw_data().size()) + " bytes of raw_data, its " +
                std::string(dtype_name(dtype_from_onnx_code(tensor.data_type()))) + " dims (" + dims + ") need " +
                std::to_string(bytes) + " (truncated or corrupt)");
  }
}

static void check_raw_data_sizes(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes);

static void check_raw_data_sizes(const onnx::GraphProto& graph) {
  for (const auto& t : graph.initializer()) check_raw_data_size(t, "initializer '" + t.name() + "'");
  check_raw_data_sizes(graph.node());
}

static void check_raw_data_sizes(const google::protobuf::RepeatedPtrField<onnx::NodeProto>& nodes) {
  for (const auto& node : nodes) {
    for (const auto& attr : node.attribute()) {
      if (attr.has_t())
        check_raw_data_size(attr.t(), "the tensor of attribute '" + attr.name() + "' of node '" + node.name() + "'");
      for (const auto& t : attr.tensors())
        check_raw_data_size(t, "a tensor of attribute '" + attr.name() + "' of node '" + node.name() + "'");
      if (attr.has_g()) check_raw_data_sizes(attr.g());
      for (const auto& g : attr.graphs()) check_raw_data_sizes(g);
    }
  }
}

void check_raw_data_sizes(const onnx::ModelProto& model) {
  check_raw_data_sizes(model.graph());
  for (const auto& f : model.functions()) check_raw_data_sizes(f.node());
}

void load_external_data(onnx::ModelProto& model, const std::string& model_path) {
  const fs::path folder = fs::path(model_path).parent_path();
  for (auto& tensor : *model.mutable_graph()->mutable_initializer()) {
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL) load_one_external(tensor, folder);
  }
  for (auto& node : *model.mutable_graph()->mutable_node()) {
    for (auto& attr : *node.mutable_attribute()) {
      if (attr.has_t() && attr.t().data_location() == onnx::TensorProto::EXTERNAL)
        load_one_external(*attr.mutable_t(), folder);
    }
  }
}

std::vector<std::string> external_data_files(const std::string& model_path) {
  onnx::ModelProto model;
  try {
    model = read_model_file(model_path);
  } catch (const Error&) {
    return {};  // the command itself says what is wrong with the file
  }
  std::vector<std::string> files;
  auto add = [&](const onnx::TensorProto& tensor) {
    if (tensor.data_location() != onnx::TensorProto::EXTERNAL) return;
    for (const auto& entry : tensor.external_data()) {
      if (entry.key() != "location") continue;
      const std::string file = (fs::path(model_path).parent_path() / entry.value()).string();
      if (std::find(files.begin(), files.end(), file) == files.end()) files.push_back(file);
    }
  };
  for (const auto& tensor : model.graph().initializer()) add(tensor);
  for (const auto& node : model.graph().node())
    for (const auto& attr : node.attribute())
      if (attr.has_t()) add(attr.t());
  return files;
}

int default_opset(const onnx::ModelProto& model) {
  for (const auto& o : model.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return static_cast<int>(o.version());
  return 0;
}

std::map<std::string, Tensor> read_model_initializers(const std::string& path) {
  onnx::ModelProto model = read_model_file(path);
  load_external_data(model, path);
  check_raw_data_sizes(model);
  std::map<std::string, Tensor> tensors;
  for (const onnx::TensorProto& t : model.graph().initializer()) {
    try {
      tensors.emplace(t.name(), tensor_from_proto(t));
    } catch (const Error& e) {
      throw Error(path + ": initializer '" + t.name() + "': " + e.what());
    }
  }
  return tensors;
}

}  // namespace onnxtrain
