// The ONNX model loader, structure-aware: the same test as fuzz_model_bytes, but each mutation parses
// the input as an onnx::ModelProto and changes one thing in its structure (model_mutator.cc), so the
// inputs stay models and the fuzzing reaches the checks behind the protobuf parser.
#include "fuzz/model_input.h"
#include "fuzz/model_mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  onnxtrain::fuzz::import_model_input(data, size);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return onnxtrain::fuzz::mutate_model(data, size, max_size, seed);
}
