// Mini-batches of a Dataset for training: a held-out validation split, a seeded shuffle per epoch, the
// next batch prepared on a background thread while the current one trains, and a position that a
// checkpoint stores so a resumed run sees exactly the same batches.
//
// The validation split is floor(N * validation_fraction) rows drawn by `seed`, stratified: each class
// gives its share (largest remainders first), so class-sorted files validate on every class and train on
// every class. Datasets with per-position labels (N, T) hold out rows drawn by `seed`, and token streams
// (Dataset::hold_out_tail) their last rows: the stream's tail, never seen in training. The training batches come from
// the other rows. Epoch e visits the training rows in the order of a Fisher-Yates shuffle driven by std::mt19937_64
// seeded from (seed, e) — onnxtrain's own loop over the engine's raw output, so the order is the same on every platform
// and standard library. Batches run on across epochs: after the last batch of epoch e comes batch 0 of epoch e+1. The
// loader shares the Dataset's buffers (Tensor copies are cheap), so it may outlive the Dataset object it was given.
//
//   DataLoader loader(train, {.batch = 64, .seed = 7, .validation_fraction = 0.1});
//   for (Batch b = loader.next(); b.epoch < 3; b = loader.next()) step(b.x, b.y);
//   LoaderPosition p = loader.position();  // store in the checkpoint; later: loader.seek(p.epoch, p.index)
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "frontend/dataset.h"

namespace onnxtrain {

struct LoaderOptions {
  int64_t batch = 64;
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;            // drop the last, smaller batch of an epoch
  double validation_fraction = 0.0;  // in [0, 1): rows held out, stratified by label, drawn by `seed`
  bool prefetch = true;              // prepare the next batches on a background thread
  // Makes each batch's input tensor (the given dtype and sizes; the loader writes every element, so it may
  // come uninitialised); empty: Tensor(dtype, sizes).
  // Training on a GPU gives page-locked memory (cuda::pinned_tensor), so the upload is a plain DMA.
  std::function<Tensor(DType, std::vector<int64_t>)> allocate_input;
  // Training-time augmentation of (N, C, H, W) float images, drawn per sample from (seed, epoch, batch),
  // so a resumed run sees the same: torchvision's RandomCrop(size, padding) with black padding and
  // RandomHorizontalFlip(0.5). Never applied to the validation split.
  struct Augment {
    int64_t crop_padding = 0;  // a random (H, W) window of the image padded by this many pixels
    bool flip = false;         // mirrored left-right with probability 1/2
    bool any() const { return crop_padding > 0 || flip; }
  } augment;
};

struct Batch {
  Tensor x;  // (B, ...) in the dataset's input dtype (float32; int64 token ids)
  Tensor y;  // int64 (B), or (B, T) per-position labels
  int64_t epoch = 0;
  int64_t index_in_epoch = 0;
  bool last_in_epoch = false;
  // A model with several data inputs: x is x_name's, these the others' (Dataset::extra_inputs' rows).
  std::string x_name;
  NamedTensors extra;

  // What a trainer is fed: x alone, or every input by name.
  DataInputs inputs() const;
};

// The batch that next() returns next.
struct LoaderPosition {
  int64_t epoch = 0;
  int64_t index = 0;
  bool operator==(const LoaderPosition&) const = default;
};

class DataLoader {
 public:
  DataLoader(const Dataset& dataset, LoaderOptions options);  // throws Error on bad options
  ~DataLoader();                                              // stops and joins the prefetch thread
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  Batch next();
  LoaderPosition position() const;
  void seek(int64_t epoch, int64_t index);  // index < batches_per_epoch()

  // The batch at a position, computed on the calling thread (next() returns exactly this).
  Batch batch_at(int64_t epoch, int64_t index) const;
  // The training rows (indices into the dataset) in the order epoch `epoch` visits them.
  std::vector<int64_t> epoch_order(int64_t epoch) const;

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  int64_t train_size() const { return train_size_; }
  const Dataset& validation() const { return validation_; }  // the held-out rows (possibly none)

 private:
  struct Prepared {
    Batch batch;
    std::exception_ptr error;
  };
  LoaderPosition after(LoaderPosition p) const;
  void augment_images(Tensor& x, int64_t epoch, int64_t index) const;
  std::shared_ptr<const std::vector<int64_t>> order_of(int64_t epoch) const;
  void produce();

  Dataset dataset_;
  LoaderOptions options_;
  int64_t train_size_ = 0, batches_per_epoch_ = 0;
  std::vector<int64_t> train_rows_;  // ascending dataset rows not held out
  Dataset validation_;

  mutable std::mutex order_mutex_;  // guards the cached order of the latest epoch
  mutable int64_t cached_epoch_ = -1;
  mutable std::shared_ptr<const std::vector<int64_t>> cached_order_;

  mutable std::mutex mutex_;  // guards everything below
  std::condition_variable batch_ready_, space_free_;
  std::deque<Prepared> queue_;  // at most kQueueDepth batches ahead
  LoaderPosition consumer_, producer_;
  uint64_t generation_ = 0;  // bumped by seek(): batches prepared before it are dropped
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace onnxtrain
