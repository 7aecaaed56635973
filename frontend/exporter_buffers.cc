// torch.onnx's dynamo exporter stores module buffers (register_buffer: Llama's rotary inv_freq) as float
// initializers like the parameters, and marks them in the value_info's metadata_props with
// pkg.torch.export.graph_signature.InputSpec.kind = BUFFER. Those metadata_props (ValueInfoProto field 4)
// came with ONNX 1.16; Debian's ONNX library predates them, so protobuf keeps them as unknown fields,
// which this reads: each is a StringStringEntryProto (key 1, value 2).
#include <google/protobuf/unknown_field_set.h>

#include "frontend/import_passes.h"

namespace onnxtrain {

namespace {

constexpr int kValueInfoMetadataProps = 4;
constexpr char kInputKindKey[] = "pkg.torch.export.graph_signature.InputSpec.kind";

bool marked_as_buffer(const onnx::ValueInfoProto& info) {
  const google::protobuf::UnknownFieldSet& unknown = info.unknown_fields();
  for (int i = 0; i < unknown.field_count(); ++i) {
    const google::protobuf::UnknownField& field = unknown.field(i);
    if (field.number() != kValueInfoMetadataProps ||
        field.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED)
      continue;
    onnx::StringStringEntryProto entry;
    if (entry.ParseFromString(field.length_delimited()) && entry.key() == kInputKindKey && entry.value() == "BUFFER")
      return true;
  }
  return false;
}

}  // namespace

std::set<std::string> exporter_buffers(const onnx::ModelProto& model) {
  std::set<std::string> names;
  for (const onnx::ValueInfoProto& info : model.graph().value_info())
    if (marked_as_buffer(info)) names.insert(info.name());
  for (const onnx::ValueInfoProto& info : model.graph().input())
    if (marked_as_buffer(info)) names.insert(info.name());
  return names;
}

void keep_exporter_buffers_constant(Graph& graph, const std::set<std::string>& buffers) {
  for (ValueId id : graph.initializers) {
    Value& value = graph.value(id);
    if (value.role == ValueRole::Parameter && buffers.count(value.name)) value.role = ValueRole::Constant;
  }
}

}  // namespace onnxtrain
