#include "graph/mixed_precision.h"

#include <algorithm>
#include <set>

#include "graph/error.h"
#include "graph/op_schema.h"

namespace onnxtrain {
namespace {

constexpr int64_t kOnnxFloat = 1, kOnnxFloat16 = 10, kOnnxBFloat16 = 16;  // TensorProto codes (Cast's `to`)

class Rewriter {
 public:
  Rewriter(Graph& graph, Precision precision, const AutocastOptions& options)
      : graph_(graph), half_(compute_dtype(precision)), options_(options) {
    for (size_t i = 0; i < graph.value_count(); ++i) taken_.insert(graph.value(ValueId{static_cast<uint32_t>(i)}).name);
    for (NodeId n : graph.order()) taken_.insert(graph.node(n).name);
    auto it = graph.info.opsets.find("");
    // Cast to bfloat16 needs opset 13; the added nodes are plain ai.onnx ops at the model's version or 13.
    opset_ = std::max(it == graph.info.opsets.end() ? 17 : it->second, 13);
  }

  bool eligible(const Node& n) const {
    const bool fused = is_fused_matmul(n);
    if (!fused && (!n.domain.empty() || (n.op_type != "Conv" && n.op_type != "Gemm" && n.op_type != "MatMul")))
      return false;
    if (n.outputs.size() != 1 || !n.outputs[0].valid()) return false;
    if (options_.cpu_float32_convs && conv_stays_float32_on_cpu(graph_, n)) return false;
    for (size_t i = 0; i < n.inputs.size(); ++i)
      if (n.inputs[i].valid() && graph_.value(n.inputs[i]).dtype != DType::Float32) return false;
    if (n.op_type == "Conv" && n.has_input(2)) {  // the bias Add needs the output's rank to broadcast B
      const Shape& y = graph_.value(n.outputs[0]).shape;
      return y.rank_known && y.rank() >= 3;
    }
    if (n.op_type != "MatMul" && !fused) return true;
    // MatMul: plain matrices, or equal ranks with batch sizes known equal (static, or the same symbol):
    // no broadcast whose gradient would sum back. FusedMatMul also takes rows against a matrix, whose
    // gradient rule already multiplies over the flattened rows.
    const Shape& a = graph_.value(n.inputs[0]).shape;
    const Shape& b = graph_.value(n.inputs[1]).shape;
    if (!a.rank_known || !b.rank_known || a.rank() < 2) return false;
    if (flattens(n)) return true;
    if (fused && a.rank() >= 3 && b.rank() == 2 && n.attr_int("transA", 0) == 0) return true;
    if (a.rank() != b.rank()) return false;
    for (int64_t d = 0; d + 2 < a.rank(); ++d) {
      if (a.dims[d].is_unknown() || a.dims[d] != b.dims[d]) return false;
    }
    return true;
  }

  // A MatMul of activations (..., M, K) by a static matrix (K, N) (a linear layer on a sequence): computed
  // as one (·, K) × (K, N) matrix product between float32 Reshapes, so that its gradient is a plain Gemm
  // (no sum over the broadcast batch axes in half).
  bool flattens(const Node& n) const {
    if (n.op_type != "MatMul") return false;
    const Shape& a = graph_.value(n.inputs[0]).shape;
    const Shape& b = graph_.value(n.inputs[1]).shape;
    return a.rank_known && b.rank_known && a.rank() >= 3 && b.rank() == 2 && b.is_static();
  }

  // Node `id` now reads its two operands `x` and `w` cast to half and writes a new half value (returned)
  // in place of y, inferred; the caller casts it back and writes y.
  ValueId compute_in_half(NodeId id, ValueId x, ValueId w, ValueId y, const std::string& base) {
    const ValueId a = cast(x, base + "/autocast_in0");
    const ValueId b = cast(w, base + "/autocast_in1");
    const ValueId half_out = graph_.add_value({.name = fresh(graph_.value(y).name + "_half")});
    Node& node = graph_.node(id);
    node.inputs = {a, b};
    node.outputs = {half_out};
    graph_.value(half_out).producer = id;
    const OpSchema* schema = OpRegistry::builtin().find("", node.op_type);
    ONNXTRAIN_CHECK(schema, node.op_type + " has no schema");
    infer_node(graph_, id, *schema);
    return half_out;
  }

  void rewrite_flattened(NodeId id) {
    Node& n = graph_.node(id);
    const std::string base = n.name.empty() ? n.op_type : n.name;
    const ValueId y = n.outputs[0];
    const ValueId x = n.inputs[0], w = n.inputs[1];
    const std::vector<int64_t> kn = graph_.value(w).shape.static_sizes();
    const ValueId rows =
        add_node("Reshape", {x, int64s({-1, kn[0]}, base + "/rows_shape")}, {}, base + "/autocast_rows");
    const ValueId half_out = compute_in_half(id, rows, w, y, base);
    const ValueId back = add_node("Cast", {half_out}, {{"to", kOnnxFloat}}, base + "/autocast_out");
    // y's shape: x's leading sizes, then N.
    const ValueId leading = add_node("Shape", {x}, {{"end", int64_t{-1}}}, base + "/autocast_leading", {}, 15);
    const ValueId shape =
        add_node("Concat", {leading, int64s({kn[1]}, base + "/n")}, {{"axis", int64_t{0}}}, base + "/autocast_shape");
    add_node("Reshape", {back, shape}, {}, base + "/autocast_unflatten", y);
  }

  // A FusedMatMul reads its operands cast to half and writes y itself in float32 (float32_output): the
  // cast back and the bias Add of the other products are folded into it, and so is its alpha.
  void rewrite_fused_matmul(NodeId id) {
    const Node& n = graph_.node(id);
    const std::string base = n.name.empty() ? n.op_type : n.name;
    const ValueId x = n.inputs[0], w = n.inputs[1];
    const ValueId a = cast(x, base + "/autocast_in0");
    const ValueId b = cast(w, base + "/autocast_in1");
    Node& node = graph_.node(id);  // cast() may move the graph's nodes
    node.inputs[0] = a;
    node.inputs[1] = b;
    node.attributes["float32_output"] = int64_t{1};
    infer_node(graph_, id, *OpRegistry::builtin().find(kTrainingDomain, "FusedMatMul"));
  }

  void rewrite(NodeId id) {
    if (is_fused_matmul(graph_.node(id))) return rewrite_fused_matmul(id);
    if (flattens(graph_.node(id))) return rewrite_flattened(id);
    // add_node may move the graph's nodes: `n` is not used after the first node is added.
    Node& n = graph_.node(id);
    const std::string base = n.name.empty() ? n.op_type : n.name;
    const bool conv = n.op_type == "Conv";
    const ValueId y = n.outputs[0];
    const ValueId x = n.inputs[0], w = n.inputs[1];
    ValueId bias;
    double alpha = 1, beta = 1;
    if (conv && n.has_input(2)) bias = n.inputs[2];
    if (n.op_type == "Gemm") {
      alpha = n.attr_float("alpha", 1.0);
      beta = n.attr_float("beta", 1.0);
      if (n.has_input(2)) bias = n.inputs[2];
      n.attributes.erase("alpha");
      n.attributes.erase("beta");
    }
    const ValueId half_out = compute_in_half(id, x, w, y, base);
    // The float32 tail: cast back, ·alpha, + beta·C (Conv: B reshaped onto the channel axis); its last
    // node writes y itself, so y's consumers and the graph outputs are unchanged.
    ValueId c;
    if (bias.valid()) {
      c = bias;
      if (beta != 1.0) c = add_node("Mul", {c, scalar(beta, base + "/beta")}, {}, base + "/autocast_beta");
      if (conv) c = add_node("Reshape", {c, channel_shape(y, base)}, {}, base + "/autocast_bias_shape");
    }
    const bool scaled = alpha != 1.0;
    ValueId current =
        add_node("Cast", {half_out}, {{"to", kOnnxFloat}}, base + "/autocast_out", scaled || c.valid() ? ValueId{} : y);
    if (scaled) {
      current = add_node("Mul", {current, scalar(alpha, base + "/alpha")}, {}, base + "/autocast_alpha",
                         c.valid() ? ValueId{} : y);
    }
    if (c.valid()) add_node("Add", {current, c}, {}, base + "/autocast_bias", y);
  }

 private:
  Graph& graph_;
  DType half_;
  AutocastOptions options_;
  int opset_ = 17;
  std::set<std::string> taken_;

  std::string fresh(const std::string& base) {
    std::string name = base;
    for (int k = 1; taken_.count(name); ++k) name = base + "_" + std::to_string(k);
    taken_.insert(name);
    return name;
  }

  ValueId add_node(const std::string& op, std::vector<ValueId> inputs, Attributes attrs, const std::string& name,
                   ValueId out = {}, int min_opset = 0) {
    if (!out.valid()) out = graph_.add_value({.name = fresh(name + "_out")});
    NodeId node = graph_.add_node({.name = fresh(name),
                                   .op_type = op,
                                   .opset = std::max(opset_, min_opset),
                                   .inputs = std::move(inputs),
                                   .outputs = {out},
                                   .attributes = std::move(attrs)});
    const OpSchema* schema = OpRegistry::builtin().find("", op);
    ONNXTRAIN_CHECK(schema, "mixed precision uses " + op + ", which has no schema");
    infer_node(graph_, node, *schema);
    return out;
  }

  ValueId cast(ValueId v, const std::string& name) {
    return add_node("Cast", {v}, {{"to", half_ == DType::BFloat16 ? kOnnxBFloat16 : kOnnxFloat16}}, name);
  }

  ValueId scalar(double value, const std::string& name) {
    Tensor t(DType::Float32, {});
    t.data<float>()[0] = static_cast<float>(value);
    ValueId v = graph_.add_value(
        {.name = fresh(name), .dtype = DType::Float32, .shape = Shape::of({}), .role = ValueRole::Constant, .data = t});
    graph_.initializers.push_back(v);
    return v;
  }

  // (-1, 1, ..., 1) with one 1 per spatial axis of Conv's output `y`: B (M) broadcast over the channel axis.
  ValueId channel_shape(ValueId y, const std::string& base) {
    const Shape& s = graph_.value(y).shape;
    ONNXTRAIN_CHECK(s.rank_known && s.rank() >= 3, "Conv node '" + base + "': eligible() checks its output's rank");
    std::vector<int64_t> sizes(static_cast<size_t>(s.rank() - 1), 1);
    sizes[0] = -1;
    return int64s(sizes, base + "/bias_shape");
  }

  // A 1-D int64 constant initializer (its `known` values let shape inference read it).
  ValueId int64s(const std::vector<int64_t>& values, const std::string& name) {
    std::vector<Dim> known;
    for (int64_t x : values) known.emplace_back(x);
    ValueId v = graph_.add_value({.name = fresh(name),
                                  .dtype = DType::Int64,
                                  .shape = Shape::of({static_cast<int64_t>(values.size())}),
                                  .role = ValueRole::Constant,
                                  .data = Tensor::vector_int64(values),
                                  .known = std::move(known)});
    graph_.initializers.push_back(v);
    return v;
  }
};

}  // namespace

Precision precision_from_name(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  if (name == "fp16") return Precision::fp16;
  throw Error("unknown precision '" + name + "': expected fp32, bf16 or fp16");
}

std::string precision_name(Precision precision) {
  switch (precision) {
    case Precision::bf16:
      return "bf16";
    case Precision::fp16:
      return "fp16";
    default:
      return "fp32";
  }
}

DType compute_dtype(Precision precision) {
  switch (precision) {
    case Precision::bf16:
      return DType::BFloat16;
    case Precision::fp16:
      return DType::Float16;
    default:
      return DType::Float32;
  }
}

bool is_fused_matmul(const Node& n) { return n.domain == kTrainingDomain && n.op_type == "FusedMatMul"; }

bool conv_stays_float32_on_cpu(const Graph& graph, const Node& n) {
  if (!n.is_onnx_op("Conv") || n.inputs.empty()) return false;
  const Shape& x = graph.value(n.inputs[0]).shape;
  if (!x.rank_known || x.rank() < 3 || !x.dims[1].is_static()) return false;
  const int64_t channels = x.dims[1].value(), group = n.attr_int("group", 1);
  return channels < kHalfConvMinChannels || (group > 1 && group == channels);
}

MixedPrecisionReport apply_mixed_precision(Graph& graph, Precision precision, const AutocastOptions& options) {
  MixedPrecisionReport report;
  if (precision == Precision::fp32) return report;
  Rewriter rewriter(graph, precision, options);
  std::vector<NodeId> targets;
  for (NodeId id : graph.order())
    if (rewriter.eligible(graph.node(id))) targets.push_back(id);
  for (NodeId id : targets) {
    report.half_nodes.push_back(graph.node(id).name);
    rewriter.rewrite(id);
  }
  // The Casts of weights beside their layers: a pipeline stage then owns the layer's weights and casts
  // them itself, instead of receiving half copies from the stage that happened to hold the Cast.
  graph.sort_depth_first();
  return report;
}

}  // namespace onnxtrain
