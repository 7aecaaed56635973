// GELU's formula trained as one Gelu node (fused_gelu.h).
#include "graph/autodiff/fused_gelu.h"

#include <cmath>
#include <numbers>
#include <optional>
#include <string_view>

#include "graph/op_schema.h"

namespace onnxtrain {
namespace {

// A formula being matched from its Erf or Tanh outwards: the nodes taken so far (removed once it matches).
struct Formula {
  const Graph& g;
  std::vector<NodeId> nodes;

  // Whether `v` is a constant of one element within 1e-5 (relative) of `want`.
  bool is_constant(ValueId v, double want) const {
    const Value& c = g.value(v);
    if (c.role != ValueRole::Constant || !c.data || c.data->numel() != 1 ||
        !(is_floating(c.dtype) || is_integer(c.dtype)))
      return false;
    return std::abs(c.data->to_double()[0] - want) <= 1e-5 * std::abs(want);
  }
  // The operand of two-input node `id` that is not the constant `c` (either side: Mul and Add commute).
  std::optional<ValueId> other_than(NodeId id, double c) const {
    const Node& n = g.node(id);
    if (is_constant(n.inputs[1], c)) return n.inputs[0];
    if (is_constant(n.inputs[0], c)) return n.inputs[1];
    return std::nullopt;
  }
  // The producer of `v`, taken, when it is a two-input `type` of the default domain that only `reader` reads.
  std::optional<NodeId> take_producer(ValueId v, NodeId reader, std::string_view type) {
    return g.sole_reader(v) == std::optional(reader) ? take(g.value(v).producer, type) : std::nullopt;
  }
  // The one reader of `v`, taken, when it is a two-input `type` of the default domain.
  std::optional<NodeId> take_reader(ValueId v, std::string_view type) {
    const std::optional<NodeId> reader = g.sole_reader(v);
    return reader ? take(*reader, type) : std::nullopt;
  }

 private:
  std::optional<NodeId> take(NodeId id, std::string_view type) {
    if (!id.valid()) return std::nullopt;
    const Node& n = g.node(id);
    if (!n.is_onnx_op(type) || n.inputs.size() != 2 || n.outputs.size() != 1) return std::nullopt;
    nodes.push_back(id);
    return id;
  }
};

// x of Erf's argument x / √2 or x · (1/√2).
std::optional<ValueId> erf_argument(Formula& f, ValueId u, NodeId erf) {
  if (const std::optional<NodeId> div = f.take_producer(u, erf, "Div"))
    return f.is_constant(f.g.node(*div).inputs[1], std::numbers::sqrt2) ? std::optional(f.g.node(*div).inputs[0])
                                                                        : std::nullopt;
  const std::optional<NodeId> mul = f.take_producer(u, erf, "Mul");
  return mul ? f.other_than(*mul, 1 / std::numbers::sqrt2) : std::nullopt;
}

// Whether `v`, read by `reader` alone, is x³: Pow(x, 3) or x · x · x grouped either way.
bool is_cube(Formula& f, ValueId v, NodeId reader, ValueId x) {
  if (const std::optional<NodeId> pow = f.take_producer(v, reader, "Pow")) {
    const Node& p = f.g.node(*pow);
    return p.inputs[0] == x && f.is_constant(p.inputs[1], 3.0);
  }
  const std::optional<NodeId> outer = f.take_producer(v, reader, "Mul");
  if (!outer) return false;
  const Node& o = f.g.node(*outer);
  for (size_t side : {size_t{0}, size_t{1}}) {
    if (o.inputs[1 - side] != x) continue;
    const std::optional<NodeId> square = f.take_producer(o.inputs[side], *outer, "Mul");
    return square && f.g.node(*square).inputs[0] == x && f.g.node(*square).inputs[1] == x;
  }
  return false;
}

// x of Tanh's argument √(2/π) · (x + 0.044715 · x³), the sum's operands either way round.
std::optional<ValueId> tanh_argument(Formula& f, ValueId u, NodeId tanh) {
  const std::optional<NodeId> scale = f.take_producer(u, tanh, "Mul");
  const std::optional<ValueId> inner = scale ? f.other_than(*scale, std::sqrt(2 / std::numbers::pi)) : std::nullopt;
  const std::optional<NodeId> sum = inner ? f.take_producer(*inner, *scale, "Add") : std::nullopt;
  if (!sum) return std::nullopt;
  const size_t taken = f.nodes.size();
  for (size_t side : {size_t{0}, size_t{1}}) {
    const ValueId x = f.g.node(*sum).inputs[1 - side];
    const std::optional<NodeId> term = f.take_producer(f.g.node(*sum).inputs[side], *sum, "Mul");
    const std::optional<ValueId> cube = term ? f.other_than(*term, 0.044715) : std::nullopt;
    if (cube && is_cube(f, *cube, *term, x)) return x;
    f.nodes.resize(taken);
  }
  return std::nullopt;
}

// The last Mul of x · a · 0.5, its factors grouped in any order: climbs from `a` through the Muls that alone
// read it, one factor at each, until x and 0.5 are both in; a factor may itself be x · 0.5 (a Mul that only
// the product reads: torch's `x * 0.5 * (1 + erf)`).
std::optional<NodeId> product(Formula& f, ValueId a, ValueId x) {
  bool has_x = false, has_half = false;
  std::optional<NodeId> mul;
  for (ValueId at = a; !(has_x && has_half); at = f.g.node(*mul).outputs[0]) {
    mul = f.take_reader(at, "Mul");
    if (!mul) return std::nullopt;
    const Node& m = f.g.node(*mul);
    const ValueId factor = m.inputs[0] == at ? m.inputs[1] : m.inputs[0];
    if (factor == x && !has_x) {
      has_x = true;
    } else if (f.is_constant(factor, 0.5) && !has_half) {
      has_half = true;
    } else if (has_x || has_half) {
      return std::nullopt;
    } else {
      const std::optional<NodeId> half_x = f.take_producer(factor, *mul, "Mul");
      if (!half_x || f.other_than(*half_x, 0.5) != std::optional(x)) return std::nullopt;
      has_x = has_half = true;
    }
  }
  return mul;
}

// The Gelu that replaces the formula around Erf or Tanh node `id`: its input, approximation and output.
struct Gelu {
  ValueId x, y;
  std::string approximate;
  std::vector<NodeId> nodes;  // the formula's
};

std::optional<Gelu> match_gelu(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  const bool erf = n.is_onnx_op("Erf");
  if ((!erf && !n.is_onnx_op("Tanh")) || n.inputs.size() != 1 || n.outputs.size() != 1) return std::nullopt;
  Formula f{g, {id}};
  const std::optional<ValueId> x = erf ? erf_argument(f, n.inputs[0], id) : tanh_argument(f, n.inputs[0], id);
  if (!x || g.value(*x).dtype != DType::Float32) return std::nullopt;
  const std::optional<NodeId> one_plus = f.take_reader(n.outputs[0], "Add");
  if (!one_plus || f.other_than(*one_plus, 1.0) != std::optional(n.outputs[0])) return std::nullopt;
  const std::optional<NodeId> last = product(f, g.node(*one_plus).outputs[0], *x);
  if (!last) return std::nullopt;
  const ValueId y = g.node(*last).outputs[0];
  if (!(g.value(y).shape == g.value(*x).shape) || g.value(y).dtype != DType::Float32) return std::nullopt;
  return Gelu{*x, y, erf ? "none" : "tanh", std::move(f.nodes)};
}

// "/mlp/act/Tanh" -> "/mlp/act/Gelu".
std::string gelu_name(const std::string& anchor) {
  const size_t slash = anchor.rfind('/');
  return slash == std::string::npos ? anchor + "_gelu" : anchor.substr(0, slash + 1) + "Gelu";
}

}  // namespace

int fuse_gelu(Graph& graph) {
  const OpSchema& schema = *OpRegistry::builtin().find("", "Gelu");
  int fused = 0;
  for (NodeId id : std::vector<NodeId>(graph.order())) {
    const std::optional<Gelu> gelu = match_gelu(graph, id);
    if (!gelu) continue;
    const std::string name = gelu_name(graph.node(id).name);
    for (NodeId taken : gelu->nodes) graph.remove_node(taken);
    const NodeId node = graph.add_node({.name = name,
                                        .op_type = "Gelu",
                                        .opset = 20,
                                        .inputs = {gelu->x},
                                        .outputs = {gelu->y},
                                        .attributes = {{"approximate", gelu->approximate}}});
    infer_node(graph, node, schema);
    ++fused;
  }
  if (fused > 0) graph.sort();
  return fused;
}

}  // namespace onnxtrain
