// The ONNX model loader on raw bytes: libFuzzer's byte mutations of .onnx files (model_input.h).
#include "fuzz/model_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  onnxtrain::fuzz::import_model_input(data, size);
  return 0;
}
