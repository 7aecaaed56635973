// The files a command writes, checked before any work against the files it reads and against each
// other. An output naming an input (the model, one of its external-data files, the data, a checkpoint)
// would replace it, often after the run had used it (an outside check found `--metrics MODEL` turning
// the model into JSON lines at the end of the training, and `-o MODEL.data` rewriting the weights
// another model reads); two outputs naming one file would leave only the last. Both are usage errors
// (exit 2) that name the options and the file.
//
//   refuse_outputs_over_inputs({{"--metrics", o.metrics}, {"-o", o.output}}, data_spec_files("--data", o.data),
//                              {"the model being trained", o.model});
#pragma once

#include <string>
#include <vector>

namespace onnxtrain {

struct NamedPath {
  std::string what;  // the option ("--metrics") or the role ("the model being trained")
  std::string path;  // empty: not given
};

// `model`, when its path is given, is an input with its external-data files.
void refuse_outputs_over_inputs(const std::vector<NamedPath>& outputs, std::vector<NamedPath> inputs,
                                const NamedPath& model = {});

// The files a --data or --test-data spec reads ("npz:FILE", "text:FILE", "mnist:DIR", ...): what follows
// the source's name, split at commas; none for the built-in and synthetic sources.
std::vector<NamedPath> data_spec_files(const std::string& option, const std::string& spec);

}  // namespace onnxtrain
