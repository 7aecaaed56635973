// CIFAR-10 binary batches through load_dataset("cifar10:DIR"), as `train --data cifar10:DIR` loads them:
// the input is the folder's test_batch.bin (records of 1 label byte + 3072 pixel bytes), then the label
// checks and normalisation.
#include "frontend/dataset.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onnxtrain;
  fuzz::write_input("test_batch.bin", data, size);
  DatasetOptions options;
  options.split = "test";
  options.normalize = size % 2 ? Normalization::MeanStd : Normalization::None;
  fuzz::expect_clean([&] { load_dataset("cifar10:" + fuzz::scratch_dir().string(), options); });
  return 0;
}
