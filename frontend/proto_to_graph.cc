#include <map>

#include "frontend/import_passes.h"
#include "frontend/tensor_proto.h"
#include "graph/error.h"

namespace onnxtrain {

Shape shape_from_type(const onnx::TypeProto& type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return Shape::unknown_rank();
  Shape shape;
  for (const auto& d : type.tensor_type().shape().dim()) {
    if (d.has_dim_value() && d.dim_value() >= 0)
      shape.dims.emplace_back(d.dim_value());
    else if (d.has_dim_param() && !d.dim_param().empty())
      shape.dims.push_back(Dim::symbol(d.dim_param()));
    else
      shape.dims.push_back(Dim::unknown());
  }
  return shape;
}

static Attribute attribute_from_proto(const onnx::AttributeProto& attr, const std::string& node_name) {
  using A = onnx::AttributeProto;
  switch (attr.type()) {
    case A::INT:
      return attr.i();
    case A::FLOAT:
      return static_cast<double>(attr.f());
    case A::STRING:
      return attr.s();
    case A::INTS:
      return std::vector<int64_t>(attr.ints().begin(), attr.ints().end());
    case A::FLOATS:
      return std::vector<double>(attr.floats().begin(), attr.floats().end());
    case A::STRINGS:
      return std::vector<std::string>(attr.strings().begin(), attr.strings().end());
    case A::TENSOR: {
      try {
        return tensor_from_proto(attr.t());
      } catch (const Error& e) {
        throw Error("attribute '" + attr.name() + "' of node '" + node_name + "': " + e.message());
      }
    }
    default:
      // Subgraphs (If/Loop/Scan bodies), sparse tensors and type protos: kept as a marker so the op
      // loads (as one onnxtrain cannot train) without pretending to understand it.
      return std::string("<unsupported attribute type " + std::to_string(attr.type()) + ">");
  }
}

static int opset_of(const onnx::ModelProto& model, const std::string& domain) {
  for (const auto& o : model.opset_import()) {
    std::string d = o.domain() == "ai.onnx" ? "" : o.domain();
    if (d == domain) return static_cast<int>(o.version());
  }
  return 0;
}

Graph graph_from_proto(const onnx::ModelProto& model, std::optional<int64_t> batch, const SymbolBindings& dims) {
  const onnx::GraphProto& gp = model.graph();
  Graph graph;
  graph.info.producer_name = model.producer_name();
  graph.info.producer_version = model.producer_version();
  graph.info.ir_version = model.ir_version();
  for (const auto& o : model.opset_import()) graph.info.opsets[o.domain() == "ai.onnx" ? "" : o.domain()] = o.version();

  std::map<std::string, ValueId> by_name;
  for (const auto& init : gp.initializer()) {
    if (by_name.count(init.name())) throw Error("initializer '" + init.name() + "' is defined twice");
    Tensor data = tensor_from_proto(init);
    Value v{.name = init.name(), .dtype = data.dtype(), .shape = Shape::of(data.sizes()), .role = ValueRole::Constant};
    v.data = std::move(data);
    ValueId id = graph.add_value(std::move(v));
    by_name[init.name()] = id;
    graph.initializers.push_back(id);
  }

  SymbolBindings bindings = dims;
  for (const auto& input : gp.input()) {
    if (by_name.count(input.name())) continue;  // IR < 4 lists initializers as inputs too
    if (!input.type().has_tensor_type()) {
      throw Error("graph input '" + input.name() +
                  "' is not a tensor (sequences, maps and optionals are not supported)");
    }
    Shape shape = shape_from_type(input.type());
    if (shape.rank_known && !shape.dims.empty() && !shape.dims[0].is_static()) {
      // The leading dynamic dim of a data input is the batch dimension.
      std::string symbol = shape.dims[0].is_symbolic() ? shape.dims[0].symbol_name() : "batch";
      shape.dims[0] = Dim::symbol(symbol);
      auto& symbols = graph.info.batch_symbols;
      if (std::find(symbols.begin(), symbols.end(), symbol) == symbols.end()) symbols.push_back(symbol);
      if (batch) bindings[symbol] = *batch;
    }
    ValueId id = graph.add_value({.name = input.name(),
                                  .dtype = dtype_from_onnx_code(input.type().tensor_type().elem_type()),
                                  .shape = shape.bind(bindings),
                                  .role = ValueRole::Input});
    by_name[input.name()] = id;
    graph.inputs.push_back(id);
  }

  // Outputs first, so that a node may name an input produced later (sort() orders them, or finds a cycle).
  std::vector<Node> nodes;
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    Node node{.name = np.name().empty() ? np.op_type() + "_" + std::to_string(i) : np.name(),
              .op_type = np.op_type(),
              .domain = np.domain() == "ai.onnx" ? "" : np.domain()};
    node.opset = opset_of(model, node.domain);
    for (const auto& out : np.output()) {
      if (out.empty()) {
        node.outputs.push_back(ValueId{});
        continue;
      }
      if (by_name.count(out)) {
        throw Error("value '" + out +
                    "' is produced twice (graph inputs, initializers and node outputs must have "
                    "unique names)")
            .at_node(node.name, node.op_type, node.domain, node.opset);
      }
      by_name[out] = graph.add_value({.name = out});
      node.outputs.push_back(by_name[out]);
    }
    nodes.push_back(std::move(node));
  }
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    Node& node = nodes[i];
    for (const auto& in : np.input()) {
      if (in.empty()) {
        node.inputs.push_back(ValueId{});
        continue;
      }
      auto it = by_name.find(in);
      if (it == by_name.end()) {
        throw Error("input '" + in + "' is not produced by any node and is neither a graph input nor an initializer")
            .at_node(node.name, node.op_type, node.domain, node.opset);
      }
      node.inputs.push_back(it->second);
    }
    for (const auto& attr : np.attribute()) node.attributes[attr.name()] = attribute_from_proto(attr, node.name);
    graph.add_node(std::move(node));
  }
  for (const auto& output : gp.output()) {
    auto it = by_name.find(output.name());
    if (it == by_name.end()) throw Error("graph output '" + output.name() + "' is not produced by any node");
    graph.outputs.push_back(it->second);
  }
  graph.sort();
  return graph;
}

}  // namespace onnxtrain
