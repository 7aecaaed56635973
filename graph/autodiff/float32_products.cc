// Casts back to float32 folded into the half products they read (float32_products.h).
#include "graph/autodiff/float32_products.h"

#include <optional>
#include <vector>

#include "graph/mixed_precision.h"  // is_fused_matmul
#include "graph/op_schema.h"

namespace onnxtrain {
namespace {

constexpr int64_t kOnnxFloat = 1;  // TensorProto.FLOAT

bool is_half(DType t) { return t == DType::BFloat16 || t == DType::Float16; }

// A product that can write float32 instead of half: a FusedMatMul without float32_output whose C (if
// any) is float32 already (none is, under autocast's half products), or a Gemm without C.
bool writes_float32_instead(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || !is_half(g.value(n.outputs[0]).dtype)) return false;
  if (is_fused_matmul(n)) return n.attr_int("float32_output", 0) == 0 && !n.has_input(2);
  return n.is_onnx_op("Gemm") && !n.has_input(2);
}

bool moves_data_only(const Node& n) { return n.is_onnx_op("Reshape") || n.is_onnx_op("Transpose"); }

// The Reshapes and Transposes that lead to what node `reader` reads as its first input, each the only
// reader of what it reads, nearest first, and the node that writes the value at their start (invalid for
// a graph input). Only through Transposes when `transposes`.
struct DataChain {
  std::vector<NodeId> movers;
  NodeId source;
};
std::optional<DataChain> data_chain(const Graph& g, NodeId reader, bool transposes) {
  DataChain c;
  for (;;) {
    const ValueId v = g.node(reader).inputs[0];
    if (g.sole_reader(v) != reader) return std::nullopt;
    c.source = g.value(v).producer;
    if (!c.source.valid() || !moves_data_only(g.node(c.source))) return c;
    if (!transposes && g.node(c.source).is_onnx_op("Transpose")) return c;
    c.movers.push_back(c.source);
    reader = c.source;
  }
}

// The product whose output `cast` converts, found through Reshapes and Transposes, each step the only
// reader of what it reads: the product and those nodes, nearest the Cast first.
struct Folded {
  NodeId product;
  std::vector<NodeId> movers;
};
std::optional<Folded> foldable(const Graph& g, NodeId cast_id) {
  const Node& cast = g.node(cast_id);
  if (!cast.is_onnx_op("Cast") || cast.attr_int("to", 0) != kOnnxFloat || cast.inputs.size() != 1) return std::nullopt;
  if (!is_half(g.value(cast.inputs[0]).dtype)) return std::nullopt;
  const std::optional<DataChain> c = data_chain(g, cast_id, true);
  if (!c || !c->source.valid() || !writes_float32_instead(g, g.node(c->source))) return std::nullopt;
  return Folded{c->source, c->movers};
}

void infer(Graph& g, NodeId id) {
  const Node& n = g.node(id);
  infer_node(g, id, *OpRegistry::builtin().find(n.domain, n.op_type));
}

void fold(Graph& g, NodeId cast_id, const Folded& f) {
  const ValueId out = g.node(cast_id).outputs[0];
  g.remove_node(cast_id);
  Node& product = g.node(f.product);
  if (product.is_onnx_op("Gemm")) {
    product.op_type = "FusedMatMul";
    product.domain = kTrainingDomain;
    product.opset = 1;
    product.attributes.erase("beta");  // no C: beta has nothing to scale
  }
  product.attributes["float32_output"] = int64_t{1};
  // The last node of the chain writes the Cast's output value, so its readers and the graph outputs stay.
  const NodeId last = f.movers.empty() ? f.product : f.movers.front();
  const ValueId dropped = g.node(last).outputs[0];  // the half value the Cast read: no node writes it now
  g.value(dropped).producer = NodeId{};
  g.node(last).outputs[0] = out;
  g.value(out).producer = last;
  infer(g, f.product);
  for (auto it = f.movers.rbegin(); it != f.movers.rend(); ++it) infer(g, *it);  // from the product on
}

// Cast(Reshape…(Transpose(x))) -> Reshape…(Transpose(Cast(x))): the chain's values shift by one node, the
// Cast writing the Transpose's old output and the last mover the Cast's, which the products read.
bool move_before_transpose(Graph& g, NodeId cast_id) {
  const Node& cast = g.node(cast_id);
  if (!cast.is_onnx_op("Cast") || cast.inputs.size() != 1 || !is_half(g.value(cast.outputs[0]).dtype) ||
      g.value(cast.inputs[0]).dtype != DType::Float32)
    return false;
  const std::optional<DataChain> c = data_chain(g, cast_id, false);  // the Reshapes up to a Transpose
  if (!c || !c->source.valid() || !g.node(c->source).is_onnx_op("Transpose")) return false;
  const NodeId transpose = c->source;
  std::vector<NodeId> chain{transpose};  // the movers in data order: the Transpose, then the Reshapes
  chain.insert(chain.end(), c->movers.rbegin(), c->movers.rend());
  std::vector<ValueId> outs;  // what each wrote, then what the Cast wrote
  for (NodeId id : chain) outs.push_back(g.node(id).outputs[0]);
  outs.push_back(cast.outputs[0]);
  const ValueId x = g.node(transpose).inputs[0];
  Node& moved = g.node(cast_id);
  moved.inputs[0] = x;
  moved.outputs[0] = outs[0];
  g.value(outs[0]).producer = cast_id;
  for (size_t i = 0; i < chain.size(); ++i) {
    Node& n = g.node(chain[i]);
    n.inputs[0] = outs[i];
    n.outputs[0] = outs[i + 1];
    g.value(outs[i + 1]).producer = chain[i];
  }
  infer(g, cast_id);
  for (NodeId id : chain) infer(g, id);
  return true;
}

}  // namespace

int move_half_casts_before_transposes(Graph& forward) {
  int moved = 0;
  for (bool again = true; again;) {  // a Cast moved may meet the next Transpose up: each move goes up one
    again = false;
    for (NodeId id : forward.order()) {
      if (!move_before_transpose(forward, id)) continue;
      ++moved;
      again = true;
    }
  }
  if (moved > 0) forward.sort_depth_first();  // each moved Cast runs before its Transpose now
  return moved;
}

int fold_casts_into_products(TrainingGraph& training) {
  Graph& g = training.graph;
  const std::vector<NodeId> order = g.order();  // removal changes order()
  int folded = 0;
  for (size_t i = training.forward_node_count; i < order.size(); ++i) {
    const std::optional<Folded> f = foldable(g, order[i]);
    if (!f) continue;
    fold(g, order[i], *f);
    ++folded;
  }
  return folded;
}

}  // namespace onnxtrain
