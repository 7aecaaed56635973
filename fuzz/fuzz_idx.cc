// IDX files (the MNIST family, what mnist:DIR and idx:IMAGES,LABELS read), plain or gzipped: the same
// bytes read as images (magic 0x803, rank 3) and as labels (magic 0x801, rank 1).
#include "frontend/dataset_readers.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onnxtrain;
  const std::string path = fuzz::write_input("images-idx-ubyte", data, size);
  fuzz::expect_clean([&] { read_idx_images(path); });
  fuzz::expect_clean([&] { read_idx_labels(path); });
  return 0;
}
