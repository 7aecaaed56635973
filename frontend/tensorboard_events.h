// TensorBoard event files: `train --tensorboard DIR` writes the run's scalars (training loss, lr,
// samples/s per step; validation loss and accuracy per epoch) where `tensorboard --logdir DIR` shows them,
// as torch.utils.tensorboard.SummaryWriter does.
//
//   TensorBoardEvents events("runs/resnet");          // DIR/events.out.tfevents.<time>.<host>.<pid>
//   events.scalar("train/loss", 2.31, /*step=*/1, wall_time);
//
// The file is a TFRecord stream of Event protobufs (frontend/tensorboard_event.proto): each record is its
// length (uint64, little-endian), the masked CRC-32C of the length, the bytes, and their masked CRC-32C.
// Every event is flushed as it is written, so a run that stops keeps its curves; a failed write is an
// Error naming the file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

namespace onnxtrain {

// CRC-32C (Castagnoli), the checksum of TFRecord files; crc32c("123456789") is 0xE3069283.
uint32_t crc32c(std::span<const uint8_t> bytes);
// TFRecord's masked form of a CRC: rotated right by 15 bits plus 0xa282ead8.
uint32_t masked_crc32c(std::span<const uint8_t> bytes);

class TensorBoardEvents {
 public:
  // Creates `dir` when it does not exist and a new event file in it; throws Error when it cannot.
  explicit TensorBoardEvents(const std::string& dir);
  ~TensorBoardEvents();
  TensorBoardEvents(const TensorBoardEvents&) = delete;
  TensorBoardEvents& operator=(const TensorBoardEvents&) = delete;

  void scalar(const std::string& tag, double value, int64_t step, double wall_time);
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& bytes);
  std::string path_;
  std::FILE* file_ = nullptr;
};

// One scalar of an event file, as read back (for tests and tools).
struct TensorBoardScalar {
  std::string tag;
  int64_t step = 0;
  double value = 0, wall_time = 0;
};
// The scalars of an event file, every record's CRCs checked; throws Error naming the file and the byte
// offset of a record that is cut short or corrupt.
std::vector<TensorBoardScalar> read_tensorboard_scalars(const std::string& path);

}  // namespace onnxtrain
