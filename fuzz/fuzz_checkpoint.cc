// The checkpoint reader (read_checkpoint, what `train --resume` reads): the prefix, the JSON header and
// its CRC-32, the tensor table, the tensors and their CRC-32s. The input is DIR/checkpoint-00000001.otck;
// next to it lies a valid shard of step 1 written by write_checkpoint_shard
// (checkpoint-00000001.otck.shards/rank-00000.otck), so a manifest's "shards" reach the union of shards.
#include "executor/checkpoint.h"
#include "fuzz/fuzz_input.h"

namespace onnxtrain::fuzz {

// The folder of the checkpoint, with the shard written once.
inline const std::string& checkpoint_dir() {
  static const std::string dir = [] {
    TrainingCheckpoint shard{.step = 1, .next_batch = 3, .seed = 42, .config = {{"lr", 0.01}}};
    shard.tensors.emplace("fc.weight", Tensor(DType::Float32, {2, 3}));
    shard.optimizer_state.emplace("global_step", Tensor::scalar_int64(7));
    write_checkpoint_shard(scratch_dir().string(), shard, 0);
    return scratch_dir().string();
  }();
  return dir;
}

}  // namespace onnxtrain::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onnxtrain;
  fuzz::checkpoint_dir();
  const std::string path = fuzz::write_input(checkpoint_file_name(1), data, size);
  fuzz::expect_clean([&] { read_checkpoint(path); });
  return 0;
}
