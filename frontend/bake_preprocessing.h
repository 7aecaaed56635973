// `train --bake-normalization`: the input preprocessing a run applied, folded into the written model as
// its first nodes, so the model takes the raw data as the training files hold it:
//
//   raw (uint8) -> Cast(float) -> Mul(scale) -> Sub(mean) -> Div(std) -> what the model's nodes read
//
// (each node only where it changes something: no Cast for float data, no Mul for a scale of 1, no
// Sub/Div without normalisation). The statistics are initializers shaped (1, C, 1, 1) for the channels
// of an NCHW input, a scalar for a single channel. The graph input keeps its name and shape; its type
// becomes uint8 for uint8 data. metadata_props then say the model needs no preprocessing.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
}

namespace onnxtrain {

struct InputPreprocessing {
  std::string input;  // the graph input it applies to (the model's first data input)
  bool raw_uint8 = false;
  float scale = 1.0f;
  std::vector<float> mean, std;  // per channel (axis 1); empty: not normalised
};

// Rewrites `model`; returns the nodes inserted (0 when the data went in unchanged). Throws Error naming
// `source` when the input is not a float graph input or the statistics do not fit its channel axis.
int bake_preprocessing(onnx::ModelProto& model, const InputPreprocessing& preprocessing, const std::string& source);

// The metadata_props of a model whose preprocessing is baked: none left to apply (scale 1, no mean or
// std), and onnxtrain.preprocess.baked recording what the first nodes do.
std::map<std::string, std::string> baked_preprocessing_metadata(std::map<std::string, std::string> metadata,
                                                                const InputPreprocessing& preprocessing);

}  // namespace onnxtrain
