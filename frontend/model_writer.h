// Writing a trained model: the original .onnx file with some initializers' data replaced (trained
// parameters, BatchNorm running statistics), ready for inference. What `onnxtrain train -o` writes.
//
//   write_trained_model("models/cnn_opset17.onnx", "out/cnn_trained.onnx", trainer.trained_initializers(),
//                       {.metadata = preprocessing_metadata(train)});
//
// Inference mode (the default): a model exported from PyTorch in train() mode keeps BatchNormalization's
// training_mode=1 and Dropout's training_mode input, and ONNX Runtime would then normalise each batch
// with its own statistics (a ResNet-18 at 79% accuracy scores 9% at batch 1) and drop activations. The
// written model has every BatchNormalization in inference mode (training_mode attribute removed, its
// running-statistics outputs dropped: the running statistics onnxtrain trained are its inputs) and every
// Dropout without a constant training_mode input, as model.eval() would export it.
// `inference_mode = false` keeps the nodes as they were (further training elsewhere).
//
// Tensors kept in external data files are loaded and written inline, so the result is one self-contained
// file. The file appears atomically (written to a temporary file beside it, then renamed) and passes the
// ONNX checker (for the opsets and IR versions Debian's ONNX 1.12 knows).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "frontend/bake_preprocessing.h"
#include "graph/tensor.h"

namespace onnx {
class ModelProto;
}

namespace onnxtrain {

struct ModelWriteOptions {
  bool inference_mode = true;
  // Entries of the model's metadata_props set (an existing key is replaced): the preprocessing the
  // trained weights expect (frontend/dataset.h preprocessing_metadata).
  std::map<std::string, std::string> metadata;
  // --bake-normalization: the input preprocessing folded into the model's first nodes (bake_preprocessing.h).
  std::optional<InputPreprocessing> bake;
};

// Error unless `out_path` can take a written model: an existing path must be a regular file (never a
// directory or a device: `-o /dev/null` as root would replace the node), and the nearest existing folder
// on its way must be a writable folder. `onnxtrain train` calls it before the first step, so a bad -o does
// not lose the training; write_trained_model calls it again before replacing the file.
void check_output_path(const std::string& out_path);

// Throws Error naming the file: the source cannot be read, a named initializer is missing from it or has
// another dtype or element count, a training-mode output to drop is used by another node or is a graph
// output, the output cannot be written, or the checker rejects the result.
void write_trained_model(const std::string& source_model, const std::string& out_path,
                         const std::map<std::string, Tensor>& initializers, const ModelWriteOptions& options = {});

// The inference-mode rewrite alone (what write_trained_model applies by default); returns the number of
// nodes changed. `source` names the model in errors.
int set_inference_mode(onnx::ModelProto& model, const std::string& source);

}  // namespace onnxtrain
