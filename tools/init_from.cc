#include "tools/init_from.h"

#include <filesystem>
#include <map>
#include <vector>

#include "executor/checkpoint.h"
#include "frontend/importer.h"
#include "graph/autodiff/live_conv_taps.h"
#include "graph/error.h"

namespace onnxtrain::cli {

namespace {

// The tensors of `source`: a checkpoint's parameters and running statistics, or an ONNX model's
// initializers. `kind` is set to what it was, for the messages.
std::map<std::string, Tensor> source_tensors(const std::string& source, std::string& kind) {
  std::error_code ec;
  if (!std::filesystem::exists(source, ec)) throw Error(source + ": --init-from: no such file or directory");
  if (std::filesystem::is_directory(source, ec) || source.ends_with(".otck")) {
    const std::string file = checkpoint_file_of(source, "--init-from");
    kind = "checkpoint " + file;
    return read_checkpoint(file).tensors;
  }
  kind = "model " + source;
  try {
    return read_model_initializers(source);
  } catch (Error& e) {  // "not an ONNX model: ..." did not say which file
    if (e.message().find(source) == std::string::npos) throw Error(source + ": --init-from: " + e.message());
    throw;
  }
}

std::string listed(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size() && i < 5; ++i) text += (i ? ", " : "") + names[i];
  if (names.size() > 5) text += " and " + std::to_string(names.size() - 5) + " more";
  return text;
}

}  // namespace

std::string checkpoint_file_of(const std::string& file_or_dir, const std::string& flag) {
  std::error_code ec;
  if (!std::filesystem::is_directory(file_or_dir, ec)) return file_or_dir;
  const std::optional<std::string> newest = latest_checkpoint(file_or_dir);
  if (!newest)
    throw Error(file_or_dir + ": " + flag + ": the directory holds no checkpoint (checkpoint-SSSSSSSS.otck)");
  return *newest;
}

std::string init_from(Graph& model, const std::string& source) {
  std::string kind;
  // A checkpoint holds the live taps of convolutions that trained only those (live_conv_taps.h).
  std::map<std::string, Tensor> tensors = with_full_conv_weights(model, source_tensors(source, kind));
  int64_t loaded = 0, parameters = 0;
  std::vector<std::string> kept;  // parameters the source lacks
  for (ValueId id : model.initializers) {
    Value& v = model.value(id);
    if (!v.data) continue;
    // Constants and integer buffers are the model's own (the importer may have folded them into other
    // values already): only what training changes is taken, as a checkpoint holds it.
    if (v.role != ValueRole::Parameter && v.role != ValueRole::State) {
      tensors.erase(v.name);
      continue;
    }
    if (v.role == ValueRole::Parameter) ++parameters;
    const auto it = tensors.find(v.name);
    if (it == tensors.end()) {
      if (v.role == ValueRole::Parameter) kept.push_back(v.name);
      continue;
    }
    const Tensor& from = it->second;
    if (from.dtype() != v.data->dtype() || from.sizes() != v.data->sizes()) {
      throw Error(source + ": --init-from: '" + v.name + "' is " + std::string(dtype_name(from.dtype())) + " " +
                  Shape::of(from.sizes()).to_string() + " there, " + std::string(dtype_name(v.data->dtype())) + " " +
                  Shape::of(v.data->sizes()).to_string() + " in the model (another model, or another head?)");
    }
    *v.data = from.clone();
    tensors.erase(it);
    ++loaded;
  }
  if (loaded == 0) {
    throw Error(source + ": --init-from: the " + kind.substr(0, kind.find(' ')) +
                " holds none of the model's initializers by name (a checkpoint or export of another model?)");
  }
  std::string line = "init-from " + kind + ": " + std::to_string(loaded) + " tensors loaded, " +
                     std::to_string(parameters - static_cast<int64_t>(kept.size())) + " of the model's " +
                     std::to_string(parameters) + " parameters";
  if (!kept.empty()) line += "; kept as initialised: " + listed(kept);
  if (!tensors.empty()) {
    std::vector<std::string> unused;
    for (const auto& [name, t] : tensors) unused.push_back(name);
    line += "; not in the model: " + listed(unused);
  }
  return line;
}

}  // namespace onnxtrain::cli
