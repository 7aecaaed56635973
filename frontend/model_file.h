// Reading a .onnx file into a ModelProto (frontend-internal): parse errors, external data and
// model-local functions are handled here so the rest of the importer sees one self-contained graph.
#pragma once

#include <onnx/onnx_pb.h>

#include <string>

namespace onnxtrain {

// Parses the file; throws Error (missing, unreadable, not a protobuf, not an ONNX model).
onnx::ModelProto read_model_file(const std::string& path);

// The model's version of the default domain (ai.onnx), 0 when it imports none.
int default_opset(const onnx::ModelProto& model);

// Loads every tensor stored as external data (location/offset/length, relative to the model's
// folder) into raw_data. Locations that leave the model's folder are refused.
void load_external_data(onnx::ModelProto& model, const std::string& model_path);

// Checks that every tensor the model stores as raw_data (initializers and tensor attributes such as
// Constant's value, in subgraphs and model-local functions too) holds exactly dims × element-size bytes,
// before ONNX's checker and shape inference see it: ONNX 1.12 copies raw_data into a buffer sized from it
// (a 9-byte int64 shape initializer wrote past its end). Throws Error naming the tensor.
void check_raw_data_sizes(const onnx::ModelProto& model);

// Replaces every call of a model-local function (model.functions) by the function's body, with its
// values renamed apart and attribute references resolved; nested calls are inlined too.
// Returns the number of calls inlined.
int inline_local_functions(onnx::ModelProto& model);

}  // namespace onnxtrain
