// The dynamo exporter writes torch.split as SplitToSequence (a sequence of tensors) read back by
// SequenceAt with constant positions; GPT-2's fused query/key/value projection is split this way.
// onnxtrain's graph holds tensors only, so each such chain becomes one Split (one output per chunk) and
// each SequenceAt an Identity of its chunk. Chains it cannot resolve statically (a split or position that
// is not a constant, a sequence used by other ops, an unknown size along the axis, more than 2^16 chunks)
// are left alone: their ops then have no schema and the importer names them.
#include <algorithm>
#include <map>
#include <set>

#include "frontend/import_passes.h"
#include "frontend/tensor_proto.h"

namespace onnxtrain {

namespace {

// More chunks than this are not rewritten (the chain is left alone and named as unsupported): a model's
// sizes are untrusted, and a split of 2^40 chunks would only exhaust memory building its outputs.
constexpr int64_t kMaxChunks = int64_t{1} << 16;

// The integer values of a value that an initializer or a Constant node (attribute `value`) holds; none for
// other types (a float split is the checker's or Split's error to report, not a reason to crash here).
std::optional<std::vector<int64_t>> constant_ints(const onnx::GraphProto& graph, const std::string& name) {
  auto ints = [](const onnx::TensorProto& t) -> std::optional<std::vector<int64_t>> {
    Tensor tensor = tensor_from_proto(t);
    if (!is_integer(tensor.dtype())) return std::nullopt;
    return tensor.to_int64();
  };
  for (const onnx::TensorProto& t : graph.initializer())
    if (t.name() == name) return ints(t);
  for (const onnx::NodeProto& n : graph.node()) {
    if (n.op_type() != "Constant" || n.output_size() != 1 || n.output(0) != name) continue;
    for (const onnx::AttributeProto& a : n.attribute())
      if (a.name() == "value" && a.has_t()) return ints(a.t());
  }
  return std::nullopt;
}

// Chunk sizes of SplitToSequence `node` along its axis, or nullopt when they are not static. A scalar
// split s over a length ONNX's inference did not find (opsets newer than Debian's ONNX library knows)
// gives the `chunks_read` - 1 chunks of s before the last one read, and sets `last_from_length`: that
// one may be short (torch.chunk(3) of 10 is 4, 4, 2), so its size comes from the length at import.
std::optional<std::vector<int64_t>> chunk_sizes(const onnx::GraphProto& graph, const onnx::NodeProto& node,
                                                const OnnxValueInfos& infos, int64_t chunks_read, int64_t& axis,
                                                bool& last_from_length) {
  axis = 0;
  last_from_length = false;
  for (const onnx::AttributeProto& a : node.attribute())
    if (a.name() == "axis") axis = a.i();
  if (node.input_size() < 2 || node.input(1).empty()) return std::nullopt;  // keepdims-style split by ones
  std::optional<std::vector<int64_t>> split = constant_ints(graph, node.input(1));
  if (!split || split->empty()) return std::nullopt;
  if (split->size() != 1) return split;  // explicit sizes
  const int64_t size = (*split)[0];
  if (size <= 0) return std::nullopt;
  auto info = infos.find(node.input(0));
  const Shape* shape = info != infos.end() && info->second.shape.rank_known ? &info->second.shape : nullptr;
  // Without a shape a negative axis stays negative: Split counts it from the end as SplitToSequence does
  // (torch.chunk(3, -1) in an opset-20 export).
  if (axis < 0 && shape) axis += shape->rank();
  if (!shape || axis < 0 || axis >= shape->rank() || !shape->dims[axis].is_static()) {
    if (chunks_read < 1) return std::nullopt;
    last_from_length = true;
    return std::vector<int64_t>(static_cast<size_t>(chunks_read - 1), size);
  }
  const int64_t length = shape->dims[axis].value();
  if (length < 0 || length / size >= kMaxChunks) return std::nullopt;
  std::vector<int64_t> sizes(static_cast<size_t>(length / size), size);
  if (length % size) sizes.push_back(length % size);
  return sizes;
}

// Adds an int64 1-D initializer `name` of `values`; returns its name.
std::string add_ints(onnx::GraphProto& graph, const std::string& name, const std::vector<int64_t>& values) {
  onnx::TensorProto& t = *graph.add_initializer();
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::INT64);
  t.add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t.add_int64_data(v);
  return name;
}

// Appends node `op`(inputs) -> `output` (proto_to_graph sorts the nodes); returns the output's name.
std::string add_node(onnx::GraphProto& graph, const std::string& op, const std::vector<std::string>& inputs,
                     const std::string& output) {
  onnx::NodeProto& n = *graph.add_node();
  n.set_name(output);
  n.set_op_type(op);
  for (const std::string& in : inputs) n.add_input(in);
  n.add_output(output);
  return output;
}

// The sizes of `sizes` (chunks of s), then of the last chunk read, min(s, L - s (n - 1)), and of what is left
// after it, from the length L of `input` along `axis`: a 1-D int64 value the import folds once L is known.
std::string sizes_with_last_from_length(onnx::GraphProto& graph, const std::string& base, const std::string& input,
                                        int64_t axis, int64_t s, const std::vector<int64_t>& sizes) {
  const int64_t before = s * static_cast<int64_t>(sizes.size());
  const std::string length = add_node(
      graph, "Gather", {add_node(graph, "Shape", {input}, base + "/shape"), add_ints(graph, base + "/axis", {axis})},
      base + "/length");
  const std::string left =
      add_node(graph, "Sub", {length, add_ints(graph, base + "/before", {before})}, base + "/left");
  const std::string last = add_node(graph, "Min", {left, add_ints(graph, base + "/chunk", {s})}, base + "/last");
  const std::string rest = add_node(graph, "Sub", {left, last}, base + "/rest");
  std::vector<std::string> parts{last, rest};
  if (!sizes.empty()) parts.insert(parts.begin(), add_ints(graph, base + "/whole_chunks", sizes));
  onnx::NodeProto& concat = *graph.add_node();
  concat.set_name(base + "/sizes");
  concat.set_op_type("Concat");
  for (const std::string& p : parts) concat.add_input(p);
  concat.add_output(base + "/sizes");
  onnx::AttributeProto& a = *concat.add_attribute();
  a.set_name("axis");
  a.set_type(onnx::AttributeProto::INT);
  a.set_i(0);
  return concat.output(0);
}

}  // namespace

int rewrite_split_to_sequence(onnx::ModelProto& model, const OnnxValueInfos& infos) {
  onnx::GraphProto& graph = *model.mutable_graph();
  std::map<std::string, std::vector<int>> readers;  // value → indices of the nodes that read it
  for (int i = 0; i < graph.node_size(); ++i)
    for (const std::string& in : graph.node(i).input()) readers[in].push_back(i);
  std::set<std::string> graph_outputs;
  for (const auto& o : graph.output()) graph_outputs.insert(o.name());

  int rewritten = 0;
  for (int i = 0; i < graph.node_size(); ++i) {
    onnx::NodeProto& node = *graph.mutable_node(i);
    if (node.op_type() != "SplitToSequence" || !node.domain().empty() || node.output_size() != 1) continue;
    const std::string sequence = node.output(0);
    if (graph_outputs.count(sequence)) continue;
    std::vector<std::pair<int, int64_t>> positions;  // SequenceAt node, the chunk it reads (maybe negative)
    bool resolved = true;
    int64_t chunks_read = 0;
    for (int r : readers[sequence]) {
      const onnx::NodeProto& reader = graph.node(r);
      const std::optional<std::vector<int64_t>> at =
          reader.op_type() == "SequenceAt" ? constant_ints(graph, reader.input(1)) : std::nullopt;
      if (!at || at->size() != 1 || (*at)[0] >= kMaxChunks) {
        resolved = false;
        break;
      }
      positions.emplace_back(r, (*at)[0]);
      chunks_read = std::max(chunks_read, (*at)[0] + 1);
    }
    int64_t axis = 0;
    bool last_from_length = false;
    const std::optional<std::vector<int64_t>> sizes =
        resolved && !positions.empty() ? chunk_sizes(graph, node, infos, chunks_read, axis, last_from_length)
                                       : std::nullopt;
    if (!sizes) continue;
    // With the last chunk sized at import, one more output holds what follows it (nothing reads it).
    const auto count = static_cast<int64_t>(sizes->size()) + (last_from_length ? 2 : 0);
    for (auto& [r, k] : positions) {
      if (k < 0 && last_from_length) resolved = false;  // counted from an end the import does not know yet
      if (k < 0) k += count;
      resolved = resolved && k >= 0 && k < count;
    }
    if (!resolved) continue;

    const std::string split = last_from_length
                                  ? sizes_with_last_from_length(graph, sequence, node.input(0), axis,
                                                                constant_ints(graph, node.input(1))->front(), *sizes)
                                  : add_ints(graph, sequence + "/split_sizes", *sizes);
    const std::string input = node.input(0), node_name = node.name();
    node.Clear();
    node.set_name(node_name);  // the user's node, named in errors
    node.set_op_type("Split");
    node.add_input(input);
    node.add_input(split);
    for (int64_t k = 0; k < count; ++k) node.add_output(sequence + "/chunk_" + std::to_string(k));
    onnx::AttributeProto* axis_attribute = node.add_attribute();
    axis_attribute->set_name("axis");
    axis_attribute->set_type(onnx::AttributeProto::INT);
    axis_attribute->set_i(axis);
    for (const auto& [r, k] : positions) {
      onnx::NodeProto& reader = *graph.mutable_node(r);
      const std::string out = reader.output(0), name = reader.name();
      reader.Clear();
      reader.set_name(name);
      reader.set_op_type("Identity");
      reader.add_input(sequence + "/chunk_" + std::to_string(k));
      reader.add_output(out);
    }
    ++rewritten;
  }
  return rewritten;
}

}  // namespace onnxtrain
