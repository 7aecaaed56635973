#include "tools/output_paths.h"

#include <algorithm>
#include <filesystem>

#include "frontend/importer.h"
#include "tools/cli_choices.h"

namespace onnxtrain {

namespace fs = std::filesystem;
using cli::usage_error;

namespace {

// One file by two names: the same inode when both exist (links, ./ and ../ spellings), else the same
// path once made absolute and normal.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  if (fs::equivalent(a, b, error)) return true;
  const fs::path x = fs::weakly_canonical(a, error);
  if (error) return false;
  const fs::path y = fs::weakly_canonical(b, error);
  return !error && x == y;
}

}  // namespace

std::vector<NamedPath> data_spec_files(const std::string& option, const std::string& spec) {
  const size_t colon = spec.find(':');
  if (colon == std::string::npos || spec.rfind("synthetic", 0) == 0) return {};
  std::vector<NamedPath> files;
  for (size_t begin = colon + 1; begin <= spec.size();) {
    const size_t comma = std::min(spec.find(',', begin), spec.size());
    if (comma > begin) files.push_back({"the data of " + option, spec.substr(begin, comma - begin)});
    begin = comma + 1;
  }
  return files;
}

void refuse_outputs_over_inputs(const std::vector<NamedPath>& outputs, std::vector<NamedPath> inputs,
                                const NamedPath& model_input) {
  const std::string& model = model_input.path;
  if (!model.empty()) {
    inputs.insert(inputs.begin(), model_input);
    // A model's external data lies in its folder; read its list only when an output exists to collide.
    bool existing_output = false;
    for (const NamedPath& out : outputs)
      existing_output = existing_output || (!out.path.empty() && fs::exists(out.path));
    if (existing_output)
      for (const std::string& file : external_data_files(model))
        inputs.push_back({"the model's external data (" + model + " stores its weights there)", file});
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const NamedPath& out = outputs[i];
    if (out.path.empty()) continue;
    for (const NamedPath& in : inputs) {
      if (!in.path.empty() && same_file(out.path, in.path))
        usage_error(out.what + " " + out.path + " is " + in.what + ", which this command reads: writing there " +
                    "would replace it. Give another file");
    }
    for (size_t j = 0; j < i; ++j) {
      if (!outputs[j].path.empty() && same_file(out.path, outputs[j].path))
        usage_error(out.what + " and " + outputs[j].what + " both name " + out.path +
                    ": the second would overwrite the first. Give them different files");
    }
  }
}

}  // namespace onnxtrain
