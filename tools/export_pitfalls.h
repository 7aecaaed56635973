// What a PyTorch export commonly gets wrong and onnxtrain would otherwise train in silence: `train` prints
// these lines (warnings and notes) before its first step. docs/bring-your-own-model.md lists them.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "tools/train_options.h"

namespace onnxtrain::cli {

std::vector<std::string> export_pitfalls(const TrainOptions& o, const Graph& graph);

}  // namespace onnxtrain::cli
