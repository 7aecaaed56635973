// The readers behind load_dataset (frontend/dataset.h), one per file format, and the byte-level helpers
// they share. Each returns raw data (uint8 pixels or float inputs, int64 labels); load_dataset scales,
// checks labels against the class count, normalises and describes. Errors name the file.
//
//   std::string bytes = read_maybe_gzipped("train-labels-idx1-ubyte.gz");
//   Tensor labels = read_idx_labels("train-labels-idx1-ubyte.gz");
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/tensor.h"

namespace onnxtrain {

// The whole file; Error "cannot open the file (missing?)" naming it.
std::string read_file_bytes(const std::string& path);
// The file's bytes, gunzipped when they start with the gzip magic 1f 8b (truncated streams are an error).
std::string read_maybe_gzipped(const std::string& path);
// Raw deflate (zip's method 8) of `compressed` into exactly `expected_size` bytes; `what` names it in errors.
std::string inflate_raw(const std::string& compressed, std::size_t expected_size, const std::string& what);

// IDX (yann.lecun.com/exdb/mnist): images magic 0x00000803 (N,H,W) uint8 → (N,1,H,W) uint8;
// labels magic 0x00000801 (N) uint8 → int64.
Tensor read_idx_images(const std::string& path);
Tensor read_idx_labels(const std::string& path);

// CIFAR-10 binary batches: records of 1 label byte + 3072 pixel bytes (3,32,32). Inputs uint8 (N,3,32,32).
struct RawDataset {
  Tensor inputs;  // uint8 or float32/float64
  Tensor labels;  // int64
};
RawDataset read_cifar10_batches(const std::vector<std::string>& paths);
// torchvision's ImageFolder layout, DIR/<class>/<image> (frontend/image_folder.cc): JPEG and PNG images as
// uint8 (N, channels, height, width), resized (PIL's BILINEAR), labels by the sorted class folder names.
struct ImageFolder {
  RawDataset data;
  std::vector<std::string> class_names;  // label k is class_names[k]
  int64_t skipped_files = 0;             // files that are not .jpg, .jpeg or .png
};
// `classes` (a test split: the training split's names; eval: the model's) fixes the labels, and a folder
// of another name is an error naming `whose` classes they are; empty: DIR's own class folders.
ImageFolder read_image_folder(const std::string& dir, int64_t channels, int64_t height, int64_t width,
                              const std::vector<std::string>& classes = {},
                              const std::string& whose = "the training split's");
// DIR's class folder names, sorted (Error when DIR is not a folder).
std::vector<std::string> image_folder_classes(const std::string& dir);

// NPZ: the members of a zip archive (stored or deflated), each parsed as .npy. `names` lists the member
// names present (without .npy) for error messages.
struct NpzArchive {
  std::vector<std::string> names;
  std::vector<Tensor> arrays;
  const Tensor* find(const std::string& name) const;
};
NpzArchive read_npz(const std::string& path);
// .npy bytes already in memory; `what` names them in errors.
Tensor parse_npy_bytes(const std::string& bytes, const std::string& what);

// Synthetic data: inputs uniform in [0,1) (float32 (N,C,H,W)), labels argmax(W · (x − 0.5)) for a
// (classes × C·H·W) map W drawn from `seed`; the test split draws other inputs from the same map.
// Token streams (frontend/token_stream.cc): the ids of `tokens:FILE` (.npy integers or raw uint16 .bin) or
// the bytes of `text:FILE`; then int64 (N, seq_len) inputs and their next-token targets, one window per row
// in stream order, starting at an offset drawn by `seed`.
enum class TokenFormat { Ids, TextBytes };
std::vector<int64_t> read_token_stream(const std::string& path, TokenFormat format);
RawDataset token_windows(const std::vector<int64_t>& stream, int64_t seq_len, uint64_t seed, const std::string& path);

RawDataset make_synthetic(const std::vector<int64_t>& sample_shape, int64_t classes, int64_t count, uint64_t seed,
                          bool test_split);
// For a model that reads token ids: a stream of ids in [0, vocab) in which each next id is the last plus
// 1, 2 or 3 (mod vocab), drawn from `seed`, cut into `count` windows of seq_len with next-token labels.
RawDataset make_synthetic_tokens(int64_t seq_len, int64_t vocab, int64_t count, uint64_t seed, bool test_split);

}  // namespace onnxtrain
