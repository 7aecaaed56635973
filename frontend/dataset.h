// Datasets for training: images or feature vectors as float32 (N, ...) with int64 class labels (N),
// loaded from a spec string (what `--data SPEC` takes):
//
//   fashion-mnist             Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), the default
//                             (ONNXTRAIN_FASHION_MNIST_DIR overrides the directory)
//   mnist:DIR                 the four IDX files of the MNIST family in DIR (train-images-idx3-ubyte[.gz], ...)
//   idx:IMAGES,LABELS         two IDX files, gzip or plain (told apart by their magic bytes)
//   cifar10:DIR               CIFAR-10 binary batches: data_batch_1..5.bin (train), test_batch.bin (test)
//   imagefolder:DIR           torchvision's ImageFolder layout, DIR/<class>/<image>.jpg|png (or DIR/train/...
//                             with DIR/val or DIR/test for the test split), decoded as uint8 RGB or gray and
//                             resized to DatasetOptions::image_shape (frontend/image_folder.cc)
//   npz:FILE                  a NumPy .npz (stored or deflated): arrays `x`,`y`, else `inputs`,`labels`,
//                             else `x_train`,`y_train` / `x_test`,`y_test` (Keras' layout) by split
//   npy:X.npy,Y.npy           two .npy files
//   synthetic[:C,H,W:CLASSES:N]  seeded uniform inputs, labels = argmax of a fixed random linear map
//                             of them (learnable); default synthetic:1,28,28:10:1024
//   tokens:FILE               a flat token stream (.npy integers, or nanoGPT's raw uint16 .bin) cut into
//                             windows of DatasetOptions::seq_len with next-token labels (N,T)
//   text:FILE                 the bytes of any file as tokens 0-255, the same way (256 classes)
//
// An npz may also name its arrays after the model's input (DatasetOptions::input_name) with `labels`.
// Labels are class indices (N), or one per position (N,T) for language models; -100 marks a position
// that counts for nothing (PyTorch's ignore_index). A model with an integer input (token ids) gets
// integer data as int64, unscaled and never normalised (DatasetOptions::integer_inputs). Otherwise pixel
// bytes (uint8) become float32 in [0,1]; float inputs are kept as they are. Image inputs are
// (N,C,H,W): IDX images and rank-3 arrays get C=1; rank-4 arrays must already be NCHW; rank-2 arrays are
// feature vectors. Normalisation mean-std subtracts a per-channel mean and divides by the standard
// deviation of the training split: Fashion-MNIST 0.2860/0.3530, CIFAR-10 (0.4914,0.4822,0.4465)/
// (0.2470,0.2435,0.2616) (population statistics of the train split, also applied to the test split);
// other sources use the statistics of the files loaded unless DatasetOptions::mean/std give them.
//
//   Dataset train = load_dataset("fashion-mnist", {.split = "train", .normalize = Normalization::MeanStd});
//   check_matches_model_input(train, "input", model_input_shape);  // throws Error when they differ
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "graph/data_inputs.h"
#include "graph/shape.h"
#include "graph/tensor.h"

namespace onnxtrain {

enum class Normalization { None, MeanStd };

struct DatasetOptions {
  std::string split = "train";  // "train" | "test"
  Normalization normalize = Normalization::None;
  std::vector<float> mean, std;  // per channel; override the statistics MeanStd uses
  int64_t classes = 0;           // idx/npz/npy: 0 = max label + 1; otherwise labels must be < classes
  uint64_t seed = 0;             // synthetic data, and the window offset of token streams
  int64_t seq_len = 0;           // tokens:/text:: the tokens per sample
  bool integer_inputs = false;   // the model reads integer ids: integer data stays int64 (uint8 too)
  bool float64_inputs = false;   // the model reads float64 (model.double()): the prepared inputs become float64
  std::string input_name;        // npz: the model input's name, tried (with `labels`) before x/y
  // The model input's rank, 0 when unknown: 3-D float data (N, H, W) gets a channel axis, (N, 1, H, W),
  // unless the model reads rank 3 (a sequence's (N, T, F)).
  int64_t input_rank = 0;
  std::string x_key, y_key;          // npz: the arrays to read (--x-key/--y-key; either alone: the other x or y)
  std::vector<int64_t> image_shape;  // imagefolder: the (C, H, W) the images are decoded and resized to
  // imagefolder: the classes the labels follow, by folder name (eval: the model's onnxtrain.class_names);
  // empty: the training split's folders. A folder of another name is an error.
  std::vector<std::string> class_names;
  // npz: the model's other data inputs (BERT's attention_mask, token_type_ids), arrays of those names,
  // read with input_name and `labels`. Never scaled or normalised; integer ones stay int64, float ones
  // float32. Other sources refuse them.
  struct ExtraInput {
    std::string name;
    DType dtype = DType::Float32;  // the model input's: bool and integer arrays keep their values
  };
  std::vector<ExtraInput> extra_inputs;
};

// Labels equal to this count for nothing in cross-entropy (as in PyTorch).
inline constexpr int64_t kIgnoredLabel = -100;

struct Dataset {
  Tensor inputs;  // float32 (N, ...), or int64 token ids (N, T)
  Tensor labels;  // int64 (N), or (N, T): one per position
  int64_t classes = 0;
  std::string description;               // one line: source, split, sizes, normalisation
  std::vector<float> mean, std;          // the per-channel statistics applied (empty without normalisation)
  float input_scale = 1.0f;              // the factor the source's values were multiplied by: 1/255 for uint8 pixels
  std::string raw_dtype = "float32";     // the source's element type before that: uint8, float32, float64
  std::vector<std::string> class_names;  // imagefolder: label k's class folder name (empty for other sources)
  bool hold_out_tail = false;  // token streams: validation takes the last rows (the stream's tail), not a draw
  // A model with several data inputs: `inputs` is input_name's, these the others' (same rows).
  std::string input_name;
  NamedTensors extra_inputs;

  int64_t size() const { return labels.sizes().empty() ? 0 : labels.sizes()[0]; }
  std::vector<int64_t> sample_shape() const;                       // inputs' sizes without N
  bool per_position_labels() const { return labels.rank() == 2; }  // (N, T) labels
  // What a trainer is fed: `inputs` alone, or every input by name when there are several.
  DataInputs model_inputs() const;
};

// Throws Error naming the file and what was expected (missing file, wrong magic number, truncated file,
// label out of range, image and label counts that differ, unknown spec).
Dataset load_dataset(const std::string& spec, const DatasetOptions& options = {});

// Throws Error "dataset inputs (N,1,28,28) do not match the model input 'input' (batch,3,32,32)" when the
// ranks differ, a static non-batch dim of the model differs from the dataset's, or the model reads
// integer ids and the data are float (or the other way round).
void check_matches_model_input(const Dataset& dataset, const std::string& input_name, const Shape& model_input,
                               DType model_dtype = DType::Float32);
// The same for one array of the data (a model with several data inputs checks each).
void check_matches_model_input(const Tensor& data, const std::string& input_name, const Shape& model_input,
                               DType model_dtype = DType::Float32);

// The preprocessing a model trained on `dataset` expects, as metadata_props entries of the written model:
//   onnxtrain.preprocess         "x = (raw * scale - mean[c]) / std[c], c = the input's axis 1" (or "x = raw * scale")
//   onnxtrain.preprocess.scale   "0.00392156863" (1/255, uint8 pixels) or "1"
//   onnxtrain.preprocess.raw_dtype  uint8 | float32 | float64
//   onnxtrain.preprocess.mean / .std  per-channel values, comma-separated, full float precision
//   onnxtrain.preprocess.layout  NCHW (images) or NC (feature vectors): the axis the statistics go along
//   onnxtrain.classes            the class count of the labels
//   onnxtrain.class_names        imagefolder: the class folder names, label order, as a JSON array
std::map<std::string, std::string> preprocessing_metadata(const Dataset& dataset);
// "0.286000013,0.352999985": floats comma-separated with the 9 digits that read back to the same float
// (the metadata's format).
std::string full_precision_list(const std::vector<float>& values);

// The given rows, in that order, as a new Dataset (copies the data).
Dataset select_rows(const Dataset& dataset, const std::vector<int64_t>& rows);

}  // namespace onnxtrain
