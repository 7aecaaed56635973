// `train --init-from SOURCE`: the model's initial weights taken from a checkpoint (a .otck file, or the
// newest of a checkpoint directory) or from an ONNX model, as PyTorch's load_state_dict: weights only, no
// optimizer state, step or data position, so the run's own options apply (fine-tuning, a new schedule).
#pragma once

#include <string>

#include "graph/graph.h"

namespace onnxtrain::cli {

// The checkpoint file `file_or_dir` names: itself, or the newest checkpoint of a checkpoint directory.
// Throws Error naming `flag` (the option or argument that gave it) when the directory holds none.
std::string checkpoint_file_of(const std::string& file_or_dir, const std::string& flag);

// Replaces the data of every parameter (trained or frozen) and running statistic of `model` that `source`
// holds under the same name. Throws Error naming the tensor when a dtype or shape differs, and when
// `source` holds none of the model's initializers (another model). Returns the summary line for stderr:
// what was loaded, which trained parameters kept their initial values, which tensors of `source` were
// not used.
std::string init_from(Graph& model, const std::string& source);

}  // namespace onnxtrain::cli
