#include "frontend/model_writer.h"

#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <onnx/checker.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "frontend/importer.h"
#include "frontend/model_file.h"
#include "frontend/tensor_proto.h"
#include "graph/atomic_file.h"
#include "graph/error.h"

namespace onnxtrain {
namespace fs = std::filesystem;

namespace {

// protobuf's output stream onto an AtomicFile: a failed write stops the serialization; commit() reports it.
class FileStream final : public google::protobuf::io::CopyingOutputStream {
 public:
  explicit FileStream(AtomicFile& file) : file_(file) {}
  bool Write(const void* buffer, int size) override { return file_.try_write(buffer, static_cast<size_t>(size)); }

 private:
  AtomicFile& file_;
};

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

bool is_default_domain(const onnx::NodeProto& node) { return node.domain().empty() || node.domain() == "ai.onnx"; }

// Every name a node reads or the graph returns.
std::multiset<std::string> used_names(const onnx::GraphProto& graph) {
  std::multiset<std::string> used;
  for (const onnx::NodeProto& node : graph.node())
    for (const std::string& input : node.input()) used.insert(input);
  for (const onnx::ValueInfoProto& output : graph.output()) used.insert(output.name());
  return used;
}

void drop_trailing_empty_inputs(onnx::NodeProto& node) {
  while (node.input_size() > 0 && node.input(node.input_size() - 1).empty()) node.mutable_input()->RemoveLast();
}

// Removes the initializer (and its graph.input entry, IR < 4) or Constant node that made `name`, when
// nothing reads it any more.
void remove_if_unused(onnx::GraphProto& graph, const std::string& name) {
  if (used_names(graph).count(name) > 0) return;
  auto* inits = graph.mutable_initializer();
  inits->erase(std::remove_if(inits->begin(), inits->end(), [&](const auto& t) { return t.name() == name; }),
               inits->end());
  auto* inputs = graph.mutable_input();
  inputs->erase(std::remove_if(inputs->begin(), inputs->end(), [&](const auto& v) { return v.name() == name; }),
                inputs->end());
  auto* nodes = graph.mutable_node();
  nodes->erase(std::remove_if(nodes->begin(), nodes->end(),
                              [&](const onnx::NodeProto& n) {
                                return n.op_type() == "Constant" && n.output_size() == 1 && n.output(0) == name;
                              }),
               nodes->end());
}

std::string node_label(const onnx::NodeProto& node) { return "node '" + node.name() + "' (op " + node.op_type() + ")"; }

// BatchNormalization in training mode: training_mode=1 (opset 14+) or, before opset 14, any output after Y.
bool batch_norm_to_inference(onnx::GraphProto& graph, onnx::NodeProto& node, const std::string& source) {
  bool changed = false;
  auto* attrs = node.mutable_attribute();
  const auto mode =
      std::find_if(attrs->begin(), attrs->end(), [](const auto& a) { return a.name() == "training_mode"; });
  if (mode != attrs->end()) {
    changed = mode->i() != 0;
    attrs->erase(mode);  // absent means 0
  }
  if (node.output_size() > 1) {
    const std::multiset<std::string> used = used_names(graph);
    for (int k = 1; k < node.output_size(); ++k) {
      if (!node.output(k).empty() && used.count(node.output(k)) > 0) {
        throw Error(source + ": " + node_label(node) + ": its training-mode output '" + node.output(k) +
                    "' is read by another node or is a graph output, so the node cannot be written in inference "
                    "mode (use --keep-training-mode)");
      }
    }
    while (node.output_size() > 1) node.mutable_output()->RemoveLast();
    changed = true;
  }
  return changed;
}

// Dropout (opset 12+) with a training_mode input that is not a graph input of its own: the input goes
// (absent means false). Earlier Dropouts have no mode: every runtime applies them as the identity.
bool dropout_to_inference(onnx::GraphProto& graph, onnx::NodeProto& node) {
  if (node.input_size() < 3 || node.input(2).empty()) return false;
  const std::string mode = node.input(2);
  const bool is_initializer = std::any_of(graph.initializer().begin(), graph.initializer().end(),
                                          [&](const auto& t) { return t.name() == mode; });
  const bool is_graph_input =
      std::any_of(graph.input().begin(), graph.input().end(), [&](const auto& v) { return v.name() == mode; });
  if (is_graph_input && !is_initializer) return false;  // the caller of the model decides at run time
  node.mutable_input()->RemoveLast();
  drop_trailing_empty_inputs(node);
  remove_if_unused(graph, mode);
  return true;
}

}  // namespace

int set_inference_mode(onnx::ModelProto& model, const std::string& source) {
  onnx::GraphProto& graph = *model.mutable_graph();
  int changed = 0;
  for (int i = 0; i < graph.node_size(); ++i) {
    onnx::NodeProto& node = *graph.mutable_node(i);
    if (!is_default_domain(node)) continue;
    if (node.op_type() == "BatchNormalization" && batch_norm_to_inference(graph, node, source)) ++changed;
    if (node.op_type() == "Dropout" && dropout_to_inference(graph, node)) {
      ++changed;
      i = -1;  // remove_if_unused may have erased a Constant node before this one: start over
    }
  }
  return changed;
}

void check_output_path(const std::string& out_path) {
  if (out_path.empty()) throw Error("-o '': an empty path; -o names the .onnx file to write");
  std::error_code ec;
  const fs::path out(out_path);
  if (!out.has_filename()) throw Error(out_path + ": names a folder; -o names the .onnx file to write");
  const fs::file_status status = fs::status(out, ec);
  if (fs::exists(status)) {
    if (fs::is_directory(status)) throw Error(out_path + ": is a folder; -o names the .onnx file to write");
    if (!fs::is_regular_file(status))
      throw Error(out_path +
                  ": is not a regular file (a device, pipe or socket); onnxtrain replaces only regular files");
  }
  fs::path folder = out.has_parent_path() ? out.parent_path() : fs::path(".");
  while (!fs::exists(folder, ec) && folder.has_parent_path() && folder != folder.parent_path())
    folder = folder.parent_path();
  if (!fs::is_directory(folder, ec)) throw Error(out_path + ": " + folder.string() + " is not a folder");
  if (::access(folder.c_str(), W_OK) != 0)
    throw Error(out_path + ": the folder " + folder.string() + " is not writable");
  // access() grants root every folder, /proc's and a read-only mount's alike: a file made and removed
  // there says whether the written model can appear.
  std::string probe = (folder / ".onnxtrain-write-check-XXXXXX").string();
  const int fd = ::mkstemp(probe.data());
  if (fd < 0) throw Error(out_path + ": cannot create a file in " + folder.string() + ": " + std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void write_trained_model(const std::string& source_model, const std::string& out_path,
                         const std::map<std::string, Tensor>& initializers, const ModelWriteOptions& options) {
  onnx::ModelProto model = read_model_file(source_model);
  load_external_data(model, source_model);

  std::map<std::string, onnx::TensorProto*> by_name;
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) by_name[t.name()] = &t;
  for (const auto& [name, tensor] : initializers) {
    auto it = by_name.find(name);
    if (it == by_name.end()) throw Error(source_model + ": has no initializer '" + name + "' to replace");
    replace_data(*it->second, tensor, source_model);
  }
  if (options.inference_mode) set_inference_mode(model, source_model);
  if (options.bake) bake_preprocessing(model, *options.bake, source_model);
  for (const auto& [key, value] : options.metadata) {
    auto* props = model.mutable_metadata_props();
    auto entry = std::find_if(props->begin(), props->end(), [&key = key](const auto& p) { return p.key() == key; });
    onnx::StringStringEntryProto* prop = entry != props->end() ? &*entry : model.add_metadata_props();
    prop->set_key(key);
    prop->set_value(value);
  }

  if (default_opset(model) <= kOnnxLibraryMaxOpset && model.ir_version() <= onnx::Version::IR_VERSION) {
    try {
      onnx::checker::check_model(model);
    } catch (const std::exception& e) {
      throw Error(out_path + ": the ONNX checker rejects the trained model: " + e.what());
    }
  }

  check_output_path(out_path);
  const fs::path out(out_path);
  if (out.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(out.parent_path(), ec);
    if (ec) throw Error(out_path + ": cannot create the folder " + out.parent_path().string() + ": " + ec.message());
  }
  // Streamed into a temporary file beside OUT (no second copy of the model in memory), synced, renamed over
  // it: a full disk is "OUT: write failed: No space left on device", never a truncated model.
  AtomicFile file(out_path, {.durable = true});
  {
    FileStream stream(file);
    google::protobuf::io::CopyingOutputStreamAdaptor adaptor(&stream);
    const bool serialized = model.SerializeToZeroCopyStream(&adaptor);
    const bool flushed = adaptor.Flush();
    if (!serialized && flushed) throw Error(out_path + ": cannot serialize the trained model (over protobuf's 2 GiB?)");
  }
  file.commit();  // reports a failed write of the stream
}

}  // namespace onnxtrain
