// Casts back to float32 folded into the half products they read (float32_products.h).
#include "graph/autodiff/float32_products.h"

#include <optional>

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

// The product whose output `cast` converts, found through at most one Reshape, each step the only reader
// of what it reads: the product and the Reshape (absent: none).
struct Folded {
  NodeId product, reshape;
};
std::optional<Folded> foldable(const Graph& g, NodeId cast_id) {
  const Node& cast = g.node(cast_id);
  if (!cast.is_onnx_op("Cast") || cast.attr_int("to", 0) != kOnnxFloat || cast.inputs.size() != 1) return std::nullopt;
  if (!is_half(g.value(cast.inputs[0]).dtype)) return std::nullopt;
  Folded f;
  NodeId reader = cast_id;
  ValueId v = cast.inputs[0];
  NodeId producer = g.value(v).producer;
  if (producer.valid() && g.node(producer).is_onnx_op("Reshape")) {
    if (g.sole_reader(v) != reader) return std::nullopt;
    f.reshape = producer;
    reader = producer;
    v = g.node(producer).inputs[0];
    producer = g.value(v).producer;
  }
  if (!producer.valid() || g.sole_reader(v) != reader || !writes_float32_instead(g, g.node(producer)))
    return std::nullopt;
  f.product = producer;
  return f;
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
  const NodeId last = f.reshape.valid() ? f.reshape : f.product;
  const ValueId dropped = g.node(last).outputs[0];  // the half value the Cast read: no node writes it now
  g.value(dropped).producer = NodeId{};
  g.node(last).outputs[0] = out;
  g.value(out).producer = last;
  infer(g, f.product);
  if (f.reshape.valid()) infer(g, f.reshape);
}

}  // namespace

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
