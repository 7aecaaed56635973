#include "graph/autodiff/training_recipe.h"

#include <algorithm>

#include "graph/autodiff/add_relu.h"
#include "graph/autodiff/batch_norm_relu.h"
#include "graph/autodiff/float32_products.h"
#include "graph/autodiff/fused_gelu.h"
#include "graph/autodiff/fused_matmul.h"
#include "graph/autodiff/gather_before_transpose.h"
#include "graph/autodiff/pool_before_relu.h"
#include "graph/error.h"
#include "graph/op_schema.h"

namespace onnxtrain {
namespace {

// Makes the running statistics of every BatchNormalization (opset >= 14) in training mode graph outputs,
// and turns those in inference mode whose mean/var are State initializers
// into training mode with running_mean/running_var outputs (graph outputs), as model.train() does.
// Before opset 14 training mode means the four extra outputs (saved mean/var included); those exports
// are left as they are: such nodes keep their running statistics unchanged.
void batch_norm_to_training_mode(Graph& g) {
  for (NodeId id : std::vector<NodeId>(g.order())) {
    Node& n = g.node(id);
    if (!n.is_onnx_op("BatchNormalization") || n.opset < 14) continue;
    if (n.attr_int("training_mode", 0) != 0) {  // exported in training mode: its running stats become outputs
      for (size_t k = 1; k < n.outputs.size() && k < 3; ++k) {
        if (n.outputs[k].valid() && std::find(g.outputs.begin(), g.outputs.end(), n.outputs[k]) == g.outputs.end())
          g.outputs.push_back(n.outputs[k]);
      }
      continue;
    }
    if (n.outputs.size() > 1) continue;
    if (n.inputs.size() < 5 || g.value(n.inputs[3]).role != ValueRole::State ||
        g.value(n.inputs[4]).role != ValueRole::State)
      continue;
    n.attributes["training_mode"] = int64_t{1};
    for (int k : {3, 4}) {
      const Value& stat = g.value(g.node(id).inputs[k]);
      Value out{.name = g.unused_value_name(stat.name + "_updated"), .dtype = stat.dtype, .shape = stat.shape};
      out.producer = id;
      ValueId v = g.add_value(std::move(out));
      g.node(id).outputs.push_back(v);
      g.outputs.push_back(v);
    }
  }
}

// A Dropout of ratio 0 (torchvision's VisionTransformer keeps nn.Dropout(0.0) layers): a constant ratio
// input from opset 12, the attribute before (0.5 where absent).
bool drops_nothing(const Graph& g, const Node& n) {
  if (n.opset < 12) return n.attr_float("ratio", 0.5) == 0.0;
  if (n.inputs.size() < 2 || !n.inputs[1].valid()) return false;
  const Value& ratio = g.value(n.inputs[1]);
  return ratio.data && ratio.data->numel() == 1 && ratio.data->to_double()[0] == 0.0;
}

// Whether a Dropout's mask output is absent or read by nobody.
bool mask_unused(const Graph& g, const Node& n) {
  if (n.outputs.size() < 2 || !n.outputs[1].valid()) return true;
  const ValueId mask = n.outputs[1];
  return g.consumers(mask).empty() && std::find(g.outputs.begin(), g.outputs.end(), mask) == g.outputs.end();
}

// Dropout nodes: each gets its own seed from options.dropout_seed and its position (nodes without a seed
// attribute would otherwise all draw the same masks), or, with dropout off or a ratio of 0, becomes the
// identity: an Identity node where nothing reads its mask (no mask drawn or copied, and no DropoutGrad:
// 2.7% of that ViT's step at one thread by `perf`), else training_mode omitted, which means false.
void seed_or_disable_dropout(Graph& g, const TrainingRecipeOptions& o) {
  uint64_t position = 0;
  for (NodeId id : g.order()) {
    Node& n = g.node(id);
    if (n.op_type != "Dropout" || !n.domain.empty()) continue;
    if (!o.dropout || drops_nothing(g, n)) {
      if (mask_unused(g, n)) {
        if (n.outputs.size() > 1 && n.outputs[1].valid()) g.value(n.outputs[1]).producer = NodeId{};
        n.op_type = "Identity";
        n.inputs.resize(1);
        n.outputs.resize(1);
        n.attributes = {};
      } else if (!o.dropout && n.inputs.size() > 2) {
        n.inputs.resize(2);
      }
      continue;
    }
    if (!o.dropout_seed) continue;
    const auto model_seed = static_cast<uint64_t>(n.attr_int("seed", 0));
    n.attributes["seed"] = static_cast<int64_t>(o.dropout_seed(model_seed, position++));
  }
}

// fp16 loss scaling: a float32 scalar graph input `loss_scale` (named into `input`) and the value
// loss·loss_scale, which the training graph minimises, so every gradient comes out multiplied by the scale
// (the backward pass in float16 keeps small gradients representable). An input, not a constant, so the
// scale can change between steps and constant folding never bakes it in. Returns the product's name.
std::string attach_loss_scale(Graph& g, ValueId loss, std::string& input) {
  input = g.unused_value_name("loss_scale");
  ValueId scale =
      g.add_value({.name = input, .dtype = DType::Float32, .shape = Shape::of({}), .role = ValueRole::Input});
  g.inputs.push_back(scale);
  const std::string name = g.unused_value_name(g.value(loss).name + "_scaled");
  ValueId scaled = g.add_value({.name = name});
  auto it = g.info.opsets.find("");
  NodeId node = g.add_node({.name = name,
                            .op_type = "Mul",
                            .opset = std::max(it == g.info.opsets.end() ? 17 : it->second, 13),
                            .inputs = {loss, scale},
                            .outputs = {scaled}});
  infer_node(g, node, *OpRegistry::builtin().find("", "Mul"));
  return name;
}

// The GELU formulas, the Gathers moved before their Transposes, then the MatMuls fused, in this order in
// every precision: a product would fold a formula's final 0.5 into its alpha, and a Transpose that a
// Gather no longer reads can fold into a product.
void fuse_transformer_ops(Graph& g, const TrainingRecipeOptions& o, TrainingRecipe& r) {
  if (o.fuse_gelu) r.fused_gelus = fuse_gelu(g);
  if (o.gather_before_transpose) r.transposes_after_gathers = gather_before_transpose(g);
  if (o.fuse_matmul) r.fused_matmuls = fuse_matmul(g);
}

}  // namespace

TrainingRecipe make_training_recipe(const Graph& model, const TrainingRecipeOptions& options) {
  if (model.inputs.empty()) throw Error("training needs a model with a data input; this one has none");
  Graph forward = model;
  TrainingRecipe r;
  for (ValueId in : forward.inputs) r.inputs.push_back(forward.value(in).name);
  if (options.live_conv_taps_only) r.live_conv_taps = train_live_conv_taps_only(forward);
  // Before autocast, in any precision: a TapMajorConv is no Conv to cast, so under bf16 or fp16 these
  // convolutions stay float32 on the CPU's own kernels, which beat oneDNN's bfloat16 ones over such
  // small planes several times (training_recipe.h).
  if (options.tap_major_conv_weights) r.tap_major_conv_weights = train_tap_major_conv_weights(forward);
  batch_norm_to_training_mode(forward);
  seed_or_disable_dropout(forward, options);
  r.loss = attach_loss(forward, options.loss);
  // Under bf16 or fp16, before autocast: autocast then casts the FusedMatMul's operands, with the Transposes
  // and constant scalings folded into it, not left as float32 passes between its Casts (mixed_precision.h).
  // In float32, after the other fusions: the evaluation graph keeps the model's nodes.
  const bool half = options.precision != Precision::fp32;
  if (half) fuse_transformer_ops(forward, options, r);
  apply_mixed_precision(forward, options.precision, {.cpu_float32_convs = options.cpu_float32_convs});
  // The Casts to half before the Transposes that lead to half products (float32_products.h).
  if (half && options.fold_casts_into_products) r.casts_before_transposes = move_half_casts_before_transposes(forward);
  // Evaluation computes in the same precision; it never scales its loss.
  r.evaluation = make_inference_graph(forward);
  // In every precision: autocast leaves BatchNorm, Add and Relu in float32.
  if (options.fuse_batch_norm_relu) r.fused_batch_norm_relus = fuse_batch_norm_relu(forward);  // training's only
  if (options.pool_before_relu) r.pools_before_relus = pool_before_relu(forward);  // after: a fused Relu stays
  if (options.fuse_add_relu) r.fused_add_relus = fuse_add_relu(forward);
  if (!half) fuse_transformer_ops(forward, options, r);
  std::string minimised = r.loss.loss;
  if (options.scale_loss) minimised = attach_loss_scale(forward, r.loss.loss_value, r.loss_scale_input);
  r.training = build_training_graph(forward, {.loss = minimised});
  // Half products write the float32 gradients the Casts of autodiff would make of them (float32_products.h).
  if (half && options.fold_casts_into_products) r.casts_into_products = fold_casts_into_products(r.training);
  return r;
}

Graph make_inference_graph(const Graph& graph) {
  Graph g = graph;
  std::vector<ValueId> dropped;
  for (NodeId id : g.order()) {
    Node& n = g.node(id);
    if (n.is_onnx_op("BatchNormalization") && n.opset >= 14 && n.attr_int("training_mode", 0) != 0) {
      n.attributes["training_mode"] = int64_t{0};
      dropped.insert(dropped.end(), n.outputs.begin() + 1, n.outputs.end());
      n.outputs.resize(1);
    } else if (n.is_onnx_op("BatchNormalization") && n.opset < 14 && n.outputs.size() > 1) {
      dropped.insert(dropped.end(), n.outputs.begin() + 1, n.outputs.end());
      n.outputs.resize(1);
    } else if (n.op_type == "Dropout" && n.domain.empty() && n.inputs.size() > 2) {
      n.inputs.resize(2);  // training_mode omitted: false, y = x
    }
  }
  for (ValueId v : dropped) {
    g.value(v).producer = NodeId{};
    std::erase(g.outputs, v);
  }
  return g;
}

}  // namespace onnxtrain
