// libFuzzer's custom mutator for the structure-aware model target (fuzz_model_proto.cc). Debian 12 has
// no libprotobuf-mutator, so this is a small one of our own: the input is parsed as an onnx::ModelProto,
// one structural change is made and the model is serialised back. Bytes that do not parse as a model
// fall back to libFuzzer's byte mutations (LLVMFuzzerMutate).
//
// The changes: a tensor's dims, data_type or raw_data length; a tensor moved to external data (location,
// offset, length); an attribute's value, type or name; a node's input or output name, op_type or
// domain; a node dropped, duplicated or moved; an opset or IR version; a graph input's or output's
// dims or element type. Nodes are picked from the graph, model-local functions and subgraphs alike.
#pragma once

#include <cstddef>
#include <cstdint>

namespace onnxtrain::fuzz {

// LLVMFuzzerCustomMutator's contract: mutate data[0, size) in place within max_size bytes, return the
// new size; `seed` makes it deterministic.
size_t mutate_model(uint8_t* data, size_t size, size_t max_size, unsigned int seed);

}  // namespace onnxtrain::fuzz
