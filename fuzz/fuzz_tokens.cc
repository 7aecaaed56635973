// Token streams through load_dataset, as `train --data tokens:FILE` / `text:FILE` load them: the same
// bytes as a .npy of ids, as nanoGPT's raw uint16 .bin and as text, cut into windows of a --seq-len and a
// seed taken from the input's first bytes.
#include "frontend/dataset.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onnxtrain;
  DatasetOptions options;
  options.seq_len = size > 0 ? data[0] % 17 : 4;  // 0 included: a missing --seq-len is an error
  options.seed = size > 1 ? data[1] : 0;
  options.integer_inputs = true;
  const std::string npy = fuzz::write_input("stream.npy", data, size);
  const std::string bin = fuzz::write_input("stream.bin", data, size);
  fuzz::expect_clean([&] { load_dataset("tokens:" + npy, options); });
  fuzz::expect_clean([&] { load_dataset("tokens:" + bin, options); });
  fuzz::expect_clean([&] { load_dataset("text:" + bin, options); });
  return 0;
}
