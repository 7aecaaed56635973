// .npz archives through load_dataset("npz:FILE"), as `train --data npz:FILE` loads them: the zip reader
// (stored and deflated members, zip64 fields, CRC-32), the .npy members, then the label and shape checks
// and normalisation. The split and the model's input name vary with the input's size.
#include "frontend/dataset.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace onnxtrain;
  const std::string path = fuzz::write_input("data.npz", data, size);
  DatasetOptions options;
  options.split = size % 2 ? "test" : "train";
  options.normalize = size % 3 ? Normalization::MeanStd : Normalization::None;
  options.integer_inputs = size % 5 == 0;
  options.input_name = size % 7 == 0 ? "input" : "";
  fuzz::expect_clean([&] { load_dataset("npz:" + path, options); });
  return 0;
}
